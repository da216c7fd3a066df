package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
)

// plainCall is a call under a binding that does not loop: one request,
// no reserved argument honoured, the size guard only (and _unknownArgs
// when arguments the schema admits without declaring them were sent).
// The reserved arguments the model sent anyway (ignored) are named in a
// _note, so it does not take one call's answer for a walk it asked for.
func (e *Engine) plainCall(ctx context.Context, c Call, own map[string]any, unknown, ignored []string) (*Outcome, error) {
	plan := e.Plan(c.Tool)
	var progress func(paginate.Progress)
	if c.Progress != nil {
		// A plain call reports no pages; what the upstream reports of its
		// one request (an MCP tool's progress) is passed on.
		progress = func(p paginate.Progress) {
			if p.Upstream != nil {
				c.Progress(Progress{Progress: p})
			}
		}
	}
	res, err := paginate.Walk(ctx, paginate.WalkOptions{
		Caller: e.opt.Caller, Clock: e.clock, Tool: c.Tool, Args: own, Plan: plan, Effect: e.Effect(c.Tool, c.Binding),
		Budget: e.opt.Budget.Merge(c.Binding.Budget), Credential: c.Credential, ThreadID: c.Scope.Thread,
		Scrub:    e.scrubber(c.Credential),
		Progress: progress,
	})
	if err != nil {
		return nil, upstreamError(c.Tool, err)
	}
	body := withoutEnvelopeKeys(asJSON(res.FirstBody))
	path, hasItems := itemsPathOf(res.Plan, body)
	out := &Outcome{View: body}
	if !hasItems {
		path = ""
	}
	if len(unknown) > 0 && query.FirstByte(body) == '{' {
		if b, err := query.SetMembers(body, []query.Member{unknownArgsMember(unknown)}); err == nil {
			body = b
		}
	}
	text, isText := textOf(res.FirstBody)
	view := body
	if len(ignored) > 0 {
		view, path = ignoredNote(body, path, ignored, res.Plan.Paginated())
	}
	return e.guard(ctx, c, out, view, path, isText, func() (*StoredResult, error) {
		if isText {
			return NewStoredResult(c.Tool.ID, text, "") // the text itself, not its JSON form
		}
		return NewStoredResult(c.Tool.ID, body, path)
	})
}

// textOf is the text a payload holds: the body when it is not JSON, the
// string when it is a JSON string; ok is false for any other payload.
// Such a payload is kept as that text, so fetchToolResult's offsets are
// its own characters.
func textOf(body []byte) (text []byte, ok bool) {
	t := bytes.TrimSpace(body)
	switch {
	case len(t) == 0:
		return nil, false
	case !query.Valid(t):
		return body, true
	case t[0] == '"':
		var s string
		if json.Unmarshal(t, &s) != nil {
			return nil, false
		}
		return []byte(s), true
	}
	return nil, false
}

// ignoredNote adds to a plain call's view a _note naming the reserved
// arguments the binding did not honour (a view that is not an object is
// wrapped: an array as {"items": …}, any other value as {"result": …}).
// It returns the view and the path of its primary array.
func ignoredNote(view []byte, path string, ignored []string, paged bool) ([]byte, string) {
	what := "this is what one call returns"
	if paged {
		what = "this is the first page only"
	}
	note := fmt.Sprintf("Response looping is off for this tool in the agent's binding, so %s %s ignored: %s, with no verdict on whether more rows exist. Do not count it as every row or as filtered.",
		strings.Join(ignored, ", "), map[bool]string{true: "was", false: "were"}[len(ignored) == 1], what)
	switch query.FirstByte(view) {
	case '[':
		view, path = append(append([]byte(`{"items":`), view...), '}'), "items"
	case '{':
	default:
		view = append(append([]byte(`{"result":`), view...), '}')
	}
	out, err := query.SetMembers(view, []query.Member{{Key: "_note", Value: query.AppendString(nil, note)}})
	if err != nil {
		return view, path
	}
	return out, path
}

// asJSON returns body when it is JSON, else {"text": body}; an empty body
// is {}.
func asJSON(body []byte) []byte {
	t := bytes.TrimSpace(body)
	switch {
	case len(t) == 0:
		return []byte("{}")
	case query.Valid(t):
		return t
	}
	s := string(body)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b, _ := json.Marshal(map[string]string{"text": s})
	return b
}

