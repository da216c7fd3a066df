package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/trawl-dev/trawl/agent"
)

// Case is one line of a dataset: the conversation to run and what a good
// run of it is.
//
//	{"id": "orders", "messages": ["How many open orders are there?"], "expect": {"tools": ["list_orders"]}}
//	{"id": "recorded", "transcript": "recorded.json", "tags": ["smoke"]}
//
// Fields (any other is an error):
//
//   - id: string, required, unique in the dataset.
//   - messages: the user messages, asked in order.
//   - transcript: a replay transcript (agent.Transcript): a path,
//     relative to the dataset's folder, or the transcript inline as an
//     object. Its user messages are asked when messages is absent; it is
//     what the replay model plays, and its recorded answers and verdicts
//     are the case's baseline (verdict_changed).
//   - agent: the agent to run it against (default: the run's --agent).
//   - expect: the expectations (see Expect).
//   - tags: strings, to filter and group cases.
//
// A case needs messages or a transcript (or both).
type Case struct {
	ID       string   `json:"id"`
	Messages []string `json:"messages,omitempty"`
	// Transcript is the case's recording, parsed; nil without one.
	Transcript *agent.Transcript `json:"transcript,omitempty"`
	Agent      string            `json:"agent,omitempty"`
	Expect     *Expect           `json:"expect,omitempty"`
	Tags       []string          `json:"tags,omitempty"`
	// Line is the case's line in its dataset file (1-based; 0 when built
	// otherwise).
	Line int `json:"-"`
}

// Questions are the user messages the case asks: its messages, else its
// transcript's.
func (c *Case) Questions() []string {
	if len(c.Messages) > 0 {
		return c.Messages
	}
	if c.Transcript == nil {
		return nil
	}
	out := make([]string, len(c.Transcript.Turns))
	for i, t := range c.Transcript.Turns {
		out[i] = t.User
	}
	return out
}

// Dataset is a parsed dataset file.
type Dataset struct {
	Name  string  `json:"name"`
	Cases []*Case `json:"cases"`
}

// MaxDatasetBytes bounds a dataset (inline transcripts included).
const MaxDatasetBytes = 64 << 20

// LoadDataset reads and parses a dataset file: one case per line (blank
// lines and lines starting with # are skipped). Transcript paths are
// read relative to the file's folder.
func LoadDataset(path string) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDatasetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	ds, err := ParseDataset(data, filepath.Dir(path), true)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	ds.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return ds, nil
}

// ParseDataset parses a dataset's JSONL text. A transcript named by path
// is read from dir, and only when files is true (a dataset sent over the
// API names none: its transcripts are inline). It is strict: unknown
// fields, wrong types, a missing or repeated id, a case without messages
// or transcript, a bad transcript and bad expectations are errors that
// start with the line number ("3: expect.answer_matches: …").
func ParseDataset(data []byte, dir string, files bool) (*Dataset, error) {
	if len(data) > MaxDatasetBytes {
		return nil, fmt.Errorf(" larger than %d bytes", MaxDatasetBytes)
	}
	ds := &Dataset{}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), MaxDatasetBytes)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		c, err := parseCase(text, dir, files)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", line, err)
		}
		if at, dup := seen[c.ID]; dup {
			return nil, fmt.Errorf("%d: id %q repeats the case of line %d", line, c.ID, at)
		}
		seen[c.ID] = line
		c.Line = line
		ds.Cases = append(ds.Cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%d: %w", line+1, err)
	}
	if len(ds.Cases) == 0 {
		return nil, errors.New(" the dataset holds no case (one JSON object per line)")
	}
	return ds, nil
}

// rawCase is a case as written.
type rawCase struct {
	ID         *string         `json:"id"`
	Messages   []string        `json:"messages"`
	Transcript json.RawMessage `json:"transcript"`
	Agent      string          `json:"agent"`
	Expect     *Expect         `json:"expect"`
	Tags       []string        `json:"tags"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

func parseCase(text []byte, dir string, files bool) (*Case, error) {
	if text[0] != '{' {
		return nil, errors.New("want a JSON object per line")
	}
	if err := exactKeys(text, reflect.TypeFor[rawCase](), map[string]reflect.Type{"expect": reflect.TypeFor[Expect]()}); err != nil {
		return nil, err
	}
	var raw rawCase
	if err := strictDecode(text, &raw); err != nil {
		return nil, err
	}
	switch {
	case raw.ID == nil:
		return nil, errors.New("id: missing")
	case !idPattern.MatchString(*raw.ID):
		return nil, fmt.Errorf("id: want letters, digits and . _ : / - (at most 128), not %q", *raw.ID)
	}
	c := &Case{ID: *raw.ID, Messages: raw.Messages, Agent: raw.Agent, Expect: raw.Expect, Tags: raw.Tags}
	for i, m := range raw.Messages {
		if strings.TrimSpace(m) == "" {
			return nil, fmt.Errorf("messages[%d]: the message is blank", i)
		}
	}
	if raw.Messages != nil && len(raw.Messages) == 0 {
		return nil, errors.New("messages: empty; give at least one user message, or leave it out and give a transcript")
	}
	for i, tag := range raw.Tags {
		if strings.TrimSpace(tag) == "" {
			return nil, fmt.Errorf("tags[%d]: blank", i)
		}
	}
	switch t := bytes.TrimSpace(raw.Transcript); {
	case len(t) == 0 || string(t) == "null":
		if len(c.Messages) == 0 {
			return nil, errors.New("a case needs messages or a transcript")
		}
	case t[0] == '"':
		var path string
		if err := json.Unmarshal(t, &path); err != nil {
			return nil, fmt.Errorf("transcript: %v", err)
		}
		if !files {
			return nil, fmt.Errorf("transcript: a dataset sent inline holds its transcripts inline, not as paths (%q)", path)
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		tr, err := agent.LoadTranscript(path)
		if err != nil {
			return nil, err
		}
		c.Transcript = tr
	case t[0] == '{':
		tr, err := agent.ParseTranscript(t)
		if err != nil {
			return nil, err
		}
		if tr.Name == "" {
			tr.Name = c.ID
		}
		c.Transcript = tr
	default:
		return nil, errors.New("transcript: want a path or an inline transcript object")
	}
	if c.Expect != nil {
		if err := c.Expect.validate(); err != nil {
			return nil, fmt.Errorf("expect.%w", err)
		}
	}
	return c, nil
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// exactKeys refuses an object member that is not one of t's JSON names
// spelled exactly, or that repeats: encoding/json would match "ID" to
// "id" and let the last of two "id"s win, silently changing the case.
// nested names the members whose object values are checked against
// their own type. Anything else wrong is left to strictDecode.
func exactKeys(data []byte, t reflect.Type, nested map[string]reflect.Type) error {
	names := map[string]bool{}
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names[name] = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		switch {
		case seen[key]:
			return fmt.Errorf("field %q repeats", key)
		case !names[key]:
			for name := range names {
				if strings.EqualFold(name, key) {
					return fmt.Errorf("unknown field %q (names are case-sensitive: %q)", key, name)
				}
			}
			return fmt.Errorf("unknown field %q", key)
		}
		seen[key] = true
		if nt, ok := nested[key]; ok {
			if err := exactKeys(value, nt, nil); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}

// jsonError words a decoding error with the field it is about.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: want %s, not a JSON %s", te.Field, te.Type, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at column %d: %v", se.Offset, se)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errors.New(msg)
}
