package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// Completion is how much of the data a looping call holds
// (`_boundary.completion`).
type Completion string

// The four completions (DESIGN.md §5).
const (
	// Complete: every page of every value was fetched, the server said it
	// was done (or a numeric walk proved its end), and the collection did
	// not change during the walk. The only completion under which
	// _pagingComplete is true.
	Complete Completion = "complete"
	// Partial: a budget, an error, a guard, a failed or skipped fan-out
	// value, or the absence of _all_pages stopped it; rows are missing.
	Partial Completion = "partial"
	// Unstable: the end was reached but the collection changed during the
	// walk (a duplicate id, a total that moved, a total that disagrees
	// with the distinct rows): at least these rows, maybe with gaps.
	Unstable Completion = "unstable"
	// SingleResponse: a tool without pagination, or a response that is
	// not a collection (an object, a scalar, text): no paging claim.
	SingleResponse Completion = "single_response"
)

// StopSingleResponse is the stop reason of a single response: nothing
// was walked.
const StopSingleResponse = "single_response"

// Verdict is what the engine says about one looping call, typed. The
// model's envelope (_pagingComplete, _likelyMoreRows, _stoppedBy, _note,
// _boundary, _forEachErrors, _forEachSkipped, _unmatchedFields,
// _unmatchedFilter), a workflow's _loop block and `trawl call`'s lines are
// all rendered from it, and Note is its only wording.
type Verdict struct {
	Completion Completion
	// StopReason is why the walk ended: the _stoppedBy vocabulary of
	// DESIGN.md §6, first_page_only, or single_response.
	StopReason string
	// LikelyMore says rows exist (or may exist) beyond what was fetched.
	LikelyMore bool
	// MoreSaid: the server itself said more rows exist (a first page
	// only); LikelyMore without it means more rows may exist.
	MoreSaid bool
	// FirstPageOnly: a paginated tool called without _all_pages.
	FirstPageOnly bool
	// Collection: the response is a list of rows. False for an object, a
	// scalar or text (Text), which claim no row count.
	Collection bool
	Text       bool // the response was text
	Scalar     bool // the response was one JSON value that is not an object
	// Records counts the distinct rows collected (before _filter); Rows
	// those given after it.
	Records int
	Rows    int
	// Filtered: a _filter applied to the rows; FilterIgnored: a _filter
	// was given but the response has no rows to filter.
	Filtered      bool
	FilterIgnored bool
	// Aggregated: _aggregate replaced the rows by its groups;
	// AggregateIgnored: _aggregate was given but the response has no rows.
	// AggregateVerdict is the aggregate's verdict sentence (see
	// SetVerdict.Over).
	Aggregated       bool
	AggregateIgnored bool
	AggregateVerdict string

	Pages    int
	Requests int // upstream requests made for the call, retries included
	Retries  int
	PageSize int // size asked per page; 0 when none was set
	// Duplicates counts rows received again (dropped from the view);
	// ReportedTotal is the server's last reported total when it counts
	// the rows; TotalMoved says the total changed between pages.
	Duplicates    int
	ReportedTotal *int
	TotalMoved    bool
	// Resumed: the walk began past the start of the collection (a cursor,
	// offset or page the caller sent), so complete means "from there on".
	Resumed bool
	// LastCursor is the continuation not followed, raw (rendered masked).
	LastCursor  string
	Uninspected string
	// Cause says in words why a partial walk stopped (what was wrong with
	// the server's paging data, for inconsistent_pagination).
	Cause string
	// Empty: the response had no body (a 204).
	Empty bool
	// Scope says in one line what the call walked; Action what it may have
	// changed ("none (read-only)" for a read).
	Scope  string
	Action string

	// Fan-out: Values asked, each ending in exactly one of: succeeded
	// (all its rows), ForEachPartial (some of its rows, its walk cut
	// short), ForEachErrors or ForEachSkipped.
	Values         int
	ForEachKey     string
	ForEachErrors  []ForEachError
	ForEachSkipped []ForEachSkip
	ForEachPartial []ForEachCut

	// Shifted: rows moved across a page boundary of a position-based walk
	// (a row added or removed earlier in the collection between two
	// reads). Unproven: why a position-based walk could not prove that it
	// saw every row. Probes: requests made only to check the walk (they
	// are in Requests, not in Pages). Unused: requests fetched ahead whose
	// page the walk never read (past an end that moved, or at a position a
	// short page shifted; in Requests, not in Pages).
	Shifted  bool
	Unproven string
	Probes   int
	Unused   int
	// Status is the HTTP status of the response that stopped a partial
	// walk (0 when none did).
	Status int

	// UnmatchedFields are _fields paths no row has; UnmatchedFilter the
	// _filter fields no row has; AvailableKeys and Sample show what the
	// rows do hold.
	UnmatchedFields []string
	UnmatchedFilter []string
	AvailableKeys   []string
	Sample          json.RawMessage

	// ResultID is the handle of the full payload, kept until
	// ResultExpires; "" when none was kept.
	ResultID      string
	ResultExpires time.Time
	Cache         *CacheHit

	// Note is the verdict in words for the model (see note).
	Note string
}

