package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/query"
)

// DefaultViewBudget is the size guard's budget, in characters, for what one
// tool result may put in front of the model.
const DefaultViewBudget = 32000

// minViewBudget is the smallest budget the guard works with: below it the
// note explaining a cut would not fit beside any data.
const minViewBudget = 1000

// Guard keeps what a tool result puts in front of the model within a
// budget. It applies to every tool, looping or not. A view over budget is
// cut at an item boundary of its primary array (as many whole items as
// fit); a view without a usable item boundary (one huge string, HTML, an
// object without an array) is cut at a character boundary that keeps the
// JSON valid. Either way the cut view says so in _truncated, _note and
// _resultId, so a preview can never pass for the whole result.
//
// Characters are Unicode code points of the JSON text as the model reads
// it (escapes included). The zero Guard uses DefaultViewBudget.
type Guard struct {
	// Budget is the view budget in characters. Zero means
	// DefaultViewBudget; values below 1,000 are raised to 1,000.
	Budget int
}

// Cut is what Guard.Cut made of a view.
type Cut struct {
	// View is the JSON the model receives: the input unchanged when it
	// fit, otherwise the cut view with the truncation keys.
	View []byte
	// Truncated reports that the view was cut.
	Truncated bool
	// ByItems reports a cut at an item boundary; then Shown and Total
	// count items of the primary array. Otherwise they count characters.
	ByItems bool
	Shown   int
	Total   int
}

func (g Guard) budget() int {
	switch {
	case g.Budget == 0:
		return DefaultViewBudget
	case g.Budget < minViewBudget:
		return minViewBudget
	}
	return g.Budget
}

// Fits reports whether view is within the budget as it is.
func (g Guard) Fits(view []byte) bool {
	return utf8.RuneCount(view) <= g.budget()
}

// Cut returns view unchanged when it fits the budget, and a cut view
// otherwise. itemsPath is the dot path of the primary array in view ("" to
// detect it: the document itself when it is an array, else the largest
// array at the top level or one level down). resultID is the handle under
// which the full payload was kept ("" when it could not be kept; the note
// then says so instead of pointing at the retrieval tools).
//
// A cut view is always one JSON object: a bare array is wrapped as
// {"items": [...]} and a string or non-JSON payload as {"text": "..."}.
// Members of the view whose names begin with "_" (the envelope: verdict,
// notes, boundary) are kept whole; an existing _note is extended, not
// replaced. The item cut adds _truncated, _shownItems, _totalItems,
// _resultId and _note; the character cut adds _truncated, _shownChars,
// _totalChars, _resultId and _note.
func (g Guard) Cut(view []byte, itemsPath, resultID string) (Cut, error) {
	budget := g.budget()
	total := utf8.RuneCount(view)
	if total <= budget {
		return Cut{View: view}, nil
	}
	view = bytes.TrimSpace(view)
	if !query.Valid(view) || (len(view) > 0 && view[0] != '{' && view[0] != '[') {
		// Text, HTML, or a bare scalar: present it as {"text": "..."}.
		text := view
		if len(view) > 0 && view[0] == '"' {
			var s string
			if json.Unmarshal(view, &s) == nil {
				text = []byte(s)
			}
		}
		return textCut(nil, text, budget, resultID)
	}
	if view[0] == '[' {
		view = append(append([]byte(`{"items":`), view...), '}')
		itemsPath = "items"
	}
	path, arr, ok := primaryArray(view, itemsPath)
	if !ok {
		env, rest, err := splitEnvelope(view)
		if err != nil {
			return Cut{}, fmt.Errorf("size guard: %w", err)
		}
		return objectCut(env, rest, total, budget, resultID, false)
	}
	elems, err := query.Elements(arr)
	if err != nil {
		return Cut{}, fmt.Errorf("size guard: items at %q: %w", path, err)
	}
	return itemCut(view, path, elems, budget, resultID)
}

