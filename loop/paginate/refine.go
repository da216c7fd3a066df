package paginate

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// Refine returns p completed by one live response: the primary array and
// the continuation signals the body actually carries (a spec may declare
// no response schema at all), and a Link header. The first response may
// confirm the schema's suggestion or correct it:
//
//   - a Link header with pagination relations makes the plan link_header,
//     unless the body's own token or next URL already carries the walk;
//   - a next token in the body makes a plan with a cursor parameter a
//     cursor plan (and replaces continuing from the last item's id);
//   - a next URL in the body makes a page, cursor-less or unpaginated
//     plan next_url; an offset plan keeps its numbers and takes the URL as
//     its stop signal;
//   - a more flag gives a cursor parameter something to continue from.
//
// Signals are recognised by the presence of their member (a null next
// cursor on a single page still shows where the cursor lives). Plans
// from an explicit extension only gain a primary array they lacked.
// Provenance becomes "schema+response" ("response" for a plan that had
// nothing to go on) whenever the response was readable. Refine never
// fails: a body that is not JSON leaves the plan as it was, apart from
// what the header says.
func Refine(p Plan, body []byte, header http.Header) Plan {
	return refine(p, &rawShape{b: bytes.TrimSpace(body)}, header)
}

// refine is Refine over the body's shape, which the caller may read on
// (its members are listed once, checking the whole body).
func refine(p Plan, top *rawShape, header http.Header) Plan {
	out := p
	readable := top.readable()

	if strings.HasPrefix(p.Provenance, "extension:") {
		if !p.ItemsFound && readable {
			res := readResponse(top, evidence{params: true}, nil)
			out.Items, out.ItemsFound, out.ItemID = res.items, res.itemsFound, res.itemID
		}
		return out
	}

	link := linkPaginates(header)
	var res bodyOffer
	if readable {
		res = readActual(p, top)
	}
	if !readable && !link {
		return out
	}

	if res.itemsFound && (!p.ItemsFound || p.Items != res.items) {
		out.Items, out.ItemsFound, out.ItemID = res.items, true, res.itemID
	}
	if res.itemsFound {
		if out.ItemID == "" {
			out.ItemID = res.itemID
		}
		if out.NextToken == "" {
			out.NextToken = res.token
		}
		if out.NextURLField == "" {
			out.NextURLField = res.nextURL
		}
		if out.MoreFlag == "" {
			out.MoreFlag, out.MoreInverted = res.more, res.moreInverted
		}
		if out.Total == "" {
			out.Total = res.total
		}
		if out.TotalPages == "" {
			out.TotalPages = res.totalPages
		}
	}
	tokenInBody := out.NextToken != "" && top.has(out.NextToken)
	urlInBody := out.NextURLField != "" && top.has(out.NextURLField)

	switch {
	case out.Strategy == Cursor && tokenInBody:
		if p.NextToken == "" || out.Continuation == "" {
			// The token was learnt here: it replaces the last item's id.
			out.Continuation = cursorContinuation(out, res)
		}
		out.CursorFromItem = ""
	case out.Strategy == NextURL && urlInBody:
	case link:
		out.Strategy, out.Continuation = LinkHeader, "Link header"
	case out.CursorParam != "" && tokenInBody:
		out.Strategy, out.CursorFromItem = Cursor, ""
		out.Continuation = cursorContinuation(out, res)
	case urlInBody && out.Strategy == Offset:
		out.Continuation = urlContinuation(out, res)
	case urlInBody && (out.Strategy != Cursor || out.CursorFromItem == ""):
		out.Strategy, out.Continuation = NextURL, urlContinuation(out, res)
	case out.Strategy == None && out.CursorParam != "" && out.MoreFlag != "" && out.ItemsFound:
		out.Strategy, out.CursorFromItem = Cursor, res.itemID
		if out.CursorFromItem == "" {
			out.CursorFromItem = "id"
		}
		out.Continuation = showPath(out.MoreFlag)
	}
	if out.Strategy == PageNumber || out.Strategy == Offset {
		// A page or offset walk sends its own numbers: a token in the body
		// that no parameter sends (another mode's marker) never ends it.
		out.NextToken = ""
	}
	if out.Continuation == "" {
		switch out.Strategy {
		case PageNumber:
			out.Continuation = showPath(firstNonEmpty(out.MoreFlag, out.TotalPages, out.Total))
		case Offset:
			out.Continuation = showPath(firstNonEmpty(out.NextURLField, out.MoreFlag, out.Total))
		}
	}
	if out.Strategy != p.Strategy || out.Continuation != p.Continuation {
		// The response showed the continuation: that is the server's word.
		out.Evidence = append(slices.Clone(p.Evidence), "the first response shows "+orWord(out.Continuation, "the items"))
		out.Confidence = High
	}
	switch p.Provenance {
	case "schema":
		out.Provenance = "schema+response"
	case "", "none":
		out.Provenance = "response"
	}
	return out
}

