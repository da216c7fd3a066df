package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const villaWorkflow = `{
  "steps": [
    {"id": "properties", "type": "tool", "tool": "acme.list_properties", "loop": {"fields": ["id"]}},
    {"id": "bookings", "type": "tool", "tool": "acme.list_property_bookings",
     "loop": {"all_pages": true, "fields": ["id", "nights"],
              "for_each": {"key": "property_id", "values": {"ref": "$.steps.properties.properties.id"}},
              "filter": [{"field": "status", "op": "eq", "value": "confirmed"}, {"field": "nights", "op": "gte", "value": 7}]}},
    {"id": "gate", "type": "branch", "if": {"ref": "$.steps.bookings._loop.complete", "op": "eq", "value": true},
     "then": "end", "else": "stats"},
    {"id": "stats", "type": "tool", "tool": "acme.get_stats"}
  ]
}`

func TestWorkflowsAPI(t *testing.T) {
	ts := startDemo(t, nil)
	put := func(id, body string) (int, []byte) {
		req, _ := http.NewRequest("PUT", ts.URL+"/v1/workflows/"+id, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b json.RawMessage
		json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode, b
	}
	bad := strings.Replace(villaWorkflow, `"key": "property_id"`, `"key": "property"`, 1)
	if st, b := put("villas", bad); st != 400 || !strings.Contains(string(b), `not a parameter of acme.list_property_bookings`) {
		t.Errorf("invalid workflow: %d %s", st, b)
	}
	if st, b := put("villas", `{"steps": [], "extra": 1}`); st != 400 || !strings.Contains(string(b), "extra") {
		t.Errorf("unknown member: %d %s", st, b)
	}
	if st, b := put("villas", villaWorkflow); st != 200 {
		t.Fatalf("put: %d %s", st, b)
	}
	resp := ts.post(t, "/v1/workflows/villas/runs", "", nil)
	runID := resp.Header.Get("X-Trawl-Run-Id")
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	all := strings.Join(chunkTypes(events), " ")
	for _, want := range []string{"start", "tool-input-available", "tool-output-available", "data-workflow-branch", "data-workflow-result", "finish"} {
		if !strings.Contains(all, want) {
			t.Errorf("run stream lacks %s: %s", want, all)
		}
	}
	for _, e := range events {
		if strings.Contains(e.Data, "_resultId") {
			t.Errorf("a workflow output carries a _resultId: %.200s", e.Data)
		}
	}
	st, b := ts.do(t, "GET", "/v1/workflows/villas/runs/"+runID, "", nil)
	var run struct {
		Status string
		Result struct {
			Order []string
			Steps map[string]json.RawMessage
		}
	}
	json.Unmarshal(b, &run)
	if st != 200 || run.Status != "done" || strings.Join(run.Result.Order, ",") != "properties,bookings,gate" {
		t.Fatalf("run: %d %.400s", st, b)
	}
	var bookings struct {
		Data []any
		Loop struct {
			Complete  bool
			ItemCount int
		} `json:"_loop"`
	}
	json.Unmarshal(run.Result.Steps["bookings"], &bookings)
	if !bookings.Loop.Complete || bookings.Loop.ItemCount != 157 || len(bookings.Data) != 157 {
		t.Errorf("bookings step: complete=%v items=%d rows=%d", bookings.Loop.Complete, bookings.Loop.ItemCount, len(bookings.Data))
	}
	if st, b := ts.do(t, "GET", "/v1/workflows/villas/runs", "", nil); st != 200 || !strings.Contains(string(b), runID) {
		t.Errorf("runs: %d %s", st, b)
	}
	if st, _ := ts.do(t, "GET", "/v1/workflows/villas/runs/"+runID+"/stream", "", nil); st != 204 {
		t.Errorf("resume of an ended run: %d", st)
	}
	if st, _ := ts.do(t, "GET", "/v1/workflows/other/runs/"+runID, "", nil); st != 404 {
		t.Errorf("a run read through another workflow: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/v1/workflows/villas", "", nil); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _ := ts.do(t, "POST", "/v1/workflows/villas/runs", "", nil); st != 404 {
		t.Errorf("run of a deleted workflow: %d", st)
	}
}

// A workflow keeps workflow_runs.max_per_workflow runs: a new one beyond
// it deletes the oldest, which then answers 404.
func TestWorkflowRunsRetention(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.WorkflowRuns.MaxPerWorkflow = 2 })
	def := json.RawMessage(`{"steps": [{"id": "stats", "type": "tool", "tool": "acme.get_stats"}]}`)
	if st, b := ts.do(t, "PUT", "/v1/workflows/stats", "", def); st != 200 {
		t.Fatalf("put: %d %s", st, b)
	}
	var ids []string
	for range 3 {
		resp := ts.post(t, "/v1/workflows/stats/runs", "", nil)
		ids = append(ids, resp.Header.Get("X-Trawl-Run-Id"))
		readSSE(t, resp.Body)
		resp.Body.Close()
	}
	st, b := ts.do(t, "GET", "/v1/workflows/stats/runs", "", nil)
	var list struct {
		Runs []struct{ ID, Status string }
	}
	if err := json.Unmarshal(b, &list); err != nil || st != 200 {
		t.Fatalf("runs: %d %s", st, b)
	}
	var got []string
	for _, r := range list.Runs {
		got = append(got, r.ID+":"+r.Status)
	}
	if want := []string{ids[2] + ":done", ids[1] + ":done"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("runs kept %v, want %v", got, want)
	}
	if st, _ := ts.do(t, "GET", "/v1/workflows/stats/runs/"+ids[0], "", nil); st != 404 {
		t.Errorf("the run past the bound: %d, want 404", st)
	}
}
