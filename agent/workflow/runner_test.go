package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools/demo"
)

// recorder collects a run's chunks.
type recorder struct {
	mu     sync.Mutex
	chunks []stream.Chunk
}

func (r *recorder) emit(c stream.Chunk) error {
	if _, err := stream.Encode(c); err != nil {
		return fmt.Errorf("chunk %s does not encode: %w", c.Type(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, c)
	return nil
}

// shape lists the chunks as "type" or "type:id".
func (r *recorder) shape() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		s := c.Type()
		switch x := c.(type) {
		case stream.ToolInputAvailable:
			s += ":" + x.ToolCallID + ":" + x.ToolName
		case stream.ToolInputError:
			s += ":" + x.ToolCallID
		case stream.ToolOutputAvailable:
			s += ":" + x.ToolCallID
		case stream.ToolOutputError:
			s += ":" + x.ToolCallID
		case stream.Data:
			if x.ID != "" {
				s += ":" + x.ID
			}
		}
		out = append(out, s)
	}
	return out
}

// wire is every chunk as it goes on the wire.
func (r *recorder) wire(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, c := range r.chunks {
		data, err := stream.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

func (r *recorder) find(typ, id string) stream.Chunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.chunks {
		if c.Type() != typ {
			continue
		}
		switch x := c.(type) {
		case stream.ToolInputAvailable:
			if x.ToolCallID == id {
				return c
			}
		case stream.Data:
			if x.ID == id {
				return c
			}
		default:
			return c
		}
	}
	return nil
}

// fixedClock never moves, so the throttle lets exactly the first progress
// chunk of each call through.
func fixedClock() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }

// loopVerdict is a step output's _loop.
type loopVerdict struct {
	Complete   bool   `json:"complete"`
	Completion string `json:"completion"`
	Requests   int    `json:"requests"`
	ItemCount  int    `json:"itemCount"`
	StoppedBy  string `json:"stoppedBy"`
	Note       string `json:"note"`
}

type bookingRow struct {
	ID         string `json:"id"`
	PropertyID string `json:"property_id"`
	Nights     int    `json:"nights"`
}

// getJSON fetches a demo URL directly, outside the engine.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}

// expected computes what the hotelBookings workflow must return by
// reading the demo API directly: the hotels' ids, and their cancelled
// bookings of five nights or more, with the pages each property takes at
// 100 per page.
func (f *fixture) expected(t *testing.T) (ids []string, rows []bookingRow, pages, fetched int) {
	t.Helper()
	var props struct {
		Properties []struct{ ID string } `json:"properties"`
	}
	getJSON(t, f.base+"/properties?type=hotel", &props)
	for _, p := range props.Properties {
		ids = append(ids, p.ID)
		for page := 1; ; page++ {
			var bp struct {
				Data []struct {
					bookingRow
					Status string `json:"status"`
				} `json:"data"`
				Total int `json:"total"`
			}
			getJSON(t, fmt.Sprintf("%s/properties/%s/bookings?page=%d&per_page=100", f.base, p.ID, page), &bp)
			pages++
			fetched += len(bp.Data)
			for _, b := range bp.Data {
				if b.Status == "cancelled" && b.Nights >= 5 {
					rows = append(rows, b.bookingRow)
				}
			}
			if page*100 >= bp.Total {
				break
			}
		}
	}
	f.srv.Reset()
	return ids, rows, pages, fetched
}

func mustParse(t testing.TB, s string) *Definition {
	t.Helper()
	def, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return def
}

