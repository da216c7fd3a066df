package discovery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/tools"
)

// Input JSON Schemas of the meta-tools, as the model is given them: their
// types, bounds and required keys, no descriptions. Each parameter is told
// once, in the tool's description (the prompts package), which is sent
// with the schema in every request that offers the tool.
const (
	SearchToolsSchema = `{"type":"object","properties":{` +
		`"query":{"type":"string"},` +
		`"toolkit":{"type":"string"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":10}},` +
		`"required":["query"],"additionalProperties":false}`
	LoadToolSchema = `{"type":"object","properties":{` +
		`"toolName":{"type":"string"},` +
		`"toolNames":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":10}},` +
		`"additionalProperties":false}`
	ListConnectionsSchema = `{"type":"object","properties":{},"additionalProperties":false}`
	ConnectToolkitSchema  = `{"type":"object","properties":{` +
		`"toolkit":{"type":"string"}},` +
		`"required":["toolkit"],"additionalProperties":false}`
)

// MaxLoadNames is how many tools one load_tool call may load.
const MaxLoadNames = 10

// maxResultDescription is how long a description search_tools and
// load_tool show may be, in characters.
const maxResultDescription = 200

// MetaTool is how a meta-tool is offered to the model.
type MetaTool struct {
	Name        string
	Description string          // from the prompts package
	InputSchema json.RawMessage // one of the *Schema constants
}

var metaSchemas = map[string]string{
	MetaSearchTools:     SearchToolsSchema,
	MetaLoadTool:        LoadToolSchema,
	MetaListConnections: ListConnectionsSchema,
	MetaConnectToolkit:  ConnectToolkitSchema,
}

// LookupMeta returns the meta-tool named name (MetaSearchTools, MetaLoadTool,
// MetaListConnections or MetaConnectToolkit).
func LookupMeta(name string) (MetaTool, bool) {
	schema, ok := metaSchemas[name]
	if !ok {
		return MetaTool{}, false
	}
	return MetaTool{Name: name, Description: prompts.Text(name), InputSchema: json.RawMessage(schema)}, true
}

// ErrInvalidArguments wraps every error about the arguments of a
// meta-tool call. The message is written for the model that made the call.
var ErrInvalidArguments = errors.New("invalid arguments")

// ErrUnknownTool is what an *UnknownToolError matches with errors.Is.
var ErrUnknownTool = errors.New("unknown tool")

// UnknownToolError is load_tool's answer to a name no pooled tool has.
type UnknownToolError struct {
	Name    string
	Closest []string // names of the pooled tools most like Name, best first
}

func (e *UnknownToolError) Error() string {
	msg := fmt.Sprintf("no tool named %q to load", e.Name)
	if len(e.Closest) > 0 {
		msg += "; the closest names are " + strings.Join(e.Closest, ", ")
	} else {
		msg += "; find tool names with search_tools"
	}
	return msg
}

func (e *UnknownToolError) Unwrap() error { return ErrUnknownTool }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArguments, fmt.Sprintf(format, args...))
}