// PagingComplete is _pagingComplete: true only for Complete.
func (v *Verdict) PagingComplete() bool { return v.Completion == Complete }

// Succeeded is how many fan-out values gave all their rows.
func (v *Verdict) Succeeded() int {
	return v.Values - len(v.ForEachErrors) - len(v.ForEachSkipped) - len(v.ForEachPartial)
}

// ForEachError is one failed fan-out value.
type ForEachError struct {
	Value any    `json:"value"`
	Error string `json:"error"`
	// Status is the upstream HTTP status; 0 (omitted) for a transport
	// failure or a timeout.
	Status int `json:"status,omitempty"`
	// Retryable says whether calling again could help: a 5xx, a 429, a
	// timeout or a transport failure; never a 4xx.
	Retryable bool `json:"retryable"`
}

// ForEachSkip is one fan-out value never requested, and why.
type ForEachSkip struct {
	Value  any    `json:"value"`
	Reason string `json:"reason"`
}

// ForEachCut is one fan-out value whose walk was cut short
// (`_forEachPartial`): its rows are in the result, but not all of them.
type ForEachCut struct {
	Value any `json:"value"`
	// Rows counts the value's rows in the result (before _filter).
	Rows int `json:"rows"`
	// StopReason is why the value's walk stopped (the _stoppedBy
	// vocabulary).
	StopReason string `json:"stopReason"`
	// Resume says where the value's walk would go on: the page or offset
	// argument to pass ("page=3", "offset=40"), or what to do.
	Resume string `json:"resume"`
}

// Boundary is the boundary statement (`_boundary`): every key always
// present, null where it does not apply.
type Boundary struct {
	Scope       string        `json:"scope"`
	PageSize    *int          `json:"pageSize"`
	Pages       int           `json:"pages"`
	Requests    int           `json:"requests"`
	Records     *int          `json:"records"` // null for a response that is not a collection
	Completion  Completion    `json:"completion"`
	StopReason  string        `json:"stopReason"`
	LastCursor  *MaskedCursor `json:"lastCursor"`
	Uninspected string        `json:"uninspected"`
	Action      string        `json:"action"`
	Retries     int           `json:"retries,omitempty"`
	Probes      int           `json:"probes,omitempty"` // requests that only checked the walk (in requests, not in pages)
	Unused      int           `json:"unused,omitempty"` // requests fetched ahead whose page was never read (in requests, not in pages)
	Duplicates  *int          `json:"duplicates,omitempty"`
	Reported    *int          `json:"reportedTotal,omitempty"`
	Distinct    *int          `json:"distinctRecords,omitempty"`
}

// MaskedCursor shows a cursor without revealing it: its first and last
// four characters (only when it is long enough that this hides most of
// it), its length and a hash prefix.
type MaskedCursor struct {
	Masked string `json:"masked,omitempty"`
	Length int    `json:"length"`
	SHA256 string `json:"sha256"`
}

func maskCursor(c string) *MaskedCursor {
	if c == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(c))
	m := &MaskedCursor{Length: utf8.RuneCountInString(c), SHA256: hex.EncodeToString(sum[:4])}
	if r := []rune(c); len(r) >= 16 {
		m.Masked = string(r[:4]) + "…" + string(r[len(r)-4:])
	}
	return m
}