func TestRunAgainstDemo(t *testing.T) {
	f := newFixture(t)
	ids, rows, pages, fetched := f.expected(t)
	if len(ids) < 5 || len(rows) == 0 || pages <= len(ids) {
		t.Fatalf("the demo data changed: %d hotels, %d rows, %d pages", len(ids), len(rows), pages)
	}
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	rec := &recorder{}
	res, err := r.Run(context.Background(), mustParse(t, hotelBookings), RunInput{Org: "acme-corp", RunID: "run_1", Emit: rec.emit})
	if err != nil {
		t.Fatal(err)
	}

	if diff := cmp.Diff([]string{"properties", "bookings", "gate"}, res.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if res.Failed != "" || res.Error != "" {
		t.Errorf("failed = %q (%s)", res.Failed, res.Error)
	}

	// Step 1: the hotels, projected to their ids, with a verdict.
	var props struct {
		Properties []map[string]any `json:"properties"`
		Loop       loopVerdict      `json:"_loop"`
	}
	if err := json.Unmarshal(res.Steps["properties"], &props); err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, p := range props.Properties {
		if len(p) != 1 {
			t.Errorf("property %v: want only its id", p)
		}
		gotIDs = append(gotIDs, p["id"].(string))
	}
	if diff := cmp.Diff(ids, gotIDs); diff != "" {
		t.Errorf("property ids (-want +got):\n%s", diff)
	}
	// list_properties does not paginate: one response, no paging claim.
	wantVerdict := loopVerdict{Completion: "single_response", Requests: 1, ItemCount: len(ids), StoppedBy: "single_response",
		Note: "Single response: this tool does not paginate, so this is what one call returns; it makes no claim about pages."}
	if diff := cmp.Diff(wantVerdict, props.Loop); diff != "" {
		t.Errorf("properties _loop (-want +got):\n%s", diff)
	}

	// Step 2: every page of every hotel, filtered and projected.
	var bookings struct {
		Data []bookingRow `json:"data"`
		Loop loopVerdict  `json:"_loop"`
	}
	if err := json.Unmarshal(res.Steps["bookings"], &bookings); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rows, bookings.Data); diff != "" {
		t.Errorf("bookings (-want +got):\n%s", diff)
	}
	wantVerdict = loopVerdict{Complete: true, Completion: "complete", Requests: pages, ItemCount: len(rows), StoppedBy: bookings.Loop.StoppedBy,
		// The note counts the rows fetched and those the filter kept.
		Note: fmt.Sprintf("Complete: all %d rows of %d _for_each values, fetched in %d pages. %d of them match the filter.", fetched, len(ids), pages, len(rows))}
	if diff := cmp.Diff(wantVerdict, bookings.Loop); diff != "" {
		t.Errorf("bookings _loop (-want +got):\n%s", diff)
	}
	if !paginate.IsComplete(bookings.Loop.StoppedBy) {
		t.Errorf("stoppedBy %q is not a complete stop", bookings.Loop.StoppedBy)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(res.Steps["bookings"], &keys); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"_loop", "data"}, sortedKeys(keys)); diff != "" {
		t.Errorf("bookings keys (-want +got):\n%s (the first page's total describes one property, not the merged set)", diff)
	}
	if got := f.srv.Count("/properties/{property_id}/bookings"); got != pages {
		t.Errorf("upstream bookings requests = %d, want %d", got, pages)
	}

	// Step 3: the walk was complete, so the branch ends the run.
	if diff := cmp.Diff(`{"taken":"then","next":"end"}`, string(res.Steps["gate"])); diff != "" {
		t.Errorf("gate (-want +got):\n%s", diff)
	}

	// The stream: a chat turn's chunks, one step per tool step.
	want := []string{
		"start",
		"start-step", "tool-input-available:step_properties:acme.list_properties",
		"data-tool-loop-progress:step_properties",
		"tool-output-available:step_properties", "finish-step",
		"start-step", "tool-input-available:step_bookings:acme.list_property_bookings",
		"data-tool-loop-progress:step_bookings",
		"tool-output-available:step_bookings", "finish-step",
		"data-workflow-branch:gate",
		"data-workflow-result",
		"finish",
	}
	if diff := cmp.Diff(want, rec.shape()); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(stream.Start{MessageID: "run_1"}, rec.chunks[0]); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	in := rec.find("tool-input-available", "step_bookings").(stream.ToolInputAvailable)
	gotInput, _ := json.Marshal(in.Input)
	idsJSON, _ := json.Marshal(ids)
	wantInput := `{"_all_pages":true,"_fields":["id","property_id","nights"],` +
		`"_filter":[{"field":"status","op":"eq","value":"cancelled"},{"field":"nights","op":"gte","value":5}],` +
		`"_for_each":{"key":"property_id","values":` + string(idsJSON) + `}}`
	if diff := cmp.Diff(wantInput, string(gotInput)); diff != "" {
		t.Errorf("bookings input (-want +got):\n%s", diff)
	}
	if !in.Dynamic {
		t.Error("tool chunks must be dynamic: the client knows no workflow tool statically")
	}
	prog := rec.find("data-tool-loop-progress", "step_bookings").(stream.Data).Data.(stream.Progress)
	if prog.ToolCallID != "step_bookings" || prog.ToolName != "acme.list_property_bookings" || prog.ForEach == nil ||
		prog.ForEach.Key != "property_id" || prog.ForEach.Total != len(ids) || prog.PagesMax != paginate.DefaultPages {
		t.Errorf("progress = %+v (forEach %+v)", prog, prog.ForEach)
	}
	branch := rec.find("data-workflow-branch", "gate").(stream.Data)
	if diff := cmp.Diff(BranchData{Step: "gate", Taken: "then", Next: "end"}, branch.Data); diff != "" {
		t.Errorf("branch chunk (-want +got):\n%s", diff)
	}
	done := rec.find("data-workflow-result", "").(stream.Data)
	if diff := cmp.Diff(ResultData{Order: []string{"properties", "bookings", "gate"}}, done.Data); diff != "" {
		t.Errorf("result chunk (-want +got):\n%s", diff)
	}

	// Workflows keep nothing aside: no handle anywhere.
	for id, out := range res.Steps {
		if strings.Contains(string(out), "_resultId") {
			t.Errorf("step %s output holds a _resultId", id)
		}
	}
	if w := rec.wire(t); strings.Contains(w, "_resultId") {
		t.Error("the stream holds a _resultId")
	}
}