// guard cuts view to the call's budget; when it is cut, or when keep
// says the full payload is worth keeping anyway, the full payload is
// stored and its id given. text says the payload is text, kept as it is
// (full) and shown as {"text": …}: it is cut by its own characters.
func (e *Engine) guard(ctx context.Context, c Call, out *Outcome, view []byte, itemsPath string, text bool, full func() (*StoredResult, error)) (*Outcome, error) {
	g := e.viewGuard(c)
	if c.Workflow || g.Fits(view) {
		out.View = view
		return out, nil
	}
	if out.ResultID == "" {
		out.ResultID = e.keep(ctx, c, full)
	}
	cut, err := g.Cut(view, itemsPath, out.ResultID)
	if text {
		cut, err = g.CutText(view, out.ResultID)
	}
	if err != nil {
		return nil, fmt.Errorf("size guard: %w", err)
	}
	out.View, out.Truncated = cut.View, cut.Truncated
	return out, nil
}

// viewGuard is the size guard of c's view: the call's budget, else the
// engine's.
func (e *Engine) viewGuard(c Call) Guard {
	g := Guard{Budget: c.ViewChars}
	if g.Budget == 0 {
		g.Budget = e.opt.ViewChars
	}
	return g
}

// keep stores a full payload for the retrieval tools and returns its id,
// or "" when it cannot be kept (no store, too large): the note then says
// so rather than pointing at a handle that does not exist.
func (e *Engine) keep(ctx context.Context, c Call, full func() (*StoredResult, error)) string {
	if e.opt.Results == nil || c.Workflow {
		return ""
	}
	rec, err := full()
	if err != nil {
		e.log.Warn("result not kept", "tool", c.Tool.ID, "err", err)
		return ""
	}
	// On a context of its own: a cancelled call's partial result is kept.
	id, err := e.opt.Results.Keep(context.WithoutCancel(ctx), c.Scope, rec)
	if err != nil {
		e.log.Warn("result not kept", "tool", c.Tool.ID, "err", err)
		return ""
	}
	return id
}

// present turns what a looping call collected into its verdict and the
// model's view, rendered from that verdict.
func (e *Engine) present(ctx context.Context, q walkRequest, w *walked, hit *CacheHit) (*Outcome, error) {
	c := q.call
	fields, filter := q.r.Fields, q.r.Filter
	v := e.verdict(q, w, hit)
	out := &Outcome{Verdict: v}
	var view []byte
	var err error
	var aggregated *query.AggregateResult
	switch {
	case w.HasItems && q.r.Aggregate != nil:
		// The numbers instead of the rows, which stay stored.
		var kept int
		if aggregated, kept, err = aggregateRows(w.Items, filter, q.r.Aggregate); err != nil {
			return nil, fmt.Errorf("aggregating rows: %w", err)
		}
		v.Rows, v.Filtered, v.Aggregated = kept, filter != nil, true
		v.UnmatchedFilter = filter.Unmatched(w.Items)
		view = withoutItems(w.Envelope, w.ItemsPath)
	case w.HasItems:
		fields := fields
		if fields != nil && q.r.ForEach != nil {
			// Fan-out rows keep their tag whatever _fields lists, so each
			// still says which value it came from.
			if f, err := withPath(fields, query.JoinPath(q.r.ForEach.Key)); err == nil {
				fields = f
			}
		}
		rows, st, err := query.RunPages(w.Items, fields, filter, w.Worked)
		if err != nil {
			return nil, fmt.Errorf("projecting rows: %w", err)
		}
		v.Rows, v.Filtered = len(rows), filter != nil
		v.UnmatchedFields = st.Unmatched
		v.UnmatchedFilter = filter.Unmatched(w.Items)
		if view, err = withItems(w.Envelope, w.ItemsPath, rows); err != nil {
			return nil, err
		}
	default:
		view = asJSON(w.Envelope)
		if query.FirstByte(view) != '{' {
			// A bare scalar: the envelope keys need an object to sit in.
			view = append(append([]byte(`{"result":`), view...), '}')
		}
		if fields != nil {
			matched := make([]bool, len(fields.Paths()))
			if view, err = fields.Project(view, nil, matched); err != nil {
				return nil, fmt.Errorf("projecting: %w", err)
			}
			v.UnmatchedFields = unmatchedPaths(fields.Paths(), matched)
		}
		v.FilterIgnored = filter != nil
		v.AggregateIgnored = q.r.Aggregate != nil
	}
	if len(v.UnmatchedFields) > 0 || len(v.UnmatchedFilter) > 0 {
		rows := w.Items
		if !w.HasItems {
			rows = [][]byte{view}
		}
		v.AvailableKeys, v.Sample = availableKeys(rows, len(v.UnmatchedFields) > 0)
	}
	text, isText := textOf(w.Envelope)
	isText = isText && !w.HasItems
	full := func() (*StoredResult, error) {
		var rec *StoredResult
		var err error
		switch {
		case w.HasItems:
			rec, err = NewStoredResultFromItems(c.Tool.ID, w.Envelope, w.ItemsPath, w.Items)
		case isText:
			rec, err = NewStoredResult(c.Tool.ID, text, "") // the text itself, not its JSON form
		default:
			rec, err = NewStoredResult(c.Tool.ID, asJSON(w.Envelope), "")
		}
		if rec != nil {
			rec.Set = v.Set() // an aggregate over the stored rows says the same
		}
		return rec, err
	}
	if aggregated != nil {
		out.Aggregate = newAggregated(aggregated, v.Set(), filter != nil || q.r.Aggregate.Filter() != nil)
		v.AggregateVerdict = out.Aggregate.Verdict
	}
	if !c.Workflow && (w.HasItems && len(w.Items) > 0 || !w.HasItems && fields != nil) {
		// A walk's full set is kept whenever it holds rows, and an object
		// whenever _fields projected it, so the model can come back for a
		// field it projected away. Before the note, which points at it
		// only when it was kept.
		out.ResultID = e.keep(ctx, c, full)
		v.ResultID = out.ResultID
	}
	v.Note = note(v, q.budget, c.Workflow)
	var members []query.Member
	if c.Workflow {
		loop, _ := json.Marshal(v.LoopBlock())
		members = []query.Member{{Key: "_loop", Value: loop}}
	} else {
		members = v.members()
	}
	if len(q.unknown) > 0 {
		members = append(members, unknownArgsMember(q.unknown))
	}
	if out.Aggregate != nil {
		room := 0
		if !c.Workflow {
			rest, err := query.SetMembers(view, members)
			if err != nil {
				return nil, fmt.Errorf("envelope: %w", err)
			}
			room = aggregateRoom(e.viewGuard(c).budget(), rest)
		}
		members = append([]query.Member{{Key: "_aggregate", Value: out.Aggregate.JSON(room)}}, members...)
	}
	if view, err = query.SetMembers(withoutEnvelopeKeys(view), members); err != nil {
		return nil, fmt.Errorf("envelope: %w", err)
	}
	path := w.ItemsPath
	if w.HasItems && path == "" {
		path = "items"
	}
	out, err = e.guard(ctx, c, out, view, path, isText, full)
	if err != nil {
		return nil, err
	}
	if v.ResultID == "" && out.ResultID != "" {
		v.ResultID = out.ResultID
	}
	if v.ResultID != "" && e.opt.Results != nil {
		v.ResultExpires = e.clock.Now().Add(e.opt.Results.TTL())
	}
	return out, nil
}

