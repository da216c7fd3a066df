package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/loop"
)

// Transcript is a recorded conversation: the user's messages and, for
// each, the assistant's steps. The Replay model plays the steps while the
// tools run live.
//
// # Format
//
// A transcript is one JSON object:
//
//	{
//	  "name": "open orders",
//	  "turns": [
//	    {
//	      "user": "How many open orders over $100 do we have?",
//	      "steps": [
//	        {
//	          "text": "Let me list the open orders.",
//	          "reasoning": "All pages are needed to count.",
//	          "tool_calls": [
//	            {"name": "list_orders", "arguments": {"status": "open", "_all_pages": true, "_fields": ["id", "total"]}}
//	          ]
//	        },
//	        {"text": "We have 42 open orders over $100."}
//	      ]
//	    }
//	  ]
//	}
//
// Fields (any other field is an error):
//
//   - name: string, optional; names the transcript in messages and reports.
//   - turns: array, at least one.
//   - turns[i].user: string, required, not blank. The question the turn
//     answers: Replay plays the turn whose question matches the live user
//     message (see Replay), and a driver such as `trawl replay` sends it.
//   - turns[i].steps: array, at least one. Step j is the assistant's
//     (j+1)-th model call of the turn. Every step but the last has
//     tool_calls and the last has none, because a step without tool
//     calls ends the turn.
//   - steps[j].text: string, optional. Streamed before the step's calls.
//   - steps[j].reasoning: string, optional. Streamed first, as reasoning.
//     A step needs text or tool_calls; reasoning alone is not a step.
//   - steps[j].tool_calls: array, optional. Each call is played in order.
//   - tool_calls[k].name: string, required: the tool's model-facing name,
//     as the agent offers it (e.g. list_orders, search_tools,
//     queryToolResult).
//   - tool_calls[k].arguments: a JSON object, optional (absent or null:
//     {}). Reserved arguments (_all_pages, _fields, _for_each, _filter,
//     _aggregate, _refresh) are written like any other. A string argument may hold
//     {{lastResultId}}, replaced when played by the newest _resultId a
//     tool result of the conversation carried (so a recorded
//     queryToolResult can name a result handed out live).
//   - tool_calls[k].verdict: string, optional: the call's verdict when it
//     was recorded (complete, partial, unstable, first_page_only,
//     single_response, failed or unverified; see agent/claims). When the
//     live call's verdict differs, the recorded answer is not played (it
//     rests on what this run did not get) and `trawl replay` reports a
//     verdict_changed.
//
// Positions in errors are zero-based JSON paths, such as
// turns[1].steps[0].tool_calls[2].arguments.
type Transcript struct {
	Name  string           `json:"name,omitempty"`
	Turns []TranscriptTurn `json:"turns"`
}

// TranscriptTurn is one user message and the assistant's steps.
type TranscriptTurn struct {
	User  string           `json:"user"`
	Steps []TranscriptStep `json:"steps"`
}

// TranscriptStep is one model call: optional reasoning and text, then
// the tool calls.
type TranscriptStep struct {
	Text      string           `json:"text,omitempty"`
	Reasoning string           `json:"reasoning,omitempty"`
	ToolCalls []TranscriptCall `json:"tool_calls,omitempty"`
}

// TranscriptCall is one recorded tool call.
type TranscriptCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object; ParseTranscript stores it compacted.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Verdict is the recorded call's verdict; "" when not recorded.
	Verdict claims.Verdict `json:"verdict,omitempty"`
}

// MaxTranscriptBytes bounds a transcript file.
const MaxTranscriptBytes = 16 << 20

// LoadTranscript reads and parses a transcript file (see Transcript for
// the format). A transcript without a name takes the file's base name.
func LoadTranscript(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTranscriptBytes+1))
	if err != nil {
		return nil, fmt.Errorf("transcript %s: %w", path, err)
	}
	if len(data) > MaxTranscriptBytes {
		return nil, fmt.Errorf("transcript %s: larger than %d bytes", path, MaxTranscriptBytes)
	}
	t, err := parseTranscript(data)
	if err != nil {
		return nil, fmt.Errorf("transcript %s: %w", path, err)
	}
	if t.Name == "" {
		t.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return t, nil
}

// ParseTranscript parses a transcript (see Transcript for the format).
// It is strict: unknown fields, wrong types, blank user messages, empty
// steps, calls without a name, arguments that are not an object, and
// tool calls on a turn's last step (or none on an earlier one) are
// errors that name the position.
func ParseTranscript(data []byte) (*Transcript, error) {
	t, err := parseTranscript(data)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return t, nil
}