func TestRunBudgetCappedTakesTheOtherBranch(t *testing.T) {
	f := newFixture(t)
	ids, _, _, _ := f.expected(t)
	// One page per collection: the hotels with more than 100 bookings
	// cannot be walked to the end.
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{Budget: paginate.Budget{Pages: 1}}), Catalog: f.cat, Now: fixedClock})
	rec := &recorder{}
	res, err := r.Run(context.Background(), mustParse(t, hotelBookings), RunInput{Org: "acme-corp", RunID: "run_2", Emit: rec.emit})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"properties", "bookings", "gate", "stats"}, res.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	var bookings struct {
		Loop loopVerdict `json:"_loop"`
	}
	if err := json.Unmarshal(res.Steps["bookings"], &bookings); err != nil {
		t.Fatal(err)
	}
	if bookings.Loop.Complete || bookings.Loop.StoppedBy != paginate.StopBudgetPages || bookings.Loop.Requests != len(ids) ||
		!strings.HasPrefix(bookings.Loop.Note, "Partial: ") {
		t.Errorf("bookings _loop = %+v; want a partial walk stopped by the page budget after one page per hotel", bookings.Loop)
	}
	if diff := cmp.Diff(`{"taken":"else","next":"stats"}`, string(res.Steps["gate"])); diff != "" {
		t.Errorf("gate (-want +got):\n%s", diff)
	}
	var stats struct {
		Loop loopVerdict `json:"_loop"`
	}
	if err := json.Unmarshal(res.Steps["stats"], &stats); err != nil || stats.Loop.Complete || stats.Loop.Completion != "single_response" || stats.Loop.Requests != 1 {
		t.Errorf("stats = %s (%v)", res.Steps["stats"], err)
	}
	want := []string{
		"start",
		"start-step", "tool-input-available:step_properties:acme.list_properties", "data-tool-loop-progress:step_properties",
		"tool-output-available:step_properties", "finish-step",
		"start-step", "tool-input-available:step_bookings:acme.list_property_bookings", "data-tool-loop-progress:step_bookings",
		"tool-output-available:step_bookings", "finish-step",
		"data-workflow-branch:gate",
		"start-step", "tool-input-available:step_stats:acme.get_stats", "data-tool-loop-progress:step_stats",
		"tool-output-available:step_stats", "finish-step",
		"data-workflow-result",
		"finish",
	}
	if diff := cmp.Diff(want, rec.shape()); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