// Boundary returns the boundary statement.
func (v *Verdict) Boundary() Boundary {
	b := Boundary{
		Scope: v.Scope, Pages: v.Pages, Requests: v.Requests, Completion: v.Completion,
		StopReason: v.StopReason, LastCursor: maskCursor(v.LastCursor), Uninspected: v.Uninspected,
		Action: v.Action, Retries: v.Retries, Probes: v.Probes, Unused: v.Unused,
	}
	if v.PageSize > 0 {
		b.PageSize = intPtr(v.PageSize)
	}
	if v.Collection {
		b.Records = intPtr(v.Records)
	}
	if v.Completion == Complete {
		b.Uninspected = "none"
	} else if b.Uninspected == "" {
		b.Uninspected = v.uninspected()
	}
	if v.Duplicates > 0 || v.Completion == Unstable {
		b.Duplicates = intPtr(v.Duplicates)
	}
	if v.ReportedTotal != nil && v.Collection {
		b.Reported = intPtr(*v.ReportedTotal)
	}
	if v.Completion == Unstable {
		b.Distinct = intPtr(v.Records)
	}
	return b
}

func intPtr(n int) *int { return &n }

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// changed reports that the walk saw the collection change: a row came
// back twice, the total moved, or rows shifted across a page boundary.
func (v *Verdict) changed() bool { return v.Duplicates > 0 || v.TotalMoved || v.Shifted }

// uninspected words what was not fetched when the walk gave no words.
func (v *Verdict) uninspected() string {
	switch {
	case v.Completion == SingleResponse:
		return "none (a single response: nothing to page through)"
	case v.Completion == Unstable && v.changed():
		return "rows that moved across a page boundary while the collection changed"
	case v.Completion == Unstable && v.Unproven != "":
		return "rows that may have moved across a page boundary the walk could not check: " + v.Unproven
	case v.Completion == Unstable:
		return fmt.Sprintf("the rows the reported total (%d) counts beyond the %d received, if it counts what this call returns", derefInt(v.ReportedTotal), v.Records)
	case len(v.ForEachSkipped)+len(v.ForEachErrors)+len(v.ForEachPartial) > 0:
		return fmt.Sprintf("the rows of %s", plural(len(v.ForEachSkipped)+len(v.ForEachErrors)+len(v.ForEachPartial), "_for_each value"))
	}
	return "rows after the last page fetched"
}

// members renders the envelope keys of DESIGN.md §5, in their order.
func (v *Verdict) members() []query.Member {
	var ms []query.Member
	add := func(k string, x any) {
		if b, err := json.Marshal(x); err == nil {
			ms = append(ms, query.Member{Key: k, Value: b})
		}
	}
	if v.Completion != SingleResponse {
		// A single response is not paged: "false" would read as
		// "incomplete", "true" as a walk; it says neither.
		add("_pagingComplete", v.PagingComplete())
	}
	add("_likelyMoreRows", v.LikelyMore)
	add("_stoppedBy", v.StopReason)
	add("_note", v.Note)
	add("_boundary", v.Boundary())
	if v.ResultID != "" {
		add("_resultId", v.ResultID)
	}
	if len(v.UnmatchedFields) > 0 {
		add("_unmatchedFields", UnmatchedFields{Paths: v.UnmatchedFields, AvailableKeys: keysOrEmpty(v.AvailableKeys), Sample: v.Sample})
	}
	if len(v.UnmatchedFilter) > 0 {
		add("_unmatchedFilter", UnmatchedFilter{Fields: v.UnmatchedFilter, AvailableKeys: keysOrEmpty(v.AvailableKeys)})
	}
	if len(v.ForEachErrors) > 0 {
		add("_forEachErrors", v.ForEachErrors)
	}
	if len(v.ForEachSkipped) > 0 {
		add("_forEachSkipped", v.ForEachSkipped)
	}
	if len(v.ForEachPartial) > 0 {
		add("_forEachPartial", v.ForEachPartial)
	}
	if v.Cache != nil {
		ms = append(ms, query.Member{Key: "_cache", Value: v.Cache.JSON()})
	}
	return ms
}

func keysOrEmpty(keys []string) []string {
	if keys == nil {
		return []string{}
	}
	return keys
}