// itemCut keeps as many whole items of the array at path as fit beside
// the rest of the view, whose "_" members (the verdict, its note and
// boundary) are always kept whole. No item is ever cut: when not even
// the first fits, the view shows none and its note says why — and when
// the verdict alone is over the budget, the view is the verdict with no
// item, over the budget, rather than a verdict cut. Only when the view's
// own members besides the items (not the verdict) are too large is that
// rest cut at a character boundary, with the array emptied.
func itemCut(view []byte, path string, elems [][]byte, budget int, resultID string) (Cut, error) {
	total := len(elems)
	keys := func(shown int, note string) []query.Member {
		return truncation("_shownItems", "_totalItems", shown, total, resultID, note)
	}
	skeleton, err := query.Replace(view, path, []byte("[]"))
	if err != nil {
		return Cut{}, fmt.Errorf("size guard: %w", err)
	}
	// The note and counts with total's digits in place of shown's are at
	// least as long as the final ones, so the sum below is an upper bound.
	bound, err := setEnvelope(skeleton, keys(total, itemNote(total, total, resultID)))
	if err != nil {
		return Cut{}, err
	}
	room := budget - utf8.RuneCount(bound)
	k := 0
	for _, e := range elems {
		n := utf8.RuneCount(e)
		if k > 0 {
			n++ // the comma
		}
		if n > room {
			break
		}
		room -= n
		k++
	}
	if k > 0 {
		out, err := query.Replace(view, path, query.AppendArray(nil, elems[:k]))
		if err != nil {
			return Cut{}, fmt.Errorf("size guard: %w", err)
		}
		if out, err = setEnvelope(out, keys(k, itemNote(k, total, resultID))); err != nil {
			return Cut{}, err
		}
		return Cut{View: out, Truncated: true, ByItems: true, Shown: k, Total: total}, nil
	}
	env, rest, err := splitEnvelope(skeleton)
	if err != nil {
		return Cut{}, fmt.Errorf("size guard: %w", err)
	}
	restChars := utf8.RuneCount(rest)
	if restChars > budget/2 {
		// The result's own members besides the list are what is too large:
		// cut them, the list shown empty and counted as not shown.
		env = append(env, query.Member{Key: "_shownItems", Value: []byte("0")},
			query.Member{Key: "_totalItems", Value: strconv.AppendInt(nil, int64(total), 10)})
		return objectCut(env, rest, utf8.RuneCount(view), budget, resultID, true)
	}
	note := noItemNote(total, utf8.RuneCount(elems[0]), utf8.RuneCount(bound), budget, resultID)
	out, err := setEnvelope(skeleton, keys(0, note))
	if err != nil {
		return Cut{}, err
	}
	return Cut{View: out, Truncated: true, ByItems: true, Shown: 0, Total: total}, nil
}

// charCut cuts a view at a character boundary: cutData returns the data
// part cut to at most room characters (one JSON object), and env (the
// view's "_" members) and the truncation keys are set on it. hadItems
// says the view had a primary array whose first item alone did not fit,
// so the note also points at queryToolResult.
//
// cutData also returns how many characters it shows: the cut data's own
// for JSON, the raw text's for text (so that _shownChars is where
// fetchToolResult goes on in the kept text).
func charCut(env []query.Member, cutData func(room int) ([]byte, int, error), total, budget int, resultID string, hadItems bool) (Cut, error) {
	keys := func(shown int) []query.Member {
		return truncation("_shownChars", "_totalChars", shown, total, resultID, charNote(shown, total, resultID, hadItems))
	}
	tail, err := setEnvelope([]byte("{}"), append(env, keys(total)...))
	if err != nil {
		return Cut{}, err
	}
	// tail is "{...}"; its members go after the cut data, one comma apart.
	cut, shown, err := cutData(budget - utf8.RuneCount(tail) - 1)
	if err != nil {
		return Cut{}, err
	}
	out, err := setEnvelope(cut, append(env, keys(shown)...))
	if err != nil {
		return Cut{}, err
	}
	return Cut{View: out, Truncated: true, Shown: shown, Total: total}, nil
}