// urlContinuation names the next URL as inspect does: the next-page
// object rather than its href member.
func urlContinuation(p Plan, res bodyOffer) string {
	if p.NextURLField == res.nextURL && res.urlShow != "" {
		return res.urlShow
	}
	return showPath(p.NextURLField)
}

// cursorContinuation names the signal a cursor walk trusts: the token,
// unless it is a position returned on every page and a more flag exists.
func cursorContinuation(p Plan, res bodyOffer) string {
	if p.MoreFlag != "" && p.NextToken == res.token && res.token != "" && !res.tokenNext {
		return showPath(p.MoreFlag)
	}
	if p.NextToken == res.token && res.tokenShow != "" {
		return res.tokenShow
	}
	return showPath(p.NextToken)
}

// readActual finds the primary array and the signals in an actual body,
// keeping the plan's items path when the body holds an array there.
func readActual(p Plan, top *rawShape) bodyOffer {
	var folds []string
	if p.CursorParam != "" {
		folds = []string{foldName(lastSegment(p.CursorParam))}
	}
	if p.ItemsFound {
		if arr, env, prefix, ok := planArray(top, p.Items); ok {
			res := bodyOffer{items: p.Items, itemsFound: true}
			res.itemID, res.itemsKnown = idMember(arr.elem())
			if env != nil {
				readEnvelope(top, env, prefix, folds, &res)
			}
			return res
		}
	}
	ev := evidence{params: p.SizeParam != "" || p.PageParam != "" || p.OffsetParam != "" || p.CursorParam != ""}
	return readResponse(top, ev, folds)
}

// planArray checks that the body holds an array at path, and returns it
// with the object that holds it (nil for a bare array) and that object's
// keys.
func planArray(top *rawShape, path string) (arr, env shape, prefix []string, ok bool) {
	if path == "" {
		return top, nil, nil, top.kind() == shapeArray
	}
	root := top.b
	keys, err := query.SplitPath(path)
	if err != nil {
		return nil, nil, nil, false
	}
	// A member of the body itself is among the members readable listed,
	// with its value checked then, so the body is not read again for it.
	// Elsewhere (or if the listing did not find it) the scanner decides.
	var a *rawShape
	if len(keys) == 1 && top.kind() == shapeObject {
		for _, f := range top.fields() {
			if v, ok := f.val.(*rawShape); ok && f.name == keys[0] {
				a = v
				break
			}
		}
	}
	if a == nil {
		raw, found := query.Get(root, path)
		if !found {
			return nil, nil, nil, false
		}
		a = &rawShape{b: raw}
	}
	if a.kind() != shapeArray {
		return nil, nil, nil, false
	}
	prefix = keys[:len(keys)-1]
	if len(prefix) == 0 {
		return a, top, nil, true
	}
	envRaw, _ := query.Get(root, query.JoinPath(prefix...))
	return a, &rawShape{b: envRaw}, prefix, true
}

// has reports whether the body has a member at path (null counts),
// through the members already listed.
func (r *rawShape) has(path string) bool {
	keys, err := query.SplitPath(path)
	if err != nil {
		return false
	}
	var n shape = r
	for _, k := range keys {
		found, dotted := false, false
		if n.kind() == shapeObject {
			for _, f := range n.fields() {
				if f.name == k {
					n, found = f.val, true
					break
				}
				dotted = dotted || strings.Contains(f.name, ".")
			}
			if !found && !dotted {
				return false
			}
		}
		if !found {
			// Array indexes and dotted member names: ask the scanner.
			_, ok := query.Get(r.b, path)
			return ok
		}
	}
	return true
}