// LoopBlock is a workflow step's _loop block (DESIGN.md §10). A fan-out
// step's failed, skipped and cut values are in it too, since a step's
// output has no envelope keys but _loop.
type LoopBlock struct {
	Complete       bool           `json:"complete"`
	Completion     Completion     `json:"completion"`
	Requests       int            `json:"requests"`
	ItemCount      *int           `json:"itemCount"` // null for a response that is not a collection
	StoppedBy      string         `json:"stoppedBy"`
	Note           string         `json:"note"`
	ForEachErrors  []ForEachError `json:"forEachErrors,omitempty"`
	ForEachSkipped []ForEachSkip  `json:"forEachSkipped,omitempty"`
	ForEachPartial []ForEachCut   `json:"forEachPartial,omitempty"`
	// Aggregate is the verdict sentence of the step's aggregate, when it
	// has one (its numbers are under _aggregate).
	Aggregate string `json:"aggregate,omitempty"`
}

// LoopBlock renders the verdict as a workflow's _loop block.
func (v *Verdict) LoopBlock() LoopBlock {
	b := LoopBlock{Complete: v.PagingComplete(), Completion: v.Completion, Requests: v.Requests,
		StoppedBy: v.StopReason, Note: v.Note, Aggregate: v.AggregateVerdict,
		ForEachErrors: v.ForEachErrors, ForEachSkipped: v.ForEachSkipped, ForEachPartial: v.ForEachPartial}
	if v.Collection {
		b.ItemCount = intPtr(v.Rows)
	}
	return b
}

// Summary is the verdict in one line, for a terminal: "complete: 45
// rows, 3 requests, stopped by complete_no_next".
func (v *Verdict) Summary() string {
	what := "a single response"
	switch {
	case v.Collection && v.Filtered:
		what = fmt.Sprintf("%d of %s", v.Rows, plural(v.Records, "row"))
	case v.Collection:
		what = plural(v.Rows, "row")
	}
	return fmt.Sprintf("%s: %s, %s, stopped by %s", v.Completion, what, plural(v.Requests, "request"), v.StopReason)
}

// plural is "1 row", "2 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// actionOf says what a call may have changed, from its effect: "none
// (read-only)" for a read, else the method, path and how many requests
// were sent.
func actionOf(t *tools.Tool, effect tools.Effect, requests int) string {
	if !effect.Writes() {
		return "none (read-only)"
	}
	target := t.Name
	if t.Method != "" {
		target = strings.ToUpper(t.Method) + " " + t.Path
	}
	if requests == 0 {
		return fmt.Sprintf("none: %s was never sent", target)
	}
	verb := "may have changed data"
	if effect == tools.EffectDestructive {
		verb = "may have deleted data"
	}
	return fmt.Sprintf("%s: %s (%s)", verb, target, plural(requests, "request"))
}