// decodeArgs reads a meta-tool's arguments object strictly: an absent or
// null object is empty, and keys other than allowed are an error.
func decodeArgs(args json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		return map[string]json.RawMessage{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, invalid("the arguments must be a JSON object")
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return nil, invalid("unknown argument %q (the arguments are %s)", k, strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

// stringArg reads an optional string argument; null is absent.
func stringArg(m map[string]json.RawMessage, key string) (string, bool, error) {
	raw, ok := m[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, invalid("%q must be a string", key)
	}
	return s, true, nil
}

// searchResult is one entry of search_tools' answer.
type searchResult struct {
	Name        string `json:"name"`
	Toolkit     string `json:"toolkit"`
	Description string `json:"description"`
	Why         string `json:"why"`
	Loaded      bool   `json:"loaded"`
}

// SearchTool runs the search_tools meta-tool: args are its arguments
// ({"query", "toolkit"?, "limit"?}); loaded reports whether the thread has
// already loaded the tool of the given model-facing name (nil: none). The
// answer is {"results":[{"name","toolkit","description","why","loaded"}]},
// best first, with descriptions cut to 200 characters at a word boundary
// and "why" the one line of Hit.Why; when nothing matches, results is
// empty and a note says what to try.
//
// A limit above MaxSearchLimit is lowered to it. Errors wrap
// ErrInvalidArguments or ErrUnknownToolkit and are written for the model.
func (ix *Index) SearchTool(ctx context.Context, args json.RawMessage, loaded func(name string) bool) (json.RawMessage, error) {
	m, err := decodeArgs(args, "query", "toolkit", "limit")
	if err != nil {
		return nil, err
	}
	q, _, err := stringArg(m, "query")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(q) == "" {
		return nil, invalid(`"query" is required: a few words saying what you want to do`)
	}
	toolkit, _, err := stringArg(m, "toolkit")
	if err != nil {
		return nil, err
	}
	limit := DefaultSearchLimit
	if raw, ok := m["limit"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f != float64(int(f)) {
			return nil, invalid(`"limit" must be a whole number from 1 to %d`, MaxSearchLimit)
		}
		if f < 1 {
			return nil, invalid(`"limit" must be a whole number from 1 to %d`, MaxSearchLimit)
		}
		limit = int(min(f, MaxSearchLimit))
	}
	hits, err := ix.Search(ctx, q, toolkit, limit)
	if err != nil {
		if errors.Is(err, ErrUnknownToolkit) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidArguments, err)
		}
		return nil, err
	}
	out := struct {
		Results []searchResult `json:"results"`
		Note    string         `json:"note,omitempty"`
	}{Results: make([]searchResult, 0, len(hits))}
	for _, h := range hits {
		out.Results = append(out.Results, searchResult{
			Name:        h.Tool.Name,
			Toolkit:     toolkitOf(h.Tool),
			Description: shorten(h.Tool.Description, maxResultDescription),
			Why:         h.Why,
			Loaded:      loaded != nil && loaded(h.Tool.Name),
		})
	}
	if len(hits) == 0 {
		out.Note = "No tool matched. Try other words for the action, or leave out the toolkit."
	}
	return json.Marshal(out)
}

// LoadTool runs the load_tool meta-tool: args are its arguments
// ({"toolName"} or {"toolNames"}, or both), names are the tools'
// model-facing names in pool. It returns the tools to make callable for
// the rest of the thread (each once, in the order asked) and the answer
// for the model. A name matches exactly, or else ignoring case when only
// one pooled tool matches that way.
//
// Loading is all or nothing: when a name is unknown, nothing is loaded
// and the error (an *UnknownToolError, or several joined) lists the
// closest names, by edit distance and, when ix is not nil, by search.
// Other argument errors wrap ErrInvalidArguments.
func LoadTool(args json.RawMessage, pool []*tools.Tool, ix *Index) (toLoad []*tools.Tool, out json.RawMessage, err error) {
	want, err := loadNames(args)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]*tools.Tool, len(pool))
	byFold := map[string][]*tools.Tool{}
	for _, t := range pool {
		if t == nil {
			continue
		}
		if _, dup := byName[t.Name]; !dup {
			byName[t.Name] = t
		}
		k := strings.ToLower(t.Name)
		byFold[k] = append(byFold[k], t)
	}
	var unknown []error
	seen := map[string]bool{}
	for _, name := range want {
		t, ok := byName[name]
		if !ok {
			if fold := byFold[strings.ToLower(name)]; len(fold) == 1 {
				t, ok = fold[0], true
			}
		}
		if !ok {
			unknown = append(unknown, &UnknownToolError{Name: name, Closest: closestNames(name, pool, ix)})
			continue
		}
		if !seen[t.ID] {
			seen[t.ID] = true
			toLoad = append(toLoad, t)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("%w; nothing was loaded", errors.Join(unknown...))
	}
	type loadedTool struct {
		Name        string `json:"name"`
		Toolkit     string `json:"toolkit"`
		Description string `json:"description"`
	}
	answer := struct {
		Loaded []loadedTool `json:"loaded"`
		Note   string       `json:"note"`
	}{Note: "These tools are in your tool list from your next step on, for the rest of this conversation. Call them by name."}
	for _, t := range toLoad {
		answer.Loaded = append(answer.Loaded, loadedTool{
			Name:        t.Name,
			Toolkit:     toolkitOf(t),
			Description: shorten(t.Description, maxResultDescription),
		})
	}
	out, err = json.Marshal(answer)
	if err != nil {
		return nil, nil, err
	}
	return toLoad, out, nil
}

// loadNames reads load_tool's arguments: the names asked for, trimmed,
// each once, in order.
func loadNames(args json.RawMessage) ([]string, error) {
	m, err := decodeArgs(args, "toolName", "toolNames")
	if err != nil {
		return nil, err
	}
	var want []string
	one, hasOne, err := stringArg(m, "toolName")
	if err != nil {
		return nil, err
	}
	if hasOne {
		want = append(want, one)
	}
	if raw, ok := m["toolNames"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var many []string
		if err := json.Unmarshal(raw, &many); err != nil {
			return nil, invalid(`"toolNames" must be a list of tool names (strings)`)
		}
		want = append(want, many...)
	}
	if len(want) == 0 {
		return nil, invalid(`give "toolName" (one tool) or "toolNames" (a list), with names search_tools returned`)
	}
	var out []string
	for _, n := range want {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, invalid("a tool name is empty")
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) > MaxLoadNames {
		return nil, invalid("at most %d tools can be loaded in one call; %d were asked for", MaxLoadNames, len(out))
	}
	return out, nil
}

// maxSuggestions is how many names an UnknownToolError lists.
const maxSuggestions = 5

// closestNames suggests pooled tool names for a name that matched none:
// first those within a few edits of it (a typo, a wrong case, a missing
// prefix), then what searching for its words finds.
func closestNames(name string, pool []*tools.Tool, ix *Index) []string {
	type cand struct {
		name string
		dist int
	}
	lower := strings.ToLower(name)
	maxDist := max(2, len([]rune(name))/4)
	var near []cand
	inPool := make(map[string]bool, len(pool))
	for _, t := range pool {
		if t == nil {
			continue
		}
		inPool[t.Name] = true
		if d := tools.EditDistance(lower, strings.ToLower(t.Name)); d <= maxDist {
			near = append(near, cand{t.Name, d})
		}
	}
	slices.SortFunc(near, func(a, b cand) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name)) })
	var out []string
	for _, c := range near {
		if len(out) == 3 {
			break
		}
		out = append(out, c.name)
	}
	if ix != nil {
		hits, _ := ix.search(context.Background(), name, "", maxSuggestions, false) // no network for a suggestion
		for _, h := range hits {
			if len(out) == maxSuggestions {
				break
			}
			if inPool[h.Tool.Name] && !slices.Contains(out, h.Tool.Name) {
				out = append(out, h.Tool.Name)
			}
		}
	}
	return out
}