func parseTranscript(data []byte) (*Transcript, error) {
	if len(data) > MaxTranscriptBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxTranscriptBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, replaySyntaxError(data, err)
	}
	rest := int(dec.InputOffset())
	if extra := bytes.TrimLeft(data[rest:], " \t\r\n"); len(extra) > 0 {
		return nil, fmt.Errorf("data after the transcript object at %s", replayLineCol(data, len(data)-len(extra)))
	}
	t := &Transcript{}
	var turns []json.RawMessage
	err := replayObject("", top, map[string]any{"name": &t.Name, "turns": &turns}, "turns")
	if err != nil {
		return nil, err
	}
	if len(turns) == 0 {
		return nil, errors.New("turns: a transcript needs at least one turn")
	}
	t.Turns = make([]TranscriptTurn, len(turns))
	for i, raw := range turns {
		if err := replayTurn(fmt.Sprintf("turns[%d]", i), raw, &t.Turns[i]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func replayTurn(path string, raw json.RawMessage, turn *TranscriptTurn) error {
	var steps []json.RawMessage
	if err := replayObject(path, raw, map[string]any{"user": &turn.User, "steps": &steps}, "user", "steps"); err != nil {
		return err
	}
	if strings.TrimSpace(turn.User) == "" {
		return fmt.Errorf("%s.user: the user message is blank", path)
	}
	if len(steps) == 0 {
		return fmt.Errorf("%s.steps: a turn needs at least one step", path)
	}
	turn.Steps = make([]TranscriptStep, len(steps))
	for j, raw := range steps {
		spath := fmt.Sprintf("%s.steps[%d]", path, j)
		if err := replayStep(spath, raw, &turn.Steps[j]); err != nil {
			return err
		}
		last := j == len(steps)-1
		switch calls := len(turn.Steps[j].ToolCalls); {
		case last && calls > 0:
			return fmt.Errorf("%s: the last step of a turn makes no tool calls (it is the answer); add a step with the final text", spath)
		case !last && calls == 0:
			return fmt.Errorf("%s: a step without tool calls ends the turn, so it must be the last; %d more step(s) follow", spath, len(steps)-1-j)
		}
	}
	return nil
}

func replayStep(path string, raw json.RawMessage, step *TranscriptStep) error {
	var calls []json.RawMessage
	if err := replayObject(path, raw, map[string]any{"text": &step.Text, "reasoning": &step.Reasoning, "tool_calls": &calls}); err != nil {
		return err
	}
	if step.Text == "" && len(calls) == 0 {
		return fmt.Errorf("%s: a step needs text or tool_calls", path)
	}
	step.ToolCalls = make([]TranscriptCall, len(calls))
	for k, raw := range calls {
		cpath := fmt.Sprintf("%s.tool_calls[%d]", path, k)
		c := &step.ToolCalls[k]
		var args json.RawMessage
		var verdict string
		if err := replayObject(cpath, raw, map[string]any{"name": &c.Name, "arguments": &args, "verdict": &verdict}, "name"); err != nil {
			return err
		}
		if c.Verdict = claims.Verdict(verdict); verdict != "" && !slices.Contains(claims.Verdicts, c.Verdict) {
			return fmt.Errorf("%s.verdict: want one of %v, not %q", cpath, claims.Verdicts, verdict)
		}
		if strings.TrimSpace(c.Name) == "" || strings.TrimSpace(c.Name) != c.Name {
			return fmt.Errorf("%s.name: want a tool name, not %q", cpath, c.Name)
		}
		switch kind := replayKind(args); kind {
		case "null":
			c.Arguments = json.RawMessage("{}")
		case "an object":
			var b bytes.Buffer
			if err := json.Compact(&b, args); err != nil {
				return fmt.Errorf("%s.arguments: %v", cpath, err)
			}
			c.Arguments = b.Bytes()
		default:
			return fmt.Errorf("%s.arguments: want a JSON object, not %s", cpath, kind)
		}
	}
	if len(calls) == 0 {
		step.ToolCalls = nil
	}
	return nil
}

// replayObject decodes the JSON object raw into fields (key → pointer),
// rejecting unknown keys and requiring the keys in required.
func replayObject(path string, raw json.RawMessage, fields map[string]any, required ...string) error {
	at := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	where := path
	if where == "" {
		where = "the transcript"
	}
	if kind := replayKind(raw); kind != "an object" {
		return fmt.Errorf("%s: want a JSON object, not %s", where, kind)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			known := make([]string, 0, len(fields))
			for f := range fields {
				known = append(known, f)
			}
			slices.Sort(known)
			return fmt.Errorf("%s: unknown field %q (known: %s)", where, k, strings.Join(known, ", "))
		}
		v := obj[k]
		if _, isRaw := dst.(*json.RawMessage); !isRaw && replayKind(v) == "null" {
			return fmt.Errorf("%s: want %s, not null", at(k), replayWant(dst))
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("%s: want %s, not %s", at(k), replayWant(dst), replayKind(v))
		}
	}
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			return fmt.Errorf("%s: missing", at(k))
		}
	}
	return nil
}