// objectCut is charCut of a JSON object: env (its "_" members: the
// verdict) is kept whole, whatever the budget, and rest is cut by
// cutJSON to what room is left.
func objectCut(env []query.Member, rest []byte, total, budget int, resultID string, hadItems bool) (Cut, error) {
	return charCut(env, func(room int) ([]byte, int, error) {
		if room < 2 {
			return []byte("{}"), 0, nil
		}
		b, err := cutJSON(rest, room)
		if len(b) == 0 {
			b = []byte("{}")
		}
		return b, utf8.RuneCount(b), err
	}, total, budget, resultID, hadItems)
}

// textCut is charCut of text that is not a JSON container: it becomes
// {"text": "..."} beside env. _shownChars and _totalChars count the
// text's own characters (escapes are not characters of it), the offsets
// fetchToolResult reads the kept text by.
func textCut(env []query.Member, text []byte, budget int, resultID string) (Cut, error) {
	return charCut(env, func(room int) ([]byte, int, error) {
		const open = `{"text":`
		b, n := query.AppendStringPrefix([]byte(open), text, max(room-len(open)-1, 0))
		return append(b, '}'), utf8.RuneCount(text[:n]), nil
	}, utf8.RuneCount(text), budget, resultID, false)
}

// CutText is Cut for the view of a payload that is text, kept as that
// text under resultID: a JSON string, or an object whose one member
// besides the envelope's is the text ({"text": "…"}, {"result": "…"}).
// The text is cut at a character of its own, and _shownChars and
// _totalChars count its characters, so fetchToolResult at offset
// _shownChars reads on exactly where the view stopped.
func (g Guard) CutText(view []byte, resultID string) (Cut, error) {
	budget := g.budget()
	if utf8.RuneCount(view) <= budget {
		return Cut{View: view}, nil
	}
	if query.FirstByte(view) != '{' {
		return g.Cut(view, "", resultID)
	}
	env, rest, err := splitEnvelope(view)
	if err != nil {
		return Cut{}, fmt.Errorf("size guard: %w", err)
	}
	var text string
	members := 0
	err = query.EachMember(rest, func(_ []byte, _ string, value []byte) {
		members++
		if json.Unmarshal(value, &text) != nil {
			members = 2 // not a string: not a text payload
		}
	})
	if err != nil || members != 1 {
		return g.Cut(view, "", resultID)
	}
	return textCut(env, []byte(text), budget, resultID)
}

// truncation is the members a cut view gains.
func truncation(shownKey, totalKey string, shown, total int, resultID, note string) []query.Member {
	ms := []query.Member{
		{Key: "_truncated", Value: []byte("true")},
		{Key: shownKey, Value: strconv.AppendInt(nil, int64(shown), 10)},
		{Key: totalKey, Value: strconv.AppendInt(nil, int64(total), 10)},
	}
	if resultID != "" {
		ms = append(ms, query.Member{Key: "_resultId", Value: query.AppendString(nil, resultID)})
	}
	return append(ms, query.Member{Key: "_note", Value: query.AppendString(nil, note)})
}

// noItemNote says why a cut view shows none of its items: the first is
// larger than the room the budget leaves beside the verdict, or the
// verdict (with the result's other members) alone takes the budget.
// without is the view's length with no item: a budget of without+first
// shows the first.
func noItemNote(total, first, without, budget int, resultID string) string {
	head := fmt.Sprintf("Showing none of the %d items: the first alone (%d characters) does not fit beside this verdict in the %d characters the conversation allows; a budget (_max_chars) of at least %d shows it.", total, first, budget, without+first)
	if without > budget {
		head = fmt.Sprintf("Showing none of the %d items: this verdict alone takes %d characters, more than the %d the conversation allows, and is sent whole; a budget (_max_chars) of at least %d shows the first item.", total, without, budget, without+first)
	}
	if resultID == "" {
		return head + " The full result could not be kept; narrow the call (fewer _fields, the API's own filters) to see the items."
	}
	return head + fmt.Sprintf(" The full result is kept under _resultId %q: call queryToolResult with that resultId (fields, filter, offset, limit) to read the items narrowed, or fetchToolResult for its raw text.", resultID)
}