// envelopeKeys are the top-level members trawl writes about a result
// (DESIGN.md §5, the size guard's, a workflow's _loop). The model is told
// to trust them, so no upstream member of these names reaches a view: an
// upstream's own "_pagingComplete": true would otherwise stand where trawl
// writes none (a single response, a plain call).
var envelopeKeys = []string{"_pagingComplete", "_likelyMoreRows", "_stoppedBy", "_note", "_boundary", "_resultId",
	"_resultExpires", "_resultExpired", "_unmatchedFields", "_unmatchedFilter", "_forEachErrors", "_forEachSkipped",
	"_forEachPartial", "_cache", "_aggregate", "_unknownArgs", "_loop", "_truncated", "_shownItems", "_totalItems",
	"_shownChars", "_totalChars"}

// withoutEnvelopeKeys is view without the top-level envelopeKeys it holds.
func withoutEnvelopeKeys(view []byte) []byte {
	if query.FirstByte(view) != '{' {
		return view
	}
	keys, err := query.Keys(view)
	if err != nil {
		return view
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "_") || !slices.Contains(envelopeKeys, k) {
			continue
		}
		if out, err := query.Delete(view, query.JoinPath(k)); err == nil {
			view = out
		}
	}
	return view
}

// unknownArgsMember is the envelope's _unknownArgs: the arguments sent
// that no parameter declares, which the tool's schema admits.
func unknownArgsMember(names []string) query.Member {
	b, _ := json.Marshal(names)
	return query.Member{Key: "_unknownArgs", Value: b}
}

// withPath is f with path added when it lacks it.
func withPath(f *query.Fields, path string) (*query.Fields, error) {
	paths := f.Paths()
	for _, p := range paths {
		if p == path {
			return f, nil
		}
	}
	return query.CompileFields(append(paths, path))
}

