package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	junit "github.com/joshdk/go-junit"

	"github.com/trawl-dev/trawl/agent/eval"
	"github.com/trawl-dev/trawl/web"
	"github.com/trawl-dev/trawl/web/deploy"
)

// evalReport reads DIR/report.json.
func evalReport(t *testing.T, dir string) *eval.Report {
	t.Helper()
	r, err := eval.ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checksOf are a case's first sample's checks, name → status.
func checksOf(t *testing.T, r *eval.Report, id string) map[string]string {
	t.Helper()
	for _, c := range r.Cases {
		if c.ID == id {
			out := map[string]string{}
			for _, ch := range c.Samples[0].Checks {
				out[ch.Name] = ch.Status
			}
			return out
		}
	}
	t.Fatalf("no case %s in the report", id)
	return nil
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// junitXSD is the JUnit schema (absolute: the tests change directory).
var junitXSD, _ = filepath.Abs(filepath.Join("testdata", "junit", "junit.xsd"))

// validateJUnit parses junit.xml with a JUnit reader and validates it
// against the JUnit schema with xmllint (skipped, saying so, without it).
func validateJUnit(t *testing.T, path string, cases, failing int) []junit.Suite {
	t.Helper()
	suites, err := junit.IngestFile(path)
	if err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	if len(suites) != 1 || len(suites[0].Tests) != cases || suites[0].Totals.Failed != failing {
		t.Errorf("junit.xml read as %d suites; %+v", len(suites), suites)
	}
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Log("xmllint is not installed (Debian: libxml2-utils): junit.xml is not validated against the schema")
		return suites
	}
	if out, err := exec.Command("xmllint", "--noout", "--schema", junitXSD, path).CombinedOutput(); err != nil {
		t.Errorf("xmllint: %v\n%s", err, out)
	}
	return suites
}

// TestEvalDemoDataset runs the demo's dataset on the replay model: every
// case passes, case by case and check by check; with looping switched
// off for acme.list_orders (demo.loop_off) the list_orders cases fail —
// the total with unsupported_claim (its recorded answer, not given,
// claims what the live call does not support) and verdict_changed — and
// the comparison with the first run names what changed. junit.xml is
// read back and validated; exit 0, then 1.
func TestEvalDemoDataset(t *testing.T) {
	dataset, err := filepath.Abs("../../tools/demo/eval.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errOut := runCLI(t, "eval", dataset, "--out", "on")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	on := evalReport(t, "on")
	want := map[string]map[string]string{
		"orders-by-currency": {"unsupported_claim": "pass", "verdict_changed": "pass", "tools": "pass", "args": "pass", "completion": "pass",
			"no_writes": "pass", "max_tool_calls": "pass", "max_upstream_requests": "pass", "answer_contains": "pass", "answer_number": "pass", "rubric": "skip"},
		"open-orders-total": {"unsupported_claim": "pass", "verdict_changed": "pass", "tools": "pass", "completion": "pass", "answer_number": "pass"},
		"long-bookings":     {"unsupported_claim": "pass", "verdict_changed": "pass", "tools": "pass", "completion": "pass", "no_writes": "pass", "max_upstream_requests": "pass", "answer_number": "pass"},
		"first-page-hedged": {"unsupported_claim": "pass", "verdict_changed": "pass", "tools": "pass", "max_upstream_requests": "pass", "answer_matches": "pass"},
	}
	for id, checks := range want {
		if got := checksOf(t, on, id); fmt.Sprint(got) != fmt.Sprint(checks) {
			t.Errorf("%s: checks %v\nwant %v", id, got, checks)
		}
	}
	for _, c := range on.Cases[0].Samples[0].Checks {
		if c.Name == "rubric" && !strings.Contains(c.Detail, "the replay model cannot judge") {
			t.Errorf("rubric skipped without its note: %+v", c)
		}
	}
	if on.Totals.Cases != 4 || on.Totals.Passed != 4 || on.Totals.UpstreamRequests == 0 || !strings.Contains(out, "4 cases: 4 passed, 0 failed") {
		t.Errorf("totals %+v\n%s", on.Totals, out)
	}
	validateJUnit(t, filepath.Join("on", "junit.xml"), 4, 0)

	writeFile(t, "off.yaml", "demo: {loop_off: [acme.list_orders]}\n")
	code, out, errOut = runCLI(t, "eval", dataset, "--config", "off.yaml", "--out", "off", "--baseline", "on")
	if code != 1 || !strings.Contains(errOut, "trawl: eval: 3 of 4 cases failed") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	off := evalReport(t, "off")
	total := checksOf(t, off, "open-orders-total")
	if total["unsupported_claim"] != "fail" || total["verdict_changed"] != "fail" || total["completion"] != "fail" {
		t.Errorf("open-orders-total with looping off: %v", total)
	}
	// Its recorded answer says "in total" and "every page" beside a filter's
	// "more than 100": the filter is no hedge, so the claim is flagged.
	if c := checksOf(t, off, "orders-by-currency"); c["verdict_changed"] != "fail" || c["unsupported_claim"] != "fail" {
		t.Errorf("orders-by-currency with looping off: %v", c)
	}
	if c := checksOf(t, off, "long-bookings"); slices.Contains(mapValues(c), "fail") {
		t.Errorf("long-bookings does not call list_orders, yet: %v", c)
	}
	for _, c := range off.Cases {
		if c.ID == "open-orders-total" && strings.Contains(c.Samples[0].Answer, "There are 364 open orders") {
			t.Errorf("the recorded answer was given: %q", c.Samples[0].Answer)
		}
	}
	cmp := off.Comparison
	if cmp == nil || !cmp.Regressed || !slices.Equal(cmp.NewlyFailing, []string{"orders-by-currency", "open-orders-total", "first-page-hedged"}) {
		t.Fatalf("comparison %+v", cmp)
	}
	for _, want := range []string{"against on: 3 newly failing (orders-by-currency, open-orders-total, first-page-hedged)",
		"open-orders-total: list_orders (call 1) was complete, now unverified"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	suites := validateJUnit(t, filepath.Join("off", "junit.xml"), 4, 3)
	for _, tc := range suites[0].Tests {
		if tc.Name == "open-orders-total" && tc.Status != junit.StatusFailed {
			t.Errorf("junit testcase %s: %+v", tc.Name, tc)
		}
	}
	b, _ := os.ReadFile(filepath.Join("off", "junit.xml"))
	if n := strings.Count(string(b), "<failure "); n != 5+4+2 || !strings.Contains(string(b), `type="unsupported_claim">turn 1, the recorded answer: &#34;in total&#34; — list_orders`) {
		t.Errorf("%d failures in junit.xml; want one per failed check (11), the total's unsupported_claim among them", n)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestEvalExitCodes: 0 when every check holds; 3 when they all hold but
// the run regressed against its baseline (two runs that differ in one
// binding: looping off for list_orders, so its verdict goes from
// complete to unverified, while a case without expectations or recorded
// verdicts still passes); 2 for bad usage and a bad dataset names its
// line.
func TestEvalExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "ds.jsonl", `{"id":"orders","messages":["How many open orders worth more than 100 do we have, and how do they split by currency?"]}`+"\n")
	writeFile(t, "off.yaml", "demo: {loop_off: [acme.list_orders]}\n")
	if code, out, errOut := runCLI(t, "eval", "ds.jsonl", "--out", "a"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "eval", "ds.jsonl", "--config", "off.yaml", "--out", "b", "--baseline", "a")
	if code != 3 || !strings.Contains(errOut, "every check holds, but the run regressed against the baseline a") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	b := evalReport(t, "b")
	d := b.Comparison.Cases
	if len(d) != 1 || len(d[0].Verdicts) != 1 || d[0].Verdicts[0].Baseline != "complete" || d[0].Verdicts[0].Verdict != "unverified" || d[0].RequestsDelta != -3 {
		t.Errorf("comparison %+v", b.Comparison)
	}
	// And back: the looping run against the other is no regression.
	if code, out, errOut := runCLI(t, "eval", "ds.jsonl", "--out", "c", "--baseline", "b"); code != 0 {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "name the dataset"},
		{[]string{"eval", "ds.jsonl", "--model", "gpt"}, "--model must be replay or live"},
		{[]string{"eval", "ds.jsonl", "--repeat", "0"}, "--repeat must be 1 to 100"},
		{[]string{"eval", "ds.jsonl", "--upstream", "replay", "--out", "none"}, "record one first"},
		{[]string{"eval", "export", "--agent", "demo"}, "--url is required"},
		{[]string{"eval", "export", "--agent", "demo", "--url", "ftp://x", "--since", "1h"}, "--url must be an http(s) URL"},
		{[]string{"eval", "export", "--agent", "demo", "--url", "http://127.0.0.1:1"}, "name the chats"},
	} {
		if code, _, errOut := runCLI(t, tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, errOut)
		}
	}
	writeFile(t, "bad.jsonl", `{"id":"a","messages":["x"]}`+"\n"+`{"id":"b","messages":["x"],"expect":{"max_tokens":"9"}}`+"\n")
	if code, _, errOut := runCLI(t, "eval", "bad.jsonl"); code != 1 || !strings.Contains(errOut, "bad.jsonl:2: expect.max_tokens: want int, not a JSON string") {
		t.Errorf("exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "eval", "ds.jsonl", "--model", "live"); code != 1 || !strings.Contains(errOut, "the configured model is the replay model") {
		t.Errorf("live without a model: exit %d, %s", code, errOut)
	}
}

// TestEvalUpstreamRecordReplay: a recorded run keeps every upstream
// response beside its report; a replay of it gives the same verdicts and
// answers.
func TestEvalUpstreamRecordReplay(t *testing.T) {
	dataset, err := filepath.Abs("../../tools/demo/eval.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if code, out, errOut := runCLI(t, "eval", dataset, "--upstream", "record", "--out", "rec", "--concurrency", "2"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	rec := evalReport(t, "rec")
	b, err := os.ReadFile(filepath.Join("rec", eval.UpstreamFile))
	if err != nil || bytes.Count(b, []byte("\n")) != rec.Totals.UpstreamRequests {
		t.Fatalf("recording: %d lines for %d requests (%v)", bytes.Count(b, []byte("\n")), rec.Totals.UpstreamRequests, err)
	}
	if code, out, errOut := runCLI(t, "eval", dataset, "--upstream", "replay", "--baseline", "rec", "--out", "rep"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	rep := evalReport(t, "rep")
	if len(rep.Comparison.Cases) != 0 || len(rep.Comparison.NewlyFailing) != 0 || rep.Upstream != "replay" {
		t.Errorf("the replayed run differs: %+v", rep.Comparison)
	}
}

// openAIFake is a scripted OpenAI-compatible server: per question, the
// tool call to make and the answer to give once its result is back; a
// judge's request (the rubric prompt) is answered with judge.
type openAIFake struct {
	script   map[string][2]string // question → {tool call arguments, answer}
	judge    string
	requests atomic.Int32
}

func (f *openAIFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = fmt.Sprintf("%q", finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
	}
	text := func(s string) {
		b, _ := json.Marshal(s)
		chunk(`{"role":"assistant","content":`+string(b)+`}`, "")
		chunk(`{}`, "stop")
		fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10,\"total_tokens\":110}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}
	if len(body.Messages) > 0 && strings.HasPrefix(body.Messages[0].Content, "You grade one answer") {
		text(f.judge)
		return
	}
	question, last := "", body.Messages[len(body.Messages)-1]
	for _, m := range body.Messages {
		if m.Role == "user" {
			question = m.Content
		}
	}
	step, ok := f.script[question]
	switch {
	case !ok:
		text("I have no script for that.")
	case last.Role == "tool":
		text(step[1])
	default:
		args, _ := json.Marshal(step[0])
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_orders","arguments":`+string(args)+`}}]}`, "")
		chunk(`{}`, "tool_calls")
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

// TestEvalLiveModel runs cases on a live model (a scripted
// OpenAI-compatible fake): an answer that claims every order over a
// first page fails unsupported_claim, a right one passes; the rubric is
// judged by the model; tokens are the model's.
func TestEvalLiveModel(t *testing.T) {
	fake := &openAIFake{judge: "PASS: it counts every open order", script: map[string][2]string{
		"How many open orders are there?":   {`{"status":"open","_all_pages":true,"_fields":["id"]}`, "There are 364 open orders in total."},
		"List all the open orders, please.": {`{"status":"open","per_page":20}`, "Here are all 20 open orders; that is the complete list."},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Chdir(t.TempDir())
	writeFile(t, "live.yaml", fmt.Sprintf("demo: {}\nmodel: {provider: openai, base_url: %s/v1, api_key: sk-test, name: gpt-test}\n", srv.URL))
	writeFile(t, "ds.jsonl", `{"id":"right","messages":["How many open orders are there?"],"expect":{"completion":true,"answer_number":{"value":364},"max_tokens":500,"rubric":"The answer states how many open orders there are."}}`+"\n"+
		`{"id":"lie","messages":["List all the open orders, please."]}`+"\n")
	code, out, errOut := runCLI(t, "eval", "ds.jsonl", "--config", "live.yaml", "--model", "live", "--out", "r", "--repeat", "2")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	r := evalReport(t, "r")
	right := checksOf(t, r, "right")
	if fmt.Sprint(right) != fmt.Sprint(map[string]string{"unsupported_claim": "pass", "verdict_changed": "skip", "completion": "pass", "answer_number": "pass", "max_tokens": "pass", "rubric": "pass"}) {
		t.Errorf("right: %v", right)
	}
	if lie := checksOf(t, r, "lie"); lie["unsupported_claim"] != "fail" {
		t.Errorf("lie: %v", lie)
	}
	for _, c := range r.Cases {
		if len(c.Samples) != 2 || (c.ID == "right") != (c.PassRate == 1) || c.ID == "lie" && c.PassRate != 0 {
			t.Errorf("%s: %d samples, pass rate %v", c.ID, len(c.Samples), c.PassRate)
		}
		if s := c.Samples[0]; s.Tokens.Total != 110 || s.Tokens.Prompt != 100 {
			t.Errorf("%s: tokens %+v; want the model's 100 + 10 (the answer step reports them)", c.ID, s.Tokens)
		}
		for _, ch := range c.Samples[0].Checks {
			if ch.Name == "unsupported_claim" && c.ID == "lie" && !strings.Contains(ch.Detail, "list_orders (call_a) was first_page_only") {
				t.Errorf("lie: %s", ch.Detail)
			}
			if ch.Name == "rubric" && ch.Detail != "it counts every open order" {
				t.Errorf("rubric: %+v", ch)
			}
		}
	}
	if !strings.Contains(out, "2 runs each, pass rate 50%") {
		t.Errorf("table:\n%s", out)
	}
}

// TestEvalExportRoundTrip: chats held over the chat API become cases
// (trawl eval export, over the API), whose replay passes, with the
// recorded verdicts compared.
func TestEvalExportRoundTrip(t *testing.T) {
	cfg := deploy.DemoConfig()
	cfg.DataDir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := web.New(ctx, cfg, web.Options{Stdout: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	for chat, q := range map[string]string{
		"c-orders":   "How many open orders worth more than 100 do we have, and how do they split by currency?",
		"c-bookings": "Across all our properties, how many confirmed bookings were for a week or longer?",
	} {
		body, _ := json.Marshal(map[string]any{"id": chat, "trigger": "submit-message", "messages": []any{map[string]any{
			"id": "m-" + chat, "role": "user", "parts": []any{map[string]any{"type": "text", "text": q}}}}})
		req, _ := http.NewRequest("POST", base+"/v1/agents/demo/chat", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.AdminKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, done := readChunks(resp.Body, nil); !done || resp.StatusCode != 200 {
			t.Fatalf("chat %s: %d", chat, resp.StatusCode)
		}
		resp.Body.Close()
	}
	t.Chdir(t.TempDir())
	code, _, errOut := runCLI(t, "eval", "export", "--agent", "demo", "--url", base, "--key", srv.AdminKey(), "--since", "1h", "--out", "chats.jsonl")
	if code != 0 {
		t.Fatalf("export: exit %d %s", code, errOut)
	}
	ds, err := eval.LoadDataset("chats.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 2 {
		t.Fatalf("%d cases", len(ds.Cases))
	}
	for _, c := range ds.Cases {
		calls := c.Transcript.Turns[0].Steps[0].ToolCalls
		if c.Agent != "demo" || len(calls) == 0 || calls[0].Verdict == "" {
			t.Errorf("case %s: agent %q, calls %+v", c.ID, c.Agent, calls)
		}
	}
	code, out, errOut := runCLI(t, "eval", "chats.jsonl", "--out", "r")
	if code != 0 {
		t.Fatalf("replay of the export: exit %d\n%s%s", code, out, errOut)
	}
	r := evalReport(t, "r")
	for _, c := range r.Cases {
		if ch := checksOf(t, r, c.ID); ch["verdict_changed"] != "pass" || ch["unsupported_claim"] != "pass" {
			t.Errorf("%s: %v", c.ID, ch)
		}
	}
	code, _, errOut = runCLI(t, "eval", "export", "--agent", "demo", "--url", base, "--key", srv.AdminKey(), "--chat", "c-orders")
	if code != 0 {
		t.Errorf("export --chat: exit %d %s", code, errOut)
	}
}

// TestEvalRefusesWrites: a case's write is refused before it is sent
// (and no_writes names it), unless --allow-writes.
func TestEvalRefusesWrites(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "w.jsonl", `{"id":"write","transcript":{"turns":[{"user":"Tell the team hello.","steps":[{"tool_calls":[{"name":"CHAT_SEND_MESSAGE","arguments":{"conversation_id":"c_general","text":"hello"}}]},{"text":"Sent."}]}]},"expect":{"no_writes":true}}`+"\n")
	errorOf := func(dir string) (string, int) {
		s := evalReport(t, dir).Cases[0].Samples[0]
		if len(s.ToolCalls) != 1 {
			t.Fatalf("calls %+v", s.ToolCalls)
		}
		return s.ToolCalls[0].Error, s.UpstreamRequests
	}
	if code, _, _ := runCLI(t, "eval", "w.jsonl", "--out", "refused"); code != 1 {
		t.Errorf("exit %d", code)
	}
	if e, reqs := errorOf("refused"); !strings.HasPrefix(e, eval.CodeWriteRefused+": CHAT_SEND_MESSAGE: the write was not sent: an evaluation run refuses writes") || reqs != 0 {
		t.Errorf("refused: %q, %d requests", e, reqs)
	}
	runCLI(t, "eval", "w.jsonl", "--out", "allowed", "--allow-writes")
	if e, reqs := errorOf("allowed"); !strings.Contains(e, "upstream answered 404") || reqs != 1 {
		t.Errorf("allowed: the write was not sent: %q, %d requests", e, reqs)
	}
}