// linkPaginates reports a Link header carrying pagination relations: a
// next link, or on a last page only the first/prev/last ones, which still
// show that the operation pages by Link.
func linkPaginates(h http.Header) bool {
	values := h.Values("Link")
	if len(values) == 0 {
		return false
	}
	links, _ := ParseLinks(values)
	for _, l := range links {
		for _, rel := range []string{"next", "prev", "previous", "first", "last"} {
			if l.HasRel(rel) {
				return true
			}
		}
	}
	return false
}

// rawShape is an actual JSON value, read with the raw scanner of package
// query; an object's members are listed once and kept.
type rawShape struct {
	b       []byte
	members []shapeField
	listed  bool
	bad     bool // listing the members met malformed JSON
}

// readable reports a body worth reading: an object or an array that
// scans as JSON. Listing an object's members checks all of it, so only
// an array needs a separate pass.
func (r *rawShape) readable() bool {
	switch r.kind() {
	case shapeObject:
		r.fields()
		return !r.bad
	case shapeArray:
		return query.Valid(r.b)
	}
	return false
}

func (r *rawShape) kind() shapeKind {
	if len(r.b) == 0 {
		return shapeUnknown
	}
	switch c := r.b[0]; {
	case c == '{':
		return shapeObject
	case c == '[':
		return shapeArray
	case c == '"':
		return shapeString
	case c == 't' || c == 'f':
		return shapeBool
	case c == 'n':
		return shapeNull
	case c == '-' || (c >= '0' && c <= '9'):
		return shapeNumber
	}
	return shapeUnknown
}

func (r *rawShape) fields() []shapeField {
	if r.listed {
		return r.members
	}
	r.listed = true
	if r.kind() != shapeObject {
		return nil
	}
	// One checking pass lists the members with their values; the first
	// member of a name wins, as in query.Get.
	var seen map[string]bool
	var last []byte
	err := query.EachMember(r.b, func(_ []byte, name string, v []byte) {
		last = v
		if seen[name] {
			return
		}
		if seen == nil {
			seen = make(map[string]bool, 8)
		}
		seen[name] = true
		r.members = append(r.members, shapeField{name: name, fold: foldName(name), val: &rawShape{b: v}})
	})
	if err != nil || !objectEnds(r.b, last) {
		r.bad, r.members = true, nil
	}
	return r.members
}

// objectEnds reports whether obj, whose members EachMember read without
// fault, ends right after the object: its last member's value (nil: it
// has none) is followed by nothing but the closing brace.
func objectEnds(obj, last []byte) bool {
	rest := obj[1:] // past '{'
	if last != nil {
		off, ok := query.OffsetIn(obj, last)
		if !ok {
			return false
		}
		rest = obj[off+len(last):]
	}
	rest = bytes.TrimSpace(rest)
	return len(rest) == 1 && rest[0] == '}'
}

func (r *rawShape) elem() shape {
	if r.kind() != shapeArray {
		return nil
	}
	v, ok := query.Get(r.b, "0")
	if !ok {
		return nil
	}
	return &rawShape{b: v}
}

func (r *rawShape) str() (string, bool) {
	if r.kind() != shapeString {
		return "", false
	}
	var s string
	if json.Unmarshal(r.b, &s) != nil {
		return "", false
	}
	return s, true
}

func (r *rawShape) isURL() bool {
	s, ok := r.str()
	if !ok {
		return false
	}
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://") ||
		(strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//"))
}

// tokenValue reports a value that can only be a token: a number, or a
// non-empty string that is not a URL.
func (r *rawShape) tokenValue() bool {
	switch r.kind() {
	case shapeNumber:
		return true
	case shapeString:
		s, _ := r.str()
		return s != "" && !r.isURL()
	}
	return false
}

func (r *rawShape) opaque() bool { return false }
func (r *rawShape) hint() string { return "" }
