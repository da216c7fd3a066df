package loop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/prompts"
)

// Names of the retrieval tools.
const (
	QueryToolResult = "queryToolResult"
	FetchToolResult = "fetchToolResult"
)

// Defaults and caps of stored results and the retrieval tools.
const (
	DefaultResultTTL  = 15 * time.Minute
	DefaultQueryLimit = 50
	MaxQueryLimit     = 500
	MaxFetchLength    = 16000
)

// ErrNotRetrievalTool is returned by Retrieval.Call for a name that is
// neither queryToolResult nor fetchToolResult.
var ErrNotRetrievalTool = errors.New("not a retrieval tool")

// RetrievalArgError is a bad argument to a retrieval tool. Its message
// names the tool and the argument, for the model to correct its call.
type RetrievalArgError struct {
	Tool string
	Arg  string
	Msg  string
	// Code is the error's code: invalid_filter and invalid_fields as for
	// _filter and _fields (the same parser reads both), else
	// invalid_argument.
	Code string
}

func (e *RetrievalArgError) Error() string {
	return fmt.Sprintf("%s: %s: argument %s: %s", e.code(), e.Tool, e.Arg, e.Msg)
}

func (e *RetrievalArgError) code() string {
	if e.Code == "" {
		return CodeInvalidArgument
	}
	return e.Code
}

// ErrorCode is the error's code, for an API error body.
func (e *RetrievalArgError) ErrorCode() string { return e.code() }

// retrievalArg turns an error of the reserved-argument parser into a
// RetrievalArgError of the same code and wording.
func retrievalArg(tool, arg string, err error) error {
	var te *ToolError
	if errors.As(err, &te) {
		return &RetrievalArgError{Tool: tool, Arg: arg, Msg: strings.TrimPrefix(te.Message, arg+" "), Code: te.Code}
	}
	return err
}