func TestRunUsesTheCacheOnlyWithATTL(t *testing.T) {
	f := newFixture(t)
	_, rows, pages, _ := f.expected(t)
	now := fixedClock()
	clock := func() time.Time { return now }
	cache, err := loop.NewDatasetCache(loop.CacheOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{Cache: cache}), Catalog: f.cat, Now: clock})
	const bookingsPath = "/properties/{property_id}/bookings"
	run := func(def *Definition) json.RawMessage {
		t.Helper()
		res, err := r.Run(context.Background(), def, RunInput{Org: "acme-corp", RunID: "run"})
		if err != nil || res.Failed != "" {
			t.Fatalf("run: %v %s %s", err, res.Failed, res.Error)
		}
		return res.Steps["bookings"]
	}

	// Without ttl_minutes, every run walks upstream again.
	def := mustParse(t, hotelBookings)
	run(def)
	run(def)
	if got := f.srv.Count(bookingsPath); got != 2*pages {
		t.Errorf("without a TTL: %d bookings requests over two runs, want %d", got, 2*pages)
	}
	if got := cache.Stats().Hits; got != 0 {
		t.Errorf("without a TTL: %d cache hits", got)
	}

	// With one, the second run is served from the cache.
	f.srv.Reset()
	def.Steps[1].Loop.Cache = &Cache{TTLMinutes: 30}
	first := run(def)
	second := run(def)
	if got := f.srv.Count(bookingsPath); got != pages {
		t.Errorf("with a TTL: %d bookings requests over two runs, want %d (the first run's only)", got, pages)
	}
	if got := f.srv.Count("/properties"); got != 2 {
		t.Errorf("the unpaginated step ran %d times upstream, want 2: only walks are cached", got)
	}
	var a, b struct {
		Data []bookingRow `json:"data"`
		Loop loopVerdict  `json:"_loop"`
	}
	if err := json.Unmarshal(first, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(second, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rows, b.Data); diff != "" {
		t.Errorf("cached rows (-want +got):\n%s", diff)
	}
	if !b.Loop.Complete || !strings.Contains(b.Loop.Note, "cached at 2025-03-01T12:00:00Z") || strings.Contains(a.Loop.Note, "cached") {
		t.Errorf("first note %q, second note %q: only the second says it came from the cache", a.Loop.Note, b.Loop.Note)
	}

	// Past the TTL it walks again.
	now = now.Add(31 * time.Minute)
	run(def)
	if got := f.srv.Count(bookingsPath); got != 2*pages {
		t.Errorf("after the TTL: %d bookings requests in all, want %d", got, 2*pages)
	}
}

