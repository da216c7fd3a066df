package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
)

// plainCall is a call under a binding that does not loop: one request,
// no reserved argument honoured, the size guard only.
func (e *Engine) plainCall(ctx context.Context, c Call, own map[string]any) (*Outcome, error) {
	plan := e.Plan(c.Tool)
	res, err := paginate.Walk(ctx, paginate.WalkOptions{
		Caller: e.opt.Caller, Clock: e.clock, Tool: c.Tool, Args: own, Plan: plan,
		Budget: e.opt.Budget.Merge(c.Binding.Budget), Credential: c.Credential, ThreadID: c.Scope.Thread,
	})
	if err != nil {
		return nil, upstreamError(c.Tool, err)
	}
	body := asJSON(res.FirstBody)
	path, hasItems := itemsPathOf(res.Plan, body)
	out := &Outcome{View: body, Requests: res.Requests}
	if !hasItems {
		path = ""
	}
	return e.guard(ctx, c, out, body, path, func() (*StoredResult, error) {
		return NewStoredResult(c.Tool.ID, body, path)
	})
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
// stored and its id given.
func (e *Engine) guard(ctx context.Context, c Call, out *Outcome, view []byte, itemsPath string, full func() (*StoredResult, error)) (*Outcome, error) {
	g := Guard{Budget: c.ViewChars}
	if g.Budget == 0 {
		g.Budget = e.opt.ViewChars
	}
	if c.Workflow || g.Fits(view) {
		out.View = view
		return out, nil
	}
	if out.ResultID == "" {
		out.ResultID = e.keep(ctx, c, full)
	}
	cut, err := g.Cut(view, itemsPath, out.ResultID)
	if err != nil {
		return nil, fmt.Errorf("size guard: %w", err)
	}
	out.View, out.Truncated = cut.View, cut.Truncated
	return out, nil
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
	id, err := e.opt.Results.Keep(ctx, c.Scope, rec)
	if err != nil {
		e.log.Warn("result not kept", "tool", c.Tool.ID, "err", err)
		return ""
	}
	return id
}

// present turns what a looping call collected into the model's view.
func (e *Engine) present(ctx context.Context, q walkRequest, w *walked, hit *CacheHit, fields *query.Fields, filter *query.Filter) (*Outcome, error) {
	c := q.call
	out := &Outcome{Looped: true, Complete: w.Complete, StoppedBy: w.StoppedBy, Requests: w.Requests, CacheHit: hit != nil}
	var view []byte
	var unmatched []string
	var err error
	if w.HasItems {
		rows, st, err := query.Run(w.Items, fields, filter)
		if err != nil {
			return nil, fmt.Errorf("projecting rows: %w", err)
		}
		unmatched = st.Unmatched
		out.Items = len(rows)
		if view, err = withItems(w.Envelope, w.ItemsPath, rows); err != nil {
			return nil, err
		}
	} else {
		view = asJSON(w.Envelope)
		if firstByte(view) != '{' {
			// A bare scalar: the envelope keys need an object to sit in.
			view = append(append([]byte(`{"result":`), view...), '}')
		}
		if fields != nil {
			matched := make([]bool, len(fields.Paths()))
			if view, err = fields.Project(view, nil, matched); err != nil {
				return nil, fmt.Errorf("projecting: %w", err)
			}
			unmatched = unmatchedPaths(fields.Paths(), matched)
		}
	}
	out.Note = e.note(q, w, hit, out.Items, filter != nil && w.HasItems)
	full := func() (*StoredResult, error) {
		if w.HasItems {
			return NewStoredResultFromItems(c.Tool.ID, w.Envelope, w.ItemsPath, w.Items)
		}
		return NewStoredResult(c.Tool.ID, asJSON(w.Envelope), "")
	}
	var members []query.Member
	if c.Workflow {
		loop, _ := json.Marshal(map[string]any{"complete": w.Complete, "requests": w.Requests,
			"itemCount": out.Items, "stoppedBy": w.StoppedBy, "note": out.Note})
		members = append(members, query.Member{Key: "_loop", Value: loop})
	} else {
		// A walk's full set is kept whenever it holds rows, so the model
		// can come back for a field it projected away.
		if w.HasItems && len(w.Items) > 0 {
			out.ResultID = e.keep(ctx, c, full)
		}
		members = e.envelope(q, w, hit, out, unmatched)
	}
	if view, err = query.SetMembers(view, members); err != nil {
		return nil, err
	}
	path := w.ItemsPath
	if w.HasItems && path == "" {
		path = "items"
	}
	return e.guard(ctx, c, out, view, path, full)
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

// envelope builds the keys of DESIGN.md §5 for a looping result.
func (e *Engine) envelope(q walkRequest, w *walked, hit *CacheHit, out *Outcome, unmatched []string) []query.Member {
	var ms []query.Member
	add := func(k string, v any) {
		b, err := json.Marshal(v)
		if err == nil {
			ms = append(ms, query.Member{Key: k, Value: b})
		}
	}
	add("_pagingComplete", w.Complete)
	add("_likelyMoreRows", !w.Complete)
	add("_stoppedBy", w.StoppedBy)
	add("_note", out.Note)
	add("_boundary", e.boundary(q, w))
	if out.ResultID != "" {
		add("_resultId", out.ResultID)
	}
	if len(unmatched) > 0 {
		add("_unmatchedFields", unmatchedReport(unmatched, w))
	}
	if len(w.Errors) > 0 {
		add("_forEachErrors", w.Errors)
	}
	if hit != nil {
		ms = append(ms, query.Member{Key: "_cache", Value: hit.JSON()})
	}
	return ms
}

// unmatchedReport shows the model what the items really hold.
func unmatchedReport(paths []string, w *walked) map[string]any {
	rep := map[string]any{"paths": paths, "availableKeys": []string{}}
	for _, it := range w.Items {
		if firstByte(it) != '{' {
			continue
		}
		keys, err := query.Keys(it)
		if err == nil {
			sort.Strings(keys)
			rep["availableKeys"] = keys
		}
		sample := it
		if len(sample) > 2000 { // a sample, not a second copy of a huge row
			sample = nil
			for _, k := range keys {
				v, _ := query.Get(it, query.JoinPath(k))
				if len(v) > 200 {
					v = []byte(`"…"`)
				}
				sample = query.AppendMember(sample, k, v)
			}
			sample = query.CloseObject(sample)
		}
		rep["sample"] = json.RawMessage(sample)
		break
	}
	return rep
}

// boundary is the boundary statement: what was walked, how far, and
// what was not inspected.
func (e *Engine) boundary(q walkRequest, w *walked) map[string]any {
	b := map[string]any{
		"scope":      scopeText(q),
		"pages":      w.Pages,
		"requests":   w.Requests,
		"records":    len(w.Items),
		"completion": map[bool]string{true: "complete", false: "partial"}[w.Complete],
		"stopReason": w.StoppedBy,
	}
	if w.PageSize > 0 {
		b["pageSize"] = w.PageSize
	}
	if w.LastCur != "" {
		b["lastCursor"] = maskCursor(w.LastCur)
	}
	if w.Uninsp != "" {
		b["uninspected"] = w.Uninsp
	} else if !w.Complete {
		b["uninspected"] = "rows after the last page fetched"
	}
	if w.Dups > 0 {
		b["duplicates"] = w.Dups
	}
	if w.Total != nil {
		b["reportedTotal"] = *w.Total
	}
	if w.Retries > 0 {
		b["retries"] = w.Retries
	}
	return b
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
		fmt.Fprintf(&b, " for %d values of %s", len(q.values), q.r.forEach.Key)
	}
	switch {
	case !q.plan.Paginated():
	case q.r.allPages:
		b.WriteString(", every page")
	default:
		b.WriteString(", first page only")
	}
	return b.String()
}

// maskCursor shows a cursor without revealing it: its first and last four
// characters (only when it is long enough that this hides most of it),
// its length and a hash prefix.
func maskCursor(c string) map[string]any {
	sum := sha256.Sum256([]byte(c))
	m := map[string]any{"length": utf8.RuneCountInString(c), "sha256": hex.EncodeToString(sum[:4])}
	if r := []rune(c); len(r) >= 16 {
		m["masked"] = string(r[:4]) + "…" + string(r[len(r)-4:])
	}
	return m
}

// note is the one sentence (or two) the model reads about the verdict.
func (e *Engine) note(q walkRequest, w *walked, hit *CacheHit, kept int, filtered bool) string {
	n := len(w.Items)
	var s string
	switch {
	case !q.r.allPages && w.Plan.Paginated() && !w.Complete:
		s = fmt.Sprintf("This is only the first page (%d rows); more rows exist. Call again with _all_pages: true to fetch every page before counting or summarising.", n)
	case w.Complete && q.r.allPages:
		s = fmt.Sprintf("Complete: all %d rows, fetched in %d pages.", n, w.Pages)
	case w.Complete:
		s = fmt.Sprintf("Complete: %d rows; the server reported no more.", n)
	default:
		s = fmt.Sprintf("Partial: %d rows fetched, and more exist. %s", n, stopAdvice(w.StoppedBy, q.budget))
	}
	if filtered {
		s += fmt.Sprintf(" %d of them match the filter.", kept)
	}
	if len(w.Errors) > 0 {
		s += fmt.Sprintf(" %d of %d _for_each values failed (see _forEachErrors); their rows are missing.", len(w.Errors), w.Values)
	}
	if w.Dups > 0 {
		s += fmt.Sprintf(" %d rows appeared twice (the data changed during the walk); count distinct ids.", w.Dups)
	}
	if w.Mismatch && w.Total != nil {
		s += fmt.Sprintf(" The server reported a total of %d, which differs from the rows received.", *w.Total)
	}
	switch {
	case hit != nil && q.call.Workflow:
		s += fmt.Sprintf(" Served from a complete walk cached at %s (the step's cache TTL).", hit.CachedAt.UTC().Format(time.RFC3339))
	case hit != nil:
		s += " " + hit.Note()
	}
	return s
}

// stopAdvice says which bound or fault ended a partial walk and how to
// get the rest.
func stopAdvice(stoppedBy string, b paginate.Budget) string {
	narrow := "Narrow the request with the API's own filters (or fewer _for_each values) to get the rest."
	switch stoppedBy {
	case paginate.StopBudgetPages:
		return fmt.Sprintf("The walk stopped at the limit of %d pages per collection. %s", b.Pages, narrow)
	case paginate.StopBudgetRequests:
		return fmt.Sprintf("The walk stopped at the limit of %d requests per call. %s", b.Requests, narrow)
	case paginate.StopBudgetItems:
		return fmt.Sprintf("The walk stopped at the limit of %d rows per call. %s", b.Items, narrow)
	case paginate.StopBudgetBytes:
		return fmt.Sprintf("The walk stopped at the limit of %d MB of upstream data. %s", b.Bytes>>20, narrow)
	case paginate.StopBudgetTime:
		return fmt.Sprintf("The walk stopped at the time limit of %s. %s", b.Time, narrow)
	case paginate.StopRepeatedCursor:
		return "The server handed back a page it had already given, so the walk stopped instead of looping."
	case paginate.StopCursorExpired:
		return "The server rejected the continuation cursor mid-walk; call again to start over."
	case paginate.StopRateLimited:
		return "The server rate-limited the walk for longer than the time left; try again later."
	case paginate.StopHTTPError:
		return "A later page failed upstream after retries; call again to retry."
	case paginate.StopInconsistent:
		return "The server's paging data could not be trusted, so the walk stopped."
	case paginate.StopForeignNextURL:
		return "The server pointed the next page at another host, which is not followed."
	}
	return narrow
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