// RetrievalOptions configure a Retrieval. The zero value is ready to use.
type RetrievalOptions struct {
	// Store keeps the payloads. Nil means a new MemoryResultStore with
	// default bounds and the clock below.
	Store ResultStore
	// TTL is how long a kept payload can be read back. Zero means
	// DefaultResultTTL (15 minutes).
	TTL time.Duration
	// Budget bounds what one call of a retrieval tool returns, in
	// characters, as Guard.Budget does for tool results. Zero means
	// DefaultViewBudget.
	Budget int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Retrieval keeps full tool payloads aside under random result ids,
// scoped to organization and thread, and serves the two retrieval tools
// that read them back without calling upstream again: queryToolResult
// (filter, project and page the stored items) and fetchToolResult (raw
// character slices of the stored text). Its methods are safe for
// concurrent use.
//
// Offsets and lengths of fetchToolResult count characters (Unicode code
// points) of the stored JSON text, not bytes, so a slice never splits a
// character and consecutive slices join to the stored text exactly.
type Retrieval struct {
	store ResultStore
	ttl   time.Duration
	guard Guard
	now   func() time.Time
}

// NewRetrieval returns a Retrieval.
func NewRetrieval(opts RetrievalOptions) *Retrieval {
	r := &Retrieval{store: opts.Store, ttl: opts.TTL, guard: Guard{Budget: opts.Budget}, now: opts.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if r.ttl <= 0 {
		r.ttl = DefaultResultTTL
	}
	if r.store == nil {
		r.store = NewMemoryResultStore(MemoryStoreOptions{Now: r.now})
	}
	return r
}

// WithBudget returns a Retrieval sharing r's store whose tools return at
// most chars characters per call (an agent's own view budget). Zero keeps
// r's budget.
func (r *Retrieval) WithBudget(chars int) *Retrieval {
	if chars == 0 {
		return r
	}
	c := *r
	c.guard = Guard{Budget: chars}
	return &c
}

// TTL is how long a kept payload can be read back.
func (r *Retrieval) TTL() time.Duration { return r.ttl }

// Keep stores rec for the result scope of scope and returns its new
// result id: "r_" and 32 hex digits, 128 bits from crypto/rand. rec is
// handed over: Keep sets its Created time and nobody modifies it after.
func (r *Retrieval) Keep(ctx context.Context, scope Scope, rec *StoredResult) (string, error) {
	prefix, err := scope.ResultScope()
	if err != nil {
		return "", err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("result id: %w", err)
	}
	id := "r_" + hex.EncodeToString(b[:])
	now := r.now()
	rec.Created = now
	if err := r.store.Put(ctx, prefix+"/"+id, rec, now.Add(r.ttl)); err != nil {
		return "", fmt.Errorf("keeping the result: %w", err)
	}
	return id, nil
}

// Lookup returns the result id of scope: ErrResultNotFound (also for an id
// of another thread or organization, or one that is not an id at all) or
// ErrResultExpired, wrapped with the id.
func (r *Retrieval) Lookup(ctx context.Context, scope Scope, id string) (*StoredResult, error) {
	prefix, err := scope.ResultScope()
	if err != nil {
		return nil, err
	}
	if !validResultID(id) {
		return nil, fmt.Errorf("resultId %q: %w", id, ErrResultNotFound)
	}
	rec, err := r.store.Get(ctx, prefix+"/"+id)
	if err != nil {
		return nil, fmt.Errorf("resultId %q: %w", id, err)
	}
	return rec, nil
}

func validResultID(id string) bool {
	if len(id) != 34 || !strings.HasPrefix(id, "r_") {
		return false
	}
	_, err := hex.DecodeString(id[2:])
	return err == nil
}

// RetrievalTool is a retrieval tool as a model sees it.
type RetrievalTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Tools returns queryToolResult and fetchToolResult, with their
// descriptions (from the prompts package) and input schemas.
func (r *Retrieval) Tools() []RetrievalTool {
	return []RetrievalTool{
		{Name: QueryToolResult, Description: prompts.Text("query_tool_result"), InputSchema: json.RawMessage(querySchema)},
		{Name: FetchToolResult, Description: prompts.Text("fetch_tool_result"), InputSchema: json.RawMessage(fetchSchema)},
	}
}

// The retrieval tools' schemas carry their types, bounds, enums and
// required keys and no descriptions: each parameter is told once, in the
// tool's description (prompts/query_tool_result.md, fetch_tool_result.md),
// which is sent with the schema in every request that offers the tool.
const querySchema = `{"type":"object","properties":{` +
	`"resultId":{"type":"string"},` +
	`"fields":{"type":"array","items":{"type":"string"}},` +
	`"filter":{"type":"array","items":{"type":"object","properties":{` +
	`"field":{"type":"string"},` +
	`"op":{"type":"string","enum":["eq","neq","gt","gte","lt","lte","contains","in","exists"]},` +
	`"value":{}},"required":["field","op"]}},` +
	`"offset":{"type":"integer","minimum":0},` +
	`"limit":{"type":"integer","minimum":1,"maximum":500},` +
	`"aggregate":{"type":"object"}},` +
	`"required":["resultId"],"additionalProperties":false}`

const fetchSchema = `{"type":"object","properties":{` +
	`"resultId":{"type":"string"},` +
	`"offset":{"type":"integer","minimum":0},` +
	`"length":{"type":"integer","minimum":1,"maximum":16000}},` +
	`"required":["resultId"],"additionalProperties":false}`

// Call runs the retrieval tool name with the model's JSON arguments and
// returns its JSON output, never more than the budget. Errors are for the
// model to read: bad arguments are *RetrievalArgError, unknown and
// expired ids wrap ErrResultNotFound and ErrResultExpired.
func (r *Retrieval) Call(ctx context.Context, scope Scope, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case QueryToolResult:
		return r.query(ctx, scope, args)
	case FetchToolResult:
		return r.fetch(ctx, scope, args)
	}
	return nil, fmt.Errorf("%w: %q", ErrNotRetrievalTool, name)
}

// query runs queryToolResult.
func (r *Retrieval) query(ctx context.Context, scope Scope, raw json.RawMessage) (json.RawMessage, error) {
	const tool = QueryToolResult
	args, err := decodeArgs(tool, raw, "resultId", "fields", "filter", "offset", "limit", "aggregate")
	if err != nil {
		return nil, err
	}
	id, err := argString(tool, "resultId", args["resultId"])
	if err != nil {
		return nil, err
	}
	// fields and filter are read by the parser of _fields and _filter:
	// the same shapes are accepted, the same mistakes rejected alike.
	var fields *query.Fields
	if v := args["fields"]; !isNull(v) {
		var dv any
		var paths []string
		if json.Unmarshal(v, &paths) == nil { // the common shape, decoded directly
			dv = paths
		} else {
			dv, err = decodeValue(v)
		}
		if err == nil {
			fields, err = FieldsArg("fields", dv)
		}
		if err != nil {
			return nil, retrievalArg(tool, "fields", err)
		}
	}
	var filter *query.Filter
	if v := args["filter"]; !isNull(v) {
		if filter, err = FilterArg("filter", v); err != nil {
			return nil, retrievalArg(tool, "filter", err)
		}
	}
	if v := args["aggregate"]; !isNull(v) {
		return r.aggregate(ctx, scope, id, filter, args)
	}
	offset, err := argInt(tool, "offset", args["offset"], 0, 0)
	if err != nil {
		return nil, err
	}
	limit, err := argInt(tool, "limit", args["limit"], DefaultQueryLimit, 1)
	if err != nil {
		return nil, err
	}
	var notes []string
	if limit > MaxQueryLimit {
		notes = append(notes, fmt.Sprintf("limit was lowered to the maximum, %d.", MaxQueryLimit))
		limit = MaxQueryLimit
	}
	rec, err := r.Lookup(ctx, scope, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	if !rec.HasItems() {
		return nil, &RetrievalArgError{Tool: tool, Arg: "resultId", Msg: "this result has no list of items to query; read it with fetchToolResult"}
	}

	// The filter runs on every stored item; only the page is projected.
	total := rec.NumItems()
	matched := 0
	page := make([]int, 0, min(limit, total))
	for i := range total {
		if filter.Match(rec.Item(i)) {
			if matched >= offset && len(page) < limit {
				page = append(page, i)
			}
			matched++
		}
	}
	if offset > matched {
		// Past the end: an empty page that says so, so that it is not
		// read as "nothing matched".
		notes = append(notes, fmt.Sprintf("offset %d is past the end: %s matched, so this page is empty; offsets run from 0 to %d.",
			offset, plural(matched, "item"), max(matched-1, 0)))
	}

	// The verdict of the set the counts are over goes first: matched
	// among the rows of a partial walk is not a count of all rows.
	set := rec.Set
	if set.Records == 0 {
		set.Records = total
	}
	head := queryHead(set, matched, filter != nil)

	// The output's fixed part with the longest numbers and note it may
	// carry, so what is left for items is a lower bound.
	budget := r.guard.budget()
	nextMax := offset + len(page)
	longNote := strings.Join(notes, " ") + " " + fewerNote(nextMax, nextMax) + " " + oversizedNote(nextMax, math.MaxInt32, math.MaxInt32, math.MaxInt32)
	tail := max(utf8.RuneCount(queryTail(matched, total, offset, matched, id, longNote)), // nextOffset null
		utf8.RuneCount(queryTail(matched, total, offset, matched-1, id, longNote))) // its longest number
	room := budget - tail - utf8.RuneCount(head)

	out := make([]byte, 0, 8<<10) // grows to what the page needs
	out = append(out, head...)
	var (
		item  []byte       // the item as shown
		plain bytes.Buffer // compaction buffer, without fields
	)
	shown := 0
	for _, i := range page {
		if fields != nil {
			if item, err = fields.Project(rec.Item(i), item[:0], nil); err != nil {
				return nil, fmt.Errorf("%s: item %d: %w", tool, i, err)
			}
		} else {
			plain.Reset()
			if err := json.Compact(&plain, rec.Item(i)); err != nil {
				return nil, fmt.Errorf("%s: item %d: %w", tool, i, err)
			}
			item = plain.Bytes()
		}
		n := utf8.RuneCount(item)
		if shown > 0 {
			n++ // the comma
		}
		if n > room {
			break
		}
		room -= n
		if shown > 0 {
			out = append(out, ',')
		}
		out = append(out, item...)
		shown++
	}
	next := offset + shown
	switch {
	case shown == 0 && len(page) > 0:
		// One item alone is over the budget: point at its text and move on.
		s := rec.spans[page[0]]
		at := rec.charAt(int(s.start))
		notes = append(notes, oversizedNote(offset, rec.charAt(int(s.end))-at, at, budget))
		next = offset + 1
	case shown < len(page):
		notes = append(notes, fewerNote(shown, next))
	}
	out = append(out, ']', ',')
	out = append(out, queryTail(matched, total, offset, next, id, strings.Join(notes, " "))[1:]...)
	return out, nil
}

// queryHead opens a query's output: the stored set's completion
// (_pagingComplete as in the envelope, when the result came from a walk)
// and the sentence saying what matched and total are counted over, then
// "items":[.
func queryHead(set SetVerdict, matched int, filtered bool) []byte {
	b := []byte{'{'}
	if set.Completion != "" {
		b = append(b, `"_pagingComplete":`...)
		b = strconv.AppendBool(b, set.Completion == Complete && !set.Resumed)
		b = append(b, `,"completion":`...)
		b = query.AppendString(b, string(set.Completion))
		b = append(b, ',')
	}
	b = append(b, `"verdict":`...)
	b = query.AppendString(b, "matched and total are counted "+set.Over(matched, filtered))
	return append(b, `,"items":[`...)
}

// queryTail renders the members after "items" as a JSON object; next at
// or past matched is rendered null.
func queryTail(matched, total, offset, next int, id, note string) []byte {
	b := []byte(`{"matched":`)
	b = strconv.AppendInt(b, int64(matched), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(offset), 10)
	b = append(b, `,"nextOffset":`...)
	if next < matched {
		b = strconv.AppendInt(b, int64(next), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"_resultId":`...)
	b = query.AppendString(b, id)
	if note != "" {
		b = append(b, `,"_note":`...)
		b = query.AppendString(b, note)
	}
	return append(b, '}')
}

func fewerNote(shown, next int) string {
	verb := "fit"
	if shown == 1 {
		verb = "fits"
	}
	return fmt.Sprintf("Only %s %s in the conversation; call again with offset %d for the next ones (or ask for fewer fields).", plural(shown, "item"), verb, next)
}

func oversizedNote(offset, length, at, budget int) string {
	return fmt.Sprintf("Matching item %d alone is %d characters, more than the %d that fit: ask for fewer fields, or read it with fetchToolResult at offset %d (length %d in all). nextOffset skips it.", offset, length, budget, at, length)
}

// fetch runs fetchToolResult.
func (r *Retrieval) fetch(ctx context.Context, scope Scope, raw json.RawMessage) (json.RawMessage, error) {
	const tool = FetchToolResult
	args, err := decodeArgs(tool, raw, "resultId", "offset", "length")
	if err != nil {
		return nil, err
	}
	id, err := argString(tool, "resultId", args["resultId"])
	if err != nil {
		return nil, err
	}
	offset, err := argInt(tool, "offset", args["offset"], 0, 0)
	if err != nil {
		return nil, err
	}
	length, err := argInt(tool, "length", args["length"], MaxFetchLength, 1)
	if err != nil {
		return nil, err
	}
	length = min(length, MaxFetchLength)
	rec, err := r.Lookup(ctx, scope, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	total := rec.Len()
	if offset > total {
		return nil, &RetrievalArgError{Tool: tool, Arg: "offset", Msg: fmt.Sprintf("%d is past the end of the text (totalLength %d)", offset, total)}
	}
	start := rec.byteAt(offset)
	end := rec.byteAt(min(offset+length, total))

	budget := r.guard.budget()
	tail := max(len(fetchTail(offset, total, total)), len(fetchTail(offset, total-1, total))) // null or the longest number
	room := budget - tail - len(`{"text":`)
	out := make([]byte, 0, min(4*budget, 8*length+128))
	out = append(out, `{"text":`...)
	out, n := query.AppendStringPrefix(out, rec.text[start:end], room)
	next := offset + utf8.RuneCount(rec.text[start:start+n])
	return append(out, fetchTail(offset, next, total)...), nil
}

// fetchTail renders the members after "text", the object's closing brace
// included; next at total is rendered null.
func fetchTail(offset, next, total int) []byte {
	b := []byte(`,"offset":`)
	b = strconv.AppendInt(b, int64(offset), 10)
	b = append(b, `,"nextOffset":`...)
	if next < total {
		b = strconv.AppendInt(b, int64(next), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"totalLength":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	return append(b, '}')
}

// decodeArgs splits a tool's JSON arguments into members, refusing names
// outside allowed.
func decodeArgs(tool string, raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, fmt.Errorf("%s: arguments must be one JSON object: %w", tool, err)
		}
	}
	var unknown []string
	for k := range args {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &RetrievalArgError{Tool: tool, Arg: unknown[0], Msg: "unknown argument (valid: " + strings.Join(allowed, ", ") + ")"}
	}
	return args, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// decodeValue decodes one argument's JSON, numbers as json.Number.
func decodeValue(v json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, &ToolError{Code: CodeInvalidArgument, Message: "is not valid JSON"}
	}
	return out, nil
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

func argString(tool, name string, v json.RawMessage) (string, error) {
	if isNull(v) {
		return "", &RetrievalArgError{Tool: tool, Arg: name, Msg: "is required"}
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || s == "" {
		return "", &RetrievalArgError{Tool: tool, Arg: name, Msg: "must be a non-empty string"}
	}
	return strings.TrimSpace(s), nil
}

// argInt reads an integer argument: a JSON number with no fraction, or a
// string holding one (models send both); def when absent or null.
func argInt(tool, name string, v json.RawMessage, def, lowest int) (int, error) {
	if isNull(v) {
		return def, nil
	}
	text := string(bytes.TrimSpace(v))
	var s string
	if json.Unmarshal(v, &s) == nil {
		text = strings.TrimSpace(s)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, &RetrievalArgError{Tool: tool, Arg: name, Msg: fmt.Sprintf("must be an integer, not %s", v)}
	}
	if f < float64(lowest) {
		return 0, &RetrievalArgError{Tool: tool, Arg: name, Msg: fmt.Sprintf("must be at least %d, not %s", lowest, text)}
	}
	if f > math.MaxInt32 {
		f = math.MaxInt32
	}
	return int(f), nil
}