// verdict makes the typed verdict of a walked call (the counts that need
// the projected rows are filled by present).
func (e *Engine) verdict(q walkRequest, w *walked, hit *CacheHit) *Verdict {
	v := &Verdict{
		StopReason: w.StoppedBy, Collection: w.HasItems, Text: w.Text && !w.HasItems,
		Scalar:  !w.HasItems && !w.Text && len(bytes.TrimSpace(w.Envelope)) > 0 && query.FirstByte(w.Envelope) != '{',
		Records: len(w.Items), Pages: w.Pages, Requests: w.Requests, Retries: w.Retries,
		PageSize: w.PageSize, Duplicates: w.Dups, TotalMoved: w.Moved, Resumed: w.Resumed,
		LastCursor: w.LastCur, Uninspected: w.Uninsp, Cause: w.Cause, Scope: scopeText(q),
		Empty:  !w.HasItems && len(bytes.TrimSpace(w.Envelope)) == 0,
		Action: actionOf(q.call.Tool, q.effect, w.Requests), Values: w.Values,
		ForEachErrors: w.Errors, ForEachSkipped: w.Skipped, ForEachPartial: w.Partial, Cache: hit,
		Shifted: w.Shifted, Unproven: w.Unproven, Probes: w.Probes, Unused: w.Unused, Status: w.Status,
	}
	if hit != nil {
		// The rows come from a walk made earlier: this call sent nothing.
		v.Requests, v.Retries, v.Probes, v.Unused = 0, 0, 0, 0
	}
	if q.r.ForEach != nil {
		v.ForEachKey = q.r.ForEach.Key
	}
	paginated := w.Plan.Paginated()
	if w.HasItems && paginated {
		v.ReportedTotal = w.Total
	}
	switch {
	case len(w.Errors) > 0 || len(w.Skipped) > 0 || len(w.Partial) > 0:
		v.Completion = Partial
	case !w.HasItems:
		v.Completion, v.StopReason = SingleResponse, StopSingleResponse
	case !w.Complete:
		v.Completion = Partial
	case !paginated && w.Values == 0:
		v.Completion, v.StopReason = SingleResponse, StopSingleResponse
	case w.unstable():
		v.Completion = Unstable
	default:
		v.Completion = Complete
	}
	v.FirstPageOnly = v.Completion == Partial && w.StoppedBy == paginate.StopFirstPage
	switch v.Completion {
	case Partial:
		v.LikelyMore = true
		if v.FirstPageOnly && len(w.Errors)+len(w.Skipped) == 0 {
			v.LikelyMore = w.Likely // the first page's own signals
			v.MoreSaid = w.MoreSaid
		}
	case Unstable:
		v.LikelyMore = true // rows that moved across a page boundary may be missing
	}
	if v.Completion != Partial && v.Completion != Unstable {
		v.LastCursor, v.Uninspected = "", ""
	}
	return v
}

// availableKeys shows what the rows do hold: the keys of the first
// object row and, when sample is set, that row (long values shortened).
func availableKeys(rows [][]byte, sample bool) ([]string, json.RawMessage) {
	for _, it := range rows {
		if query.FirstByte(it) != '{' {
			continue
		}
		keys, err := query.Keys(it)
		if err != nil {
			continue
		}
		sort.Strings(keys)
		if !sample {
			return keys, nil
		}
		s := it
		if len(s) > 2000 { // a sample, not a second copy of a huge row
			s = nil
			for _, k := range keys {
				val, _ := query.Get(it, query.JoinPath(k))
				if len(val) > 200 {
					val = []byte(`"…"`)
				}
				s = query.AppendMember(s, k, val)
			}
			s = query.CloseObject(s)
		}
		return keys, json.RawMessage(s)
	}
	return []string{}, nil
}

// withItems puts rows in place of the primary array; a bare array
// becomes {"items": [...]}.
func withItems(env []byte, path string, rows [][]byte) ([]byte, error) {
	n := 2 + len(rows)
	for _, r := range rows {
		n += len(r)
	}
	arr := make([]byte, 0, n)
	arr = append(arr, '[')
	for i, r := range rows {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, r...)
	}
	arr = append(arr, ']')
	if path == "" {
		return append(append([]byte(`{"items":`), arr...), '}'), nil
	}
	out, err := query.Replace(env, path, arr)
	if err != nil {
		return nil, fmt.Errorf("placing the merged rows at %q: %w", path, err)
	}
	return out, nil
}

func unmatchedPaths(paths []string, matched []bool) []string {
	var out []string
	for i, ok := range matched {
		if !ok {
			out = append(out, paths[i])
		}
	}
	return out
}

// scopeText says in one line what the call walked.
func scopeText(q walkRequest) string {
	t := q.call.Tool
	var b strings.Builder
	b.WriteString(t.Name)
	keys := make([]string, 0, len(q.own))
	for k := range q.own {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" with ")
		} else {
			b.WriteString(", ")
		}
		v, _ := json.Marshal(q.own[k])
		fmt.Fprintf(&b, "%s=%s", k, v)
	}
	if q.values != nil {
		fmt.Fprintf(&b, " for %s of %s", plural(len(q.values), "value"), q.r.ForEach.Key)
	}
	switch {
	case !q.plan.Paginated():
	case q.r.AllPages:
		b.WriteString(", every page")
	default:
		b.WriteString(", first page only")
	}
	return b.String()
}

func appendJSONValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return query.AppendString(dst, x)
	case float64:
		return strconv.AppendFloat(dst, x, 'f', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}