func TestRunStepFailures(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	tests := []struct {
		name       string
		def        string
		wantOrder  []string
		wantFailed string
		wantError  string
		wantShape  []string
	}{
		{
			name: "upstream error",
			def: `{"id": "w", "steps": [
				{"id": "one", "type": "tool", "tool": "acme.list_property_bookings", "input": {"property_id": "p_999"}},
				{"id": "two", "type": "tool", "tool": "acme.get_stats"}]}`,
			wantOrder:  []string{"one"},
			wantFailed: "one",
			wantError:  `upstream_error: list_property_bookings: upstream answered 404 Not Found: No property with id "p_999".`,
			wantShape: []string{"start", "start-step", "tool-input-available:step_one:acme.list_property_bookings",
				"tool-output-error:step_one", "finish-step", "data-workflow-result", "finish"},
		},
		{
			name: "for_each ref to no list",
			def: `{"id": "w", "steps": [
				{"id": "props", "type": "tool", "tool": "acme.list_properties"},
				{"id": "fetch", "type": "tool", "tool": "acme.list_property_bookings",
				 "loop": {"for_each": {"key": "property_id", "values": {"ref": "$.steps.props._loop.complete"}}}},
				{"id": "two", "type": "tool", "tool": "acme.get_stats"}]}`,
			wantOrder:  []string{"props", "fetch"},
			wantFailed: "fetch",
			wantError:  `loop.for_each.values: "$.steps.props._loop.complete" resolved to a boolean, not a list`,
			wantShape: []string{"start", "start-step", "tool-input-available:step_props:acme.list_properties",
				"data-tool-loop-progress:step_props", "tool-output-available:step_props", "finish-step",
				"start-step", "tool-input-error:step_fetch", "finish-step", "data-workflow-result", "finish"},
		},
		{
			name: "for_each ref to an empty list",
			def: `{"id": "w", "steps": [
				{"id": "props", "type": "tool", "tool": "acme.list_properties", "input": {"country": "XX"}},
				{"id": "fetch", "type": "tool", "tool": "acme.list_property_bookings",
				 "loop": {"for_each": {"key": "property_id", "values": {"ref": "$.steps.props.properties.id"}}}}]}`,
			wantOrder:  []string{"props", "fetch"},
			wantFailed: "fetch",
			wantError:  `loop.for_each.values: "$.steps.props.properties.id" resolved to an empty list; there is nothing to fan out over (a branch with op "truthy" on it can skip this step)`,
			wantShape: []string{"start", "start-step", "tool-input-available:step_props:acme.list_properties",
				"data-tool-loop-progress:step_props", "tool-output-available:step_props", "finish-step",
				"start-step", "tool-input-error:step_fetch", "finish-step", "data-workflow-result", "finish"},
		},
		{
			name: "for_each ref to a skipped step",
			def: `{"id": "w", "steps": [
				{"id": "stats", "type": "tool", "tool": "acme.get_stats"},
				{"id": "skip", "type": "branch", "if": {"ref": "$.steps.stats._loop.completion", "op": "eq", "value": "single_response"}, "then": "fetch", "else": "end"},
				{"id": "props", "type": "tool", "tool": "acme.list_properties"},
				{"id": "fetch", "type": "tool", "tool": "acme.list_property_bookings",
				 "loop": {"for_each": {"key": "property_id", "values": {"ref": "$.steps.props.properties.id"}}}}]}`,
			wantOrder:  []string{"stats", "skip", "fetch"},
			wantFailed: "fetch",
			wantError:  `loop.for_each.values: "$.steps.props.properties.id" resolved to null (step props did not run), not a list`,
			wantShape: []string{"start", "start-step", "tool-input-available:step_stats:acme.get_stats",
				"data-tool-loop-progress:step_stats", "tool-output-available:step_stats", "finish-step", "data-workflow-branch:skip",
				"start-step", "tool-input-error:step_fetch", "finish-step", "data-workflow-result", "finish"},
		},
		{
			name: "bad argument",
			def: `{"id": "w", "steps": [
				{"id": "one", "type": "tool", "tool": "acme.list_property_bookings",
				 "loop": {"for_each": {"key": "property_id", "values": ["p_1", "p_2", "p_3", "p_4", "p_5", "p_6", "p_7", "p_8", "p_9", "p_10",
				   "p_11", "p_12", "p_13", "p_14", "p_15", "p_16", "p_17", "p_18", "p_19", "p_20", "p_21", "p_22", "p_23", "p_24", "p_25",
				   "p_26", "p_27", "p_28", "p_29", "p_30", "p_31", "p_32", "p_33", "p_34", "p_35", "p_36", "p_37", "p_38", "p_39", "p_40",
				   "p_41", "p_42", "p_43", "p_44", "p_45", "p_46", "p_47", "p_48", "p_49", "p_50", "p_51"]}}}]}`,
			wantOrder:  []string{"one"},
			wantFailed: "one",
			wantError:  "invalid_for_each: _for_each has 51 distinct values; at most 50 are fetched in one call — split them over several calls",
			wantShape: []string{"start", "start-step", "tool-input-available:step_one:acme.list_property_bookings",
				"tool-output-error:step_one", "finish-step", "data-workflow-result", "finish"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			res, err := r.Run(context.Background(), mustParse(t, tt.def), RunInput{Org: "o", RunID: "r", Emit: rec.emit})
			if err != nil {
				t.Fatalf("Run = %v; a failed step is not a run error", err)
			}
			if diff := cmp.Diff(tt.wantOrder, res.Order); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if res.Failed != tt.wantFailed {
				t.Errorf("failed = %q, want %q", res.Failed, tt.wantFailed)
			}
			if diff := cmp.Diff(tt.wantError, res.Error); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if _, ok := res.Steps[tt.wantFailed]; ok {
				t.Errorf("the failed step has an output")
			}
			if diff := cmp.Diff(tt.wantShape, rec.shape()); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			done := rec.find("data-workflow-result", "").(stream.Data)
			if diff := cmp.Diff(ResultData{Order: tt.wantOrder, Failed: tt.wantFailed, Error: tt.wantError}, done.Data); diff != "" {
				t.Errorf("result chunk (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunInputRefsAndCredentials(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	def := mustParse(t, `{"id": "w", "steps": [
		{"id": "props", "type": "tool", "tool": "acme.list_properties", "input": {"type": "villa"}},
		{"id": "first", "type": "tool", "tool": "acme.list_property_bookings",
		 "input": {"property_id": "$.steps.props.properties.0.id", "status": {"ref": "$.steps.props.no_such_field"}, "per_page": 5}}]}`)
	res, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "refs"})
	if err != nil || res.Failed != "" {
		t.Fatalf("Run: %v %s", err, res.Error)
	}
	var props struct {
		Properties []struct{ ID string } `json:"properties"`
	}
	if err := json.Unmarshal(res.Steps["props"], &props); err != nil || len(props.Properties) == 0 {
		t.Fatalf("props = %s", res.Steps["props"])
	}
	reqs := f.srv.Requests()
	last := reqs[len(reqs)-1]
	// The ref that resolved to null is left out of the call.
	if want := "/properties/" + props.Properties[0].ID + "/bookings"; last.Path != want || last.RawQuery != "per_page=5" {
		t.Errorf("request = %s?%s, want %s?per_page=5", last.Path, last.RawQuery, want)
	}
}

func TestRunRuntimeCredential(t *testing.T) {
	// A demo server that requires a token the organization does not hold.
	locked := newFixtureWith(t, demo.Options{Token: "user-token"})
	r := NewRunner(RunnerOptions{Engine: locked.engine(loop.Options{}), Catalog: locked.cat, Now: fixedClock})
	def := mustParse(t, `{"id": "w", "steps": [{"id": "s", "type": "tool", "tool": "acme.get_stats"}]}`)
	res, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "x"})
	if err != nil || res.Failed != "s" || !strings.Contains(res.Error, "401") {
		t.Errorf("without the credential: %v failed=%q %q", err, res.Failed, res.Error)
	}
	res, err = r.Run(context.Background(), def, RunInput{Org: "o", RunID: "y", Credentials: map[string]string{"acme": "user-token"}})
	if err != nil || res.Failed != "" {
		t.Errorf("with the credential: %v failed=%q %q", err, res.Failed, res.Error)
	}
}

func TestRunCancelled(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	emit := func(c stream.Chunk) error {
		if in, ok := c.(stream.ToolInputAvailable); ok && in.ToolCallID == "step_bookings" {
			cancel()
		}
		return rec.emit(c)
	}
	res, err := r.Run(ctx, mustParse(t, hotelBookings), RunInput{Org: "o", RunID: "c", Emit: emit})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	want := []string{"start",
		"start-step", "tool-input-available:step_properties:acme.list_properties", "data-tool-loop-progress:step_properties",
		"tool-output-available:step_properties", "finish-step",
		"start-step", "tool-input-available:step_bookings:acme.list_property_bookings",
		"abort"}
	got := rec.shape()
	// The walk may have reported progress before it saw the cancellation.
	if len(got) == len(want)+1 && got[len(got)-2] == "data-tool-loop-progress:step_bookings" {
		got = append(got[:len(got)-2], got[len(got)-1])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"properties", "bookings"}, res.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if _, ok := res.Steps["properties"]; !ok {
		t.Error("the result lost the step that ran")
	}
}

func TestRunEmitError(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	gone := errors.New("client gone")
	n := 0
	emit := func(c stream.Chunk) error {
		n++
		if c.Type() == "tool-output-available" {
			return gone
		}
		return nil
	}
	res, err := r.Run(context.Background(), mustParse(t, hotelBookings), RunInput{Org: "o", RunID: "e", Emit: emit})
	if !errors.Is(err, gone) {
		t.Fatalf("Run = %v, want the emit error", err)
	}
	if diff := cmp.Diff([]string{"properties"}, res.Order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if f.srv.Count("/properties/{property_id}/bookings") != 0 {
		t.Error("the run went on after Emit failed")
	}
}

func TestRunInvalid(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat})
	rec := &recorder{}
	def := mustParse(t, `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.gone"}]}`)
	_, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "i", Emit: rec.emit})
	if !errors.Is(err, ErrInvalid) || err.Error() != `steps[0] (a): tool "acme.gone" is not a known tool` {
		t.Errorf("Run = %v", err)
	}
	if len(rec.chunks) != 0 {
		t.Errorf("an invalid workflow emitted %v", rec.shape())
	}
	if _, err := r.Run(context.Background(), nil, RunInput{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Run(nil) = %v", err)
	}
	if _, err := NewRunner(RunnerOptions{}).Run(context.Background(), def, RunInput{}); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("a runner without engine: %v", err)
	}
}

func TestRunConcurrent(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat})
	def := mustParse(t, hotelBookings)
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		wg.Go(func() {
			res, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: fmt.Sprint(i), Emit: (&recorder{}).emit})
			if err != nil || res.Failed != "" {
				t.Errorf("run %d: %v %s", i, err, res.Error)
				return
			}
			outs[i] = string(res.Steps["bookings"])
		})
	}
	wg.Wait()
	for i := 1; i < len(outs); i++ {
		if outs[i] != outs[0] {
			t.Errorf("run %d's bookings differ from run 0's", i)
		}
	}
}