func itemNote(shown, total int, resultID string) string {
	head := fmt.Sprintf("Showing the first %d of %d items: the whole result did not fit in the conversation.", shown, total)
	if resultID == "" {
		return head + " The full result could not be kept; narrow the call (fewer _fields, the API's own filters) to see the rest."
	}
	return head + fmt.Sprintf(" The full result is kept under _resultId %q: call queryToolResult with that resultId (filter, fields, offset, limit) to read the other items, or fetchToolResult for its raw text.", resultID)
}

func charNote(shown, total int, resultID string, hadItems bool) string {
	head := fmt.Sprintf("Showing the first %d of %d characters, cut mid-value: the result has no list small enough to cut between items.", shown, total)
	if hadItems {
		head = fmt.Sprintf("Showing none of its items (_totalItems) and the first %d of %d characters of the rest, cut mid-value: the result's members besides its list are larger than the conversation allows.", shown, total)
	}
	switch {
	case resultID == "":
		return head + " The full result could not be kept; narrow the call to see the rest."
	case hadItems:
		return head + fmt.Sprintf(" The full result is kept under _resultId %q: call queryToolResult with fields to read the items narrowed, or fetchToolResult (offset, length) to read the raw text in slices.", resultID)
	}
	return head + fmt.Sprintf(" The full result is kept under _resultId %q: call fetchToolResult with that resultId (offset, length) to read the raw text in slices.", resultID)
}

// splitEnvelope takes trawl's envelope members (envelopeKeys: the
// verdict, its note and boundary, the guard's counts) out of the JSON
// object doc; every other member, an upstream's "_" ones included, is
// rest.
func splitEnvelope(doc []byte) (env []query.Member, rest []byte, err error) {
	rest = make([]byte, 0, len(doc))
	rest = append(rest, '{')
	err = query.EachMember(doc, func(key []byte, name string, value []byte) {
		if strings.HasPrefix(name, "_") && slices.Contains(envelopeKeys, name) {
			// trawl's own (upstream members of these names never reach a
			// view: withoutEnvelopeKeys); an upstream's other "_" members
			// (HAL's _embedded, _links) are content, cut like the rest.
			env = append(env, query.Member{Key: name, Value: value})
			return
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(append(append(rest, key...), ':'), value...)
	})
	return env, append(rest, '}'), err
}

// primaryArray finds the array a payload is a list of: the one at hint
// when hint is set, else the document itself when it is an array, else
// the largest non-empty array among the top-level members and, failing
// that, among the members one level down.
func primaryArray(doc []byte, hint string) (path string, arr []byte, ok bool) {
	if hint != "" {
		arr, ok = query.Get(doc, hint)
		if !ok || len(arr) == 0 || arr[0] != '[' {
			return "", nil, false
		}
		return hint, arr, true
	}
	doc = bytes.TrimSpace(doc)
	if len(doc) > 0 && doc[0] == '[' {
		return "", doc, true
	}
	type object struct {
		path string
		raw  []byte
	}
	var objects []object // object members, for the look one level down
	seen := map[string]bool{}
	err := query.EachMember(doc, func(_ []byte, name string, v []byte) {
		if seen[name] {
			return // a path reaches only the first member of a name
		}
		seen[name] = true
		switch {
		case isNonEmptyArray(v) && len(v) > len(arr):
			path, arr, ok = query.JoinPath(name), v, true
		case v[0] == '{':
			objects = append(objects, object{query.JoinPath(name), v})
		}
	})
	if err != nil || ok {
		return path, arr, ok && err == nil
	}
	for _, o := range objects {
		inner := map[string]bool{}
		query.EachMember(o.raw, func(_ []byte, name string, v []byte) {
			if !inner[name] && isNonEmptyArray(v) && len(v) > len(arr) {
				path, arr, ok = o.path+"."+query.JoinPath(name), v, true
			}
			inner[name] = true
		})
	}
	return path, arr, ok
}

func isNonEmptyArray(v []byte) bool {
	return len(v) > 2 && v[0] == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) > 0
}