// note is the one wording of a verdict for the model: a sentence or two
// on what the result holds, what stopped it, and how to get the rest.
// Nothing else words a verdict.
func note(v *Verdict, b paginate.Budget, workflow bool) string {
	var s string
	rows := plural(v.Records, "row")
	// see names an envelope key where this result holds it: a workflow
	// step's output has only _loop.
	see := func(key string) string {
		if workflow {
			return "_loop." + strings.TrimPrefix(key, "_")
		}
		return key
	}
	switch {
	case v.Values > 0 && v.Succeeded() < v.Values:
		s = fmt.Sprintf("Partial: %d of %d _for_each values succeeded (%s in all).", v.Succeeded(), v.Values, rows)
		if n := len(v.ForEachPartial); n > 0 {
			s += fmt.Sprintf(" %s cut short, with only some of %s rows (see %s: each one's rows, why it stopped and where it resumes).",
				plural(n, "value"), map[bool]string{true: "its", false: "their"}[n == 1], see("_forEachPartial"))
		}
		if n := len(v.ForEachErrors); n > 0 {
			retry := 0
			for _, e := range v.ForEachErrors {
				if e.Retryable {
					retry++
				}
			}
			s += fmt.Sprintf(" %s failed (see %s)", plural(n, "value"), see("_forEachErrors"))
			them, those := "them", "those values"
			if n == 1 {
				them, those = "it", "that value"
			}
			switch retry {
			case 0:
				s += fmt.Sprintf("; a retry cannot help %s (the server rejected %s).", them, them)
			case n:
				s += fmt.Sprintf("; calling again with only %s may succeed.", those)
			default:
				s += fmt.Sprintf("; calling again may help for the %d marked retryable.", retry)
			}
		}
		if n := len(v.ForEachSkipped); n > 0 {
			were := "were"
			if n == 1 {
				were = "was"
			}
			s += fmt.Sprintf(" %s %s never requested (see %s): %s.", plural(n, "value"), were, see("_forEachSkipped"), v.ForEachSkipped[0].Reason)
		}
		switch {
		case v.StopReason == paginate.StopFirstPage:
			s += " Only the first page of each value was fetched; pass _all_pages: true to fetch every page."
		case strings.HasPrefix(v.StopReason, "budget_") && len(v.ForEachSkipped) == 0:
			s += " " + stopAdvice(v, b)
		}
	case v.Completion == SingleResponse && !v.Collection:
		what := "one object"
		switch {
		case v.Empty:
			what = "an empty response (no body)"
		case v.Text:
			what = "text"
		case v.Scalar:
			what = "a single value"
		}
		s = fmt.Sprintf("Single response: the tool returned %s, not a list of rows, so there are no pages and no row count; it is the whole answer.", what)
	case v.Completion == SingleResponse:
		s = "Single response: this tool does not paginate, so this is what one call returns; it makes no claim about pages."
	case v.FirstPageOnly && v.MoreSaid:
		s = fmt.Sprintf("This is only the first page (%s); more rows exist. Call again with _all_pages: true to fetch every page before counting or summarising.", rows)
	case v.FirstPageOnly:
		s = fmt.Sprintf("This is only the first page (%s); more rows may exist. Call again with _all_pages: true before counting or saying there are no more.", rows)
	case v.Completion == Unstable:
		s = unstableNote(v)
	case v.Completion == Complete && v.Values > 0:
		s = fmt.Sprintf("Complete: all %s of %s, fetched in %s.", rows, plural(v.Values, "_for_each value"), plural(v.Pages, "page"))
	case v.Completion == Complete && (v.Resumed || v.ReportedTotal != nil && *v.ReportedTotal > v.Records):
		// Complete from where the caller began (a cursor, an offset or a
		// page past the first): the rows before it were never asked for.
		s = fmt.Sprintf("Complete from the requested start: %s from there to the end, fetched in %s.", rows, plural(v.Pages, "page"))
		if v.ReportedTotal != nil {
			s += fmt.Sprintf(" The server reports %d in all.", *v.ReportedTotal)
		}
		s += " The rows before the start were not requested, so do not count these as all of them."
	case v.Completion == Complete && v.Pages > 1:
		s = fmt.Sprintf("Complete: all %s, fetched in %s.", rows, plural(v.Pages, "page"))
	case v.Completion == Complete:
		s = fmt.Sprintf("Complete: all %s; the server reported no more.", rows)
	case v.StopReason == paginate.StopInconsistent:
		// Whether more exist is exactly what could not be read.
		s = fmt.Sprintf("Partial: %s fetched, and more may exist. The server's paging data could not be trusted, so the walk stopped", rows)
		if v.Cause != "" {
			s += " (" + v.Cause + ")"
		}
		s += "."
	case v.StopReason == paginate.StopBudgetTime && strings.Contains(v.Cause, "rate limit"):
		// The provider's rate limit would have kept the next page past
		// the time budget (the walker's cause ends with its words).
		_, why, _ := strings.Cut(v.Cause, ": ")
		s = fmt.Sprintf("Partial: %s fetched, and more exist. The walk stopped before the time limit of %s because %s; call again later for the rest.", rows, b.Time, why)
	default:
		s = fmt.Sprintf("Partial: %s fetched, and more exist. %s", rows, stopAdvice(v, b))
	}
	if v.Filtered {
		verb := "match"
		if v.Rows == 1 {
			verb = "matches"
		}
		s += fmt.Sprintf(" %d of them %s the filter.", v.Rows, verb)
	}
	if v.FilterIgnored {
		s += " _filter applies to lists of rows, so this response was not filtered."
	}
	switch {
	case !v.Aggregated:
	case v.ResultID != "":
		s += " The rows are not listed: _aggregate holds their numbers, and queryToolResult reads the rows."
	case v.Records == 0:
		s += " _aggregate holds the numbers."
	default:
		// No store, or one that could not take them: no handle to point at.
		s += " The rows are not listed: _aggregate holds their numbers (the rows themselves were not kept)."
	}
	if v.AggregateIgnored {
		s += " _aggregate applies to lists of rows, so this response was not aggregated."
	}
	if len(v.UnmatchedFields) > 0 {
		paths := "paths"
		if len(v.UnmatchedFields) == 1 {
			paths = "path"
		}
		s += fmt.Sprintf(" No row has the _fields %s %s, so the rows hold null there (see _unmatchedFields for the fields rows do have).",
			paths, strings.Join(v.UnmatchedFields, ", "))
	}
	if len(v.UnmatchedFilter) > 0 {
		s += fmt.Sprintf(" The filter matched nothing on %s because no row has that field (see _unmatchedFilter for the fields rows do have).", strings.Join(v.UnmatchedFilter, ", "))
	}
	switch {
	case v.Cache != nil && workflow:
		s += fmt.Sprintf(" Served from a complete walk cached at %s (the step's cache TTL): this step sent no request.", v.Cache.CachedAt.UTC().Format(time.RFC3339))
	case v.Cache != nil:
		s += " " + v.Cache.Note()
	}
	return s
}