const openOrders = `{"id": "open-orders", "steps": [
	{"id": "orders", "type": "tool", "tool": "acme.list_orders", "input": {"status": "open"},
	 "loop": {"all_pages": true, "filter": [{"field": "total", "op": "gt", "value": 100}],
	          "aggregate": {"group_by": ["currency"], "metrics": [{"op": "count"}, {"op": "sum", "field": "total"}],
	                        "order_by": [{"field": "count", "dir": "desc"}]}}},
	{"id": "gate", "type": "branch", "if": {"ref": "$.steps.orders._loop.complete"}, "then": "end", "else": "end"}]}`

// TestRunAggregate: a loop block's aggregate puts the numbers under the
// step and their verdict in _loop; a walk the budget cuts says partial
// there too.
func TestRunAggregate(t *testing.T) {
	f := newFixture(t)
	type step struct {
		Loop struct {
			Complete  bool   `json:"complete"`
			Aggregate string `json:"aggregate"`
		} `json:"_loop"`
		Aggregate struct {
			Completion string `json:"completion"`
			Verdict    string `json:"verdict"`
			Groups     []struct {
				Currency string `json:"currency"`
				Count    int    `json:"count"`
				Sum      string `json:"sum(total)"`
			} `json:"groups"`
		} `json:"_aggregate"`
		Data json.RawMessage `json:"data"`
	}
	run := func(budget paginate.Budget) step {
		t.Helper()
		r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{Budget: budget}), Catalog: f.cat, Now: fixedClock})
		res, err := r.Run(context.Background(), mustParse(t, openOrders), RunInput{Org: "acme-corp", RunID: "run_agg", Emit: (&recorder{}).emit})
		if err != nil || res.Failed != "" {
			t.Fatalf("run: %v %s", err, res.Error)
		}
		var s step
		if err := json.Unmarshal(res.Steps["orders"], &s); err != nil {
			t.Fatal(err)
		}
		if s.Data != nil {
			t.Errorf("the step lists its rows: %.200s", s.Data)
		}
		return s
	}
	s := run(paginate.Budget{})
	const verdict = "over the 278 of all 364 rows that match the filter (complete)"
	if !s.Loop.Complete || s.Loop.Aggregate != verdict || s.Aggregate.Verdict != verdict || s.Aggregate.Completion != "complete" {
		t.Errorf("complete walk: _loop %+v, aggregate %q %q", s.Loop, s.Aggregate.Completion, s.Aggregate.Verdict)
	}
	var got []demo.OrderTally
	for _, g := range s.Aggregate.Groups {
		got = append(got, demo.OrderTally{Currency: g.Currency, Count: g.Count, Sum: g.Sum})
	}
	if diff := cmp.Diff(demo.TallyOrders("open", 100), got); diff != "" {
		t.Errorf("groups (-want: the test's own count over the demo data, +got):\n%s", diff)
	}

	s = run(paginate.Budget{Pages: 2})
	if s.Loop.Complete || s.Aggregate.Completion != "partial" || !strings.HasSuffix(s.Loop.Aggregate, "(partial): rows are missing, so these are not totals") ||
		s.Aggregate.Verdict != s.Loop.Aggregate {
		t.Errorf("cut walk: _loop %+v, aggregate %q %q", s.Loop, s.Aggregate.Completion, s.Aggregate.Verdict)
	}
}