// cutJSON re-encodes the JSON value doc compactly, stopping before it
// would exceed max characters, and closes what is open so the result is
// one valid JSON value. A string met at the cut keeps the prefix that
// fits; an object member is never left without its value.
func cutJSON(doc []byte, max int) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var (
		out   []byte
		runes int
		stack []jsonFrame
		key   []byte // pending "key": of the current object member
	)
	emit := func(b []byte) {
		out = append(out, b...)
		runes += utf8.RuneCount(b)
	}
	// lead is what goes before a value at the current position.
	lead := func() []byte {
		var b []byte
		if len(stack) > 0 && stack[len(stack)-1].n > 0 {
			b = append(b, ',')
		}
		return append(b, key...)
	}
	wrote := func() {
		key = nil
		if len(stack) > 0 {
			stack[len(stack)-1].n++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("size guard: %w", err)
		}
		inObj := len(stack) > 0 && stack[len(stack)-1].obj
		if s, isStr := tok.(string); isStr && inObj && key == nil {
			key = append(query.AppendString(nil, s), ':')
			continue
		}
		room := max - runes - len(stack) // closers of what is open stay reserved
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				b := append(lead(), byte(t))
				if utf8.RuneCount(b)+1 > room {
					return closeAll(out, stack), nil
				}
				emit(b)
				stack = append(stack, jsonFrame{obj: t == '{'})
				key = nil
			default:
				emit([]byte{byte(t)})
				stack = stack[:len(stack)-1]
				wrote()
			}
		case string:
			b := lead()
			full := query.AppendString(append([]byte(nil), b...), t)
			if utf8.RuneCount(full) <= room {
				emit(full)
				wrote()
				continue
			}
			if n := room - utf8.RuneCount(b); n >= 2 {
				part, _ := query.AppendStringPrefix(b, []byte(t), n)
				emit(part)
				wrote()
			}
			return closeAll(out, stack), nil
		default:
			var lit []byte
			switch v := t.(type) {
			case json.Number:
				lit = []byte(v)
			case bool:
				lit = strconv.AppendBool(nil, v)
			case nil:
				lit = []byte("null")
			}
			b := append(lead(), lit...)
			if utf8.RuneCount(b) > room {
				return closeAll(out, stack), nil
			}
			emit(b)
			wrote()
		}
	}
	return out, nil
}

// jsonFrame is an open array or object while cutJSON writes.
type jsonFrame struct {
	obj bool
	n   int // members or elements written
}

// closeAll appends the closers of every open frame.
func closeAll(out []byte, stack []jsonFrame) []byte {
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].obj {
			out = append(out, '}')
		} else {
			out = append(out, ']')
		}
	}
	return out
}

// setEnvelope sets envelope members on the JSON object obj, in order
// (query.SetMembers); a _note already present is extended with the new
// text rather than replaced.
func setEnvelope(obj []byte, ms []query.Member) ([]byte, error) {
	var err error
	for _, m := range ms {
		if m.Key == "_note" {
			if old, ok := query.Get(obj, "_note"); ok {
				var a, b string
				if json.Unmarshal(old, &a) == nil && json.Unmarshal(m.Value, &b) == nil && a != "" && a != b {
					m.Value = query.AppendString(nil, a+" "+b)
				}
			}
		}
		if obj, err = query.SetMembers(obj, []query.Member{m}); err != nil {
			return nil, fmt.Errorf("size guard: %w", err)
		}
	}
	return obj, nil
}