func replayWant(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *[]json.RawMessage:
		return "an array"
	}
	return "JSON"
}

// replayKind names the JSON type of raw, as errors say it.
func replayKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "null"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func replaySyntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included.
		return fmt.Errorf("invalid JSON at %s: %v", replayLineCol(data, int(se.Offset)-1), se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// replayLineCol is the 1-based line and column of the byte at offset.
func replayLineCol(data []byte, offset int) string {
	offset = min(max(offset, 0), len(data))
	line := 1 + bytes.Count(data[:offset], []byte("\n"))
	col := offset - bytes.LastIndexByte(data[:offset], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// Validate reports the tool calls of t that name none of toolNames, the
// model-facing names of the tools the agent offers, so that a deployment
// can refuse such a transcript at start. (Replay itself plays them
// anyway, and the runner tells the model the tool is unknown.)
func (t *Transcript) Validate(toolNames []string) error {
	known := make(map[string]bool, len(toolNames))
	for _, n := range toolNames {
		known[n] = true
	}
	var unknown []string
	for i, turn := range t.Turns {
		for j, step := range turn.Steps {
			for k, c := range step.ToolCalls {
				if !known[c.Name] {
					unknown = append(unknown, fmt.Sprintf("%s (turns[%d].steps[%d].tool_calls[%d])", c.Name, i, j, k))
				}
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	name := ""
	if t.Name != "" {
		name = fmt.Sprintf(" %q", t.Name)
	}
	offered := slices.Clone(toolNames)
	slices.Sort(offered)
	return fmt.Errorf("transcript%s calls tools the agent does not offer: %s; offered: %s",
		name, strings.Join(unknown, ", "), strings.Join(offered, ", "))
}

// ReplayOptions configures a Replay model.
type ReplayOptions struct {
	// ChunkSize is the number of characters (runes) per text or reasoning
	// delta. Zero: 12.
	ChunkSize int
}

// Replay is a Model that plays a Transcript's assistant steps while the
// tools run live: evaluation runs, and the offline demo.
//
// Which step to play depends only on the request's messages, so a Replay
// holds no state, survives restarts and serves concurrent threads: the
// turn is the one whose recorded question matches the newest user message
// (Match: the same text once case, punctuation and spacing are set aside,
// else the closest by words), and the step the number of assistant
// messages after that message. (The runner appends one assistant message
// per step, tool results as tool messages.) So the questions may be asked
// in any order, and again; a message that matches no recorded question is
// answered with a short text saying so and listing the recorded
// questions, with reason "stop".
//
// When the live calls of the turn did not do what the recording did (a
// call refused or failed, or its binding does not loop so its reserved
// arguments were stripped), the turn's answer step says so instead of
// the recorded answer, which would claim what was not checked.
//
// A step streams its reasoning, then its text, in deltas of ChunkSize
// characters, then each tool call: an EventToolCallStart with the id
// call_<turn>_<step>_<k> (zero-based) and the recorded name, then the
// arguments in two or three deltas (turn is the user message's place in
// the conversation, so ids stay unique when a question is asked again).
// It ends with exactly one EventFinish: reason "tool_calls" when the step
// has calls, "stop" otherwise, and no usage. A call is played even when
// req.Tools lacks its name (see Transcript.Validate). Past the last step
// of a turn, the step is a short text saying the recording has no more,
// with reason "stop".
//
// The sequence ends with an error instead of EventFinish only when ctx
// is done, or when the request holds no user message.
type Replay struct {
	turns []TranscriptTurn
	name  string
	chunk int
}

// NewReplay returns a Replay model playing t. It copies what it needs:
// changing t afterwards does not change the Replay.
func NewReplay(t *Transcript, opt ReplayOptions) *Replay {
	r := &Replay{name: t.Name, chunk: opt.ChunkSize}
	if r.chunk <= 0 {
		r.chunk = 12
	}
	r.turns = make([]TranscriptTurn, len(t.Turns))
	for i, turn := range t.Turns {
		r.turns[i] = TranscriptTurn{User: turn.User, Steps: make([]TranscriptStep, len(turn.Steps))}
		for j, step := range turn.Steps {
			s := step
			s.ToolCalls = make([]TranscriptCall, len(step.ToolCalls))
			for k, c := range step.ToolCalls {
				s.ToolCalls[k] = TranscriptCall{Name: c.Name, Arguments: replayArgs(c.Arguments), Verdict: c.Verdict}
			}
			r.turns[i].Steps[j] = s
		}
	}
	return r
}

// replayArgs is the compact text of recorded arguments; {} for none.
func replayArgs(raw json.RawMessage) json.RawMessage {
	if replayKind(raw) == "null" {
		return json.RawMessage("{}")
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return slices.Clone(raw) // played as written
	}
	return b.Bytes()
}

// Name is the transcript's name ("" when it has none).
func (r *Replay) Name() string { return r.name }

// ErrReplayNoUserMessage: a Replay cannot place a request without any
// user message in the transcript.
var ErrReplayNoUserMessage = errors.New("replay: the request has no user message")

// Position returns the turn and step a Replay plays for messages: the
// recorded turn whose question matches the newest user message (-1 when
// none does, or there is no user message) and the number of assistant
// messages after that message.
func (r *Replay) Position(messages []Message) (turn, step int) {
	asked, question, step := replayAsked(messages)
	if asked < 0 {
		return -1, 0
	}
	return r.Match(question, asked), step
}

// replayAsked reads the newest user message: its place among the user
// messages (-1 when there is none), its text, and the assistant messages
// after it.
func replayAsked(messages []Message) (asked int, question string, after int) {
	asked = -1
	for _, m := range messages {
		switch m.Role {
		case RoleUser:
			asked++
			question, after = m.Content, 0
		case RoleAssistant:
			after++
		}
	}
	return asked, question, after
}

// Match returns the recorded turn whose question matches question, or -1
// when none does. A turn matches when its question is the same text once
// case, punctuation and runs of spaces are set aside; failing that, the
// turn whose question shares the most of question's words (plurals
// folded, words such as "the", "how" or "do" left out) matches, when it
// shares at least half of them. Ties go to the turn at index at (the
// conversation's place: the recording in order), then to the question
// closest in length by words, then to the earlier turn.
func (r *Replay) Match(question string, at int) int {
	q := replayNormal(question)
	best := -1
	for i, turn := range r.turns {
		if replayNormal(turn.User) == q && (best < 0 || i == at) {
			best = i
		}
	}
	if best >= 0 || q == "" {
		return best
	}
	asked := replayWords(question)
	if len(asked) == 0 {
		return -1
	}
	var bestCover, bestDice float64
	for i, turn := range r.turns {
		rec := replayWords(turn.User)
		shared := 0
		for w := range asked {
			if rec[w] {
				shared++
			}
		}
		if shared == 0 {
			continue
		}
		cover := float64(shared) / float64(len(asked))
		dice := 2 * float64(shared) / float64(len(asked)+len(rec))
		if cover < 0.5 {
			continue
		}
		switch {
		case best < 0, cover > bestCover, cover == bestCover && dice > bestDice,
			cover == bestCover && dice == bestDice && i == at:
			best, bestCover, bestDice = i, cover, dice
		}
	}
	return best
}

// replayNormal is s in lower case with every run of characters other
// than letters and digits one space, trimmed.
func replayNormal(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(c rune) bool {
		return !unicode.IsLetter(c) && !unicode.IsNumber(c)
	}), " ")
}

// replayStopWords are left out when questions are compared by words: they
// say how a question is asked, not what about.
var replayStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but of to in on at by for from with about into over under
		than then so as is are was were be been being do does did done have has had having i me my we us our
		you your they them their it its this that these those there here what which who whom whose when where
		why how many much more most any all some each every can could would should will shall may might must
		please tell show give let know just also not no yes if`) {
		m[w] = true
	}
	return m
}()

// replayWords is the set of s's words that say what it asks about, in
// lower case with plurals folded (orders → order, properties → property).
func replayWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(replayNormal(s)) {
		if replayStopWords[w] || len([]rune(w)) == 1 && !unicode.IsDigit([]rune(w)[0]) {
			continue // and the s of "order's"
		}
		switch {
		case len(w) > 4 && strings.HasSuffix(w, "ies"):
			w = w[:len(w)-3] + "y"
		case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
			w = w[:len(w)-1]
		}
		out[w] = true
	}
	return out
}

// Stream implements Model.
func (r *Replay) Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error] {
	return func(yield func(ModelEvent, error) bool) {
		asked, question, stepIndex := replayAsked(req.Messages)
		if asked < 0 {
			yield(ModelEvent{}, ErrReplayNoUserMessage)
			return
		}
		turn := r.Match(question, asked)
		step := r.step(turn, stepIndex, question)
		if turn >= 0 && r.isAnswer(turn, stepIndex) {
			if dev := replayDeviations(req.Messages, r.turnCalls(turn)); len(dev) > 0 {
				step = TranscriptStep{Text: replayDeviationText(dev)}
			}
		}
		send := func(ev ModelEvent) bool {
			if err := ctx.Err(); err != nil {
				yield(ModelEvent{}, fmt.Errorf("replay: %w", err))
				return false
			}
			return yield(ev, nil)
		}
		for piece := range replayChunks(step.Reasoning, r.chunk) {
			if !send(ModelEvent{Kind: EventReasoningDelta, Text: piece}) {
				return
			}
		}
		for piece := range replayChunks(step.Text, r.chunk) {
			if !send(ModelEvent{Kind: EventTextDelta, Text: piece}) {
				return
			}
		}
		for k, c := range step.ToolCalls {
			id := fmt.Sprintf("call_%d_%d_%d", asked, stepIndex, k)
			if !send(ModelEvent{Kind: EventToolCallStart, Index: k, ToolCallID: id, ToolName: c.Name}) {
				return
			}
			args := withLastResultID(string(c.Arguments), req.Messages)
			n := utf8.RuneCountInString(args)
			for piece := range replayChunks(args, max((n+2)/3, 1)) {
				if !send(ModelEvent{Kind: EventToolCallDelta, Index: k, ArgsDelta: piece}) {
					return
				}
			}
		}
		reason := "stop"
		if len(step.ToolCalls) > 0 {
			reason = "tool_calls"
		}
		send(ModelEvent{Kind: EventFinish, FinishReason: reason})
	}
}

// LastResultIDRef in a recorded argument stands for the newest
// _resultId any tool result of the conversation carried: a recording
// cannot know the ids a live run hands out, yet a replayed
// queryToolResult must name one.
const LastResultIDRef = "{{lastResultId}}"

// withLastResultID replaces LastResultIDRef in args with the newest
// _resultId among the tool messages ("" when there is none).
func withLastResultID(args string, msgs []Message) string {
	if !strings.Contains(args, LastResultIDRef) {
		return args
	}
	id := ""
	for i := len(msgs) - 1; i >= 0 && id == ""; i-- {
		if msgs[i].Role != RoleTool {
			continue
		}
		env, _ := loop.ReadEnvelope([]byte(msgs[i].Content))
		id = env.ResultID
	}
	return strings.ReplaceAll(args, LastResultIDRef, id)
}

// isAnswer reports whether step is the recorded answer of turn: its last
// step, the one without tool calls.
func (r *Replay) isAnswer(turn, step int) bool {
	return turn < len(r.turns) && step == len(r.turns[turn].Steps)-1 && step > 0
}

// replayReserved are the reserved arguments whose effect a recorded
// answer relies on.
var replayReserved = []string{"_all_pages", "_for_each", "_fields", "_filter", "_aggregate"}

// replayDeviations says how the live tool calls of the current turn
// differed from the recording: a call the runner refused or that failed
// (its result is {"error": …}), and a call that asked for reserved
// arguments but came back without a boundary statement — its binding
// does not loop ("Allow response looping" is off), so the arguments were
// stripped and it saw one response; and a call that asked for every page
// but came back partial or unstable, so the recorded counts are not this
// run's; and a call whose recorded verdict (recorded, the turn's recorded
// calls in order; may be nil) is not its live one. The evidence is the
// messages alone, so a Replay stays stateless.
func replayDeviations(msgs []Message, recorded []TranscriptCall) []string {
	start := 0
	for i, m := range msgs {
		if m.Role == RoleUser {
			start = i + 1
		}
	}
	results := map[string]string{}
	for _, m := range msgs[start:] {
		if m.Role == RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	var out []string
	k := -1 // the call's position in the turn
	for _, m := range msgs[start:] {
		for _, c := range m.ToolCalls {
			k++
			content, ok := results[c.ID]
			if !ok {
				continue
			}
			var res map[string]json.RawMessage
			_ = json.Unmarshal([]byte(content), &res)
			if e, failed := res["error"]; failed && len(res) == 1 {
				var msg string
				_ = json.Unmarshal(e, &msg)
				out = append(out, fmt.Sprintf("`%s` was refused or failed (%s)", c.Name, strings.TrimSuffix(msg, ".")))
				continue
			}
			if k < len(recorded) && recorded[k].Verdict != "" && recorded[k].Name == c.Name {
				if live := claims.ReadCall(c.ID, c.Name, []byte(content), ""); live.Verdict != recorded[k].Verdict {
					out = append(out, fmt.Sprintf("`%s` was %s when recorded and came back %s", c.Name, recorded[k].Verdict, live.Verdict))
				}
				continue
			}
			var args map[string]json.RawMessage
			_ = json.Unmarshal([]byte(c.Arguments), &args)
			var asked []string
			for _, k := range replayReserved {
				if _, ok := args[k]; ok {
					asked = append(asked, "`"+k+"`")
				}
			}
			env, _ := loop.ReadEnvelope([]byte(content))
			if len(asked) > 0 && res != nil && !env.Looped() {
				out = append(out, fmt.Sprintf("`%s` ran without looping (response looping is switched off in this agent's binding), so %s did not apply and it saw a single response",
					c.Name, strings.Join(asked, ", ")))
			}
			// A walk of every page the recording counted that did not
			// see every row this time (a limit, a failed value, data
			// that moved): the recorded totals are not this run's.
			if _, all := args["_all_pages"]; all && env.Boundary != nil && (env.Completion == loop.Partial || env.Completion == loop.Unstable) {
				out = append(out, fmt.Sprintf("`%s` came back %s (stopped by %s), so it did not see every row the recorded answer counted", c.Name, env.Completion, env.Boundary.StopReason))
			}
		}
	}
	return out
}

// replayDeviationText is the answer a Replay gives instead of the
// recorded one when the live calls did not do what the recording did:
// the recorded answer would claim what this run did not check.
func replayDeviationText(dev []string) string {
	return "I can't give the recorded answer, because this run's tool calls differed from the recording: " +
		strings.Join(dev, "; ") + ". The recorded answer relied on those calls, so it would claim more than was checked here. " +
		"Switch \"Allow response looping for this tool\" back on in the agent's bindings (or fix the failing call, or raise the limits that cut the walk) and ask again."
}

// step is the step to play, or the note that no recorded question
// matches question (turn -1), or that the turn's recording is over.
func (r *Replay) step(turn, step int, question string) TranscriptStep {
	name := "recording"
	if r.name != "" {
		name = fmt.Sprintf("recording %q", r.name)
	}
	switch {
	case turn < 0:
		return TranscriptStep{Text: r.noMatchText(name, question)}
	case step >= len(r.turns[turn].Steps):
		return TranscriptStep{Text: fmt.Sprintf("The %s has no more steps in turn %d.", name, turn)}
	}
	return r.turns[turn].Steps[step]
}

// noMatchText answers a question the recording does not hold: a replay
// can only play what was recorded, so it says so and lists what was.
func (r *Replay) noMatchText(name, question string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This answer would come from a %s, and none of its recorded questions matches %q, so there is nothing to replay. ",
		name, shortQuestion(question))
	if len(r.turns) == 1 {
		b.WriteString("Ask the recorded question:\n")
	} else {
		fmt.Fprintf(&b, "Ask one of the %d recorded questions:\n", len(r.turns))
	}
	for _, t := range r.turns {
		b.WriteString("\n- ")
		b.WriteString(strings.Join(strings.Fields(t.User), " "))
	}
	return b.String()
}

// shortQuestion is q on one line, cut to 120 characters.
func shortQuestion(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if r := []rune(q); len(r) > 120 {
		return string(r[:119]) + "…"
	}
	return q
}

// replayChunks splits s into pieces of n runes (the last may be shorter).
func replayChunks(s string, n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for s != "" {
			end, count := 0, 0
			for end < len(s) && count < n {
				_, size := utf8.DecodeRuneInString(s[end:])
				end += size
				count++
			}
			if !yield(s[:end]) {
				return
			}
			s = s[end:]
		}
	}
}

// turnCalls are the recorded calls of turn i, in order.
func (r *Replay) turnCalls(i int) []TranscriptCall {
	t := Transcript{Turns: r.turns}
	return t.turnCalls(i)
}