// unstableNote words an unstable verdict by what made it so: the
// collection seen changing, a walk that could not prove it saw every row,
// or only a reported total that disagrees with the rows.
func unstableNote(v *Verdict) string {
	n := v.Records
	mismatch := v.ReportedTotal != nil && *v.ReportedTotal != v.Records
	present := fmt.Sprintf("Present it as \"at least %d\", never as an exhaustive list (not for a deletion list or a compliance answer)", n)
	switch {
	case v.changed():
		var why []string
		if v.Shifted {
			why = append(why, "rows moved across a page boundary between two reads: a row was added or removed earlier in the collection")
		}
		if v.Duplicates > 0 {
			why = append(why, fmt.Sprintf("%s came back twice", plural(v.Duplicates, "row")))
		}
		if v.TotalMoved {
			why = append(why, "the reported total moved between pages")
		}
		if mismatch {
			why = append(why, fmt.Sprintf("the server reports %d, not %d", *v.ReportedTotal, v.Records))
		}
		return fmt.Sprintf("Unstable: at least %d distinct rows, but the collection changed during the walk (%s), so rows may be missing or the set may have gaps. %s; call again to re-read it.",
			n, strings.Join(why, "; "), present)
	case v.Unproven != "":
		s := fmt.Sprintf("Unstable: %s, but the walk could not prove it saw every row (%s), so rows may be missing. %s.", plural(n, "distinct row"), v.Unproven, present)
		if mismatch {
			s += fmt.Sprintf(" The server reports %d.", *v.ReportedTotal)
		}
		return s
	case mismatch:
		return fmt.Sprintf("Unstable: %s, but the server reports %d. Either the collection changed during the walk, or the total does not count what this call returns (a total that ignores a filter, or an estimate); the walk cannot tell which, so the set may have gaps. %s.",
			plural(n, "distinct row"), *v.ReportedTotal, present)
	}
	return fmt.Sprintf("Unstable: at least %d distinct rows, but the walk saw the collection change, so the set may have gaps or repeats. %s.", n, present)
}

// stopAdvice says which bound or fault ended a partial walk and how to
// get the rest.
func stopAdvice(v *Verdict, b paginate.Budget) string {
	narrow := "Narrow the request with the API's own filters (or fewer _for_each values) to get the rest."
	switch v.StopReason {
	case paginate.StopBudgetPages:
		return fmt.Sprintf("The walk stopped at the limit of %s per collection. %s", plural(b.Pages, "page"), narrow)
	case paginate.StopBudgetRequests:
		return fmt.Sprintf("The walk stopped at the limit of %s per call. %s", plural(b.Requests, "request"), narrow)
	case paginate.StopBudgetItems:
		return fmt.Sprintf("The walk stopped at the limit of %s per call. %s", plural(b.Items, "row"), narrow)
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
		switch st := v.Status; {
		case st == 401 || st == 403:
			return fmt.Sprintf("A later page was refused (status %d); authorization errors are not retried, and calling again will not help until the credential may read it.", st)
		case st >= 400 && st < 500 && st != 429:
			return fmt.Sprintf("A later page failed upstream (status %d), which a retry will not change.", st)
		}
		if v.Retries == 0 {
			return "A later page failed upstream; calling again may succeed."
		}
		return "A later page failed upstream after retries; calling again may succeed."
	case paginate.StopInconsistent:
		return "The server's paging data could not be trusted, so the walk stopped (_boundary.uninspected says what was wrong)."
	case paginate.StopCancelled:
		return "The call was cancelled by its caller before the walk ended; call again (with the same arguments) for the rest, or read these rows with queryToolResult."
	case paginate.StopForeignNextURL:
		return "The server pointed the next page at another origin (a different scheme, host or port than the provider's), which is not followed, so the request and its credentials stay with the provider."
	case paginate.StopPageSizeNotHonoured:
		return "The server served fewer rows per page than asked, so its page numbers count pages of another size, and the budget could not hold the walk again at the size it serves (_boundary.uninspected says by how much). Call again asking for the page size it serves, or narrow the request."
	}
	return narrow
}

// SetVerdict is what an aggregate says about the set of rows it ran
// over: the completion and size of the walk that fetched them. A stored
// result keeps it, so an aggregate over the stored rows later says the
// same as one made with the call.
type SetVerdict struct {
	// Completion is the walk's; "" for the result of a call that did not
	// loop (it claims nothing).
	Completion Completion `json:"completion"`
	// Records counts the rows of the set (the walk's distinct rows).
	Records int `json:"records"`
	// ReportedTotal is the server's total when it gave one.
	ReportedTotal *int `json:"reportedTotal,omitempty"`
	// Resumed: complete from a start the caller gave, not from the first
	// row; FirstPageOnly: a paginated tool called without _all_pages.
	Resumed       bool `json:"resumed,omitempty"`
	FirstPageOnly bool `json:"firstPageOnly,omitempty"`
}

// Set is the verdict's SetVerdict.
func (v *Verdict) Set() SetVerdict {
	s := SetVerdict{Completion: v.Completion, Records: v.Records, FirstPageOnly: v.FirstPageOnly,
		Resumed: v.Completion == Complete && (v.Resumed || v.ReportedTotal != nil && *v.ReportedTotal > v.Records)}
	if v.ReportedTotal != nil && v.Collection {
		s.ReportedTotal = intPtr(*v.ReportedTotal)
	}
	return s
}

// Over is the one sentence an aggregate's numbers carry: over what rows
// they were computed and whether that is all of them — "over all 364
// rows (complete)", "over the 188 rows fetched of at least 2000
// (partial): rows are missing, so these are not totals". rows counts the
// rows aggregated; filtered says a filter chose them among the set's.
// Every surface shows this sentence; none words an aggregate's verdict
// itself.
func (s SetVerdict) Over(rows int, filtered bool) string {
	n := func(k int) string { return plural(k, "row") }
	of := func(set string) string {
		if filtered {
			return fmt.Sprintf("over the %d of %s that match the filter", rows, set)
		}
		return "over " + set
	}
	switch s.Completion {
	case Complete:
		if s.Resumed {
			return of(fmt.Sprintf("the %s from the requested start", n(s.Records))) +
				" (complete from there): the rows before the start were not requested, so these are not totals of the whole collection"
		}
		return of("all "+n(s.Records)) + " (complete)"
	case Unstable:
		return of("at least "+n(s.Records)) + " (unstable): the collection changed during the walk, so rows may be missing or repeated and these are not exact totals"
	case SingleResponse:
		return of(fmt.Sprintf("the %s one call returned", n(s.Records))) + " (single response): the tool does not page, and nothing says these are every row"
	case Partial:
		set := fmt.Sprintf("the %s fetched", n(s.Records))
		if s.FirstPageOnly {
			set = fmt.Sprintf("the %s of the first page", n(s.Records))
		}
		if s.ReportedTotal != nil && *s.ReportedTotal > s.Records {
			set += fmt.Sprintf(" of at least %d", *s.ReportedTotal)
		}
		return of(set) + " (partial): rows are missing, so these are not totals"
	}
	return of(fmt.Sprintf("the %s of one response", n(s.Records))) + " (the call did not loop): nothing says whether more rows exist, so these are not totals"
}
