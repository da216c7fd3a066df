package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// archiveDeployment is a config whose agent "ops" binds a write
// (POST /items/{id}/archive) that needs approval; archives counts the
// writes the upstream received.
func archiveDeployment(t *testing.T) (cfg string, archives *atomic.Int32) {
	archives = &atomic.Int32{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			archives.Add(1)
		}
		fmt.Fprintf(w, `{"id":%q,"archived":true}`, strings.Split(r.URL.Path, "/")[2])
	}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	spec := filepath.Join(dir, "items.json")
	doc := `{"openapi": "3.0.0", "info": {"title": "items", "version": "1"}, "paths": {"/items/{id}/archive": {"post": {
  "operationId": "archive_item", "summary": "Archive an item.",
  "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
  "responses": {"200": {"description": "ok"}}}}}}`
	if err := os.WriteFile(spec, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "trawl.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
providers:
  - {id: up, openapi: %s, base_url: %q}
agents:
  - id: ops
    agentTools: [{tool_id: up.archive_item, provider_id: up, approval: required}]
  - id: free
    agentTools: [{tool_id: up.archive_item, provider_id: up}]
`, filepath.Join(dir, "data"), spec, up.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, archives
}

func runWithInput(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(input), &out, &errb)
	return exitCode(err, &errb), out.String(), errb.String()
}

// trawl call --agent applies the agent's approval policy: the call's
// evidence is shown and the answer read from the terminal; only a yes
// runs it. Without --agent, or for an agent that needs no approval, it
// runs at once.
func TestCallAsAgentAsksForApproval(t *testing.T) {
	cfg, archives := archiveDeployment(t)
	call := []string{"call", "up.archive_item", "--agent", "ops", "--args", `{"id": "7"}`, "--config", cfg}

	code, _, errOut := runWithInput(t, "n\n", call...)
	if code != 1 || !strings.Contains(errOut, "approval_denied") || archives.Load() != 0 {
		t.Errorf("no: exit %d, %d archives, stderr:\n%s", code, archives.Load(), errOut)
	}
	for _, want := range []string{"approval required: agent ops's binding of up.archive_item (write)", "action:    POST /items/{id}/archive",
		`arguments: {"id":"7"}`, "approval:  apr_", "Run it? [y/N]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the question lacks %q:\n%s", want, errOut)
		}
	}
	code, _, errOut = runWithInput(t, "", call...)
	if code != 1 || !strings.Contains(errOut, "no answer on the terminal") || archives.Load() != 0 {
		t.Errorf("end of input: exit %d, %d archives, stderr:\n%s", code, archives.Load(), errOut)
	}
	code, out, errOut := runWithInput(t, "yes\n", call...)
	if code != 0 || !strings.Contains(out, `"archived": true`) || archives.Load() != 1 {
		t.Errorf("yes: exit %d, %d archives, stdout %s stderr:\n%s", code, archives.Load(), out, errOut)
	}

	// No approval needed: nothing is asked.
	code, _, errOut = runWithInput(t, "", "call", "up.archive_item", "--agent", "free", "--args", `{"id": "8"}`, "--config", cfg)
	if code != 0 || strings.Contains(errOut, "Run it?") || archives.Load() != 2 {
		t.Errorf("free agent: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runWithInput(t, "", "call", "up.archive_item", "--args", `{"id": "9"}`, "--config", cfg)
	if code != 0 || strings.Contains(errOut, "Run it?") || archives.Load() != 3 {
		t.Errorf("without --agent: exit %d, stderr:\n%s", code, errOut)
	}
	// A call that can never run is refused before the question.
	code, _, errOut = runWithInput(t, "y\n", "call", "up.archive_item", "--agent", "ops", "--args", `{"idd": "7"}`, "--config", cfg)
	if code != 1 || strings.Contains(errOut, "Run it?") || !strings.Contains(errOut, `invalid_argument: argument "idd" is not a parameter of archive_item (did you mean "id"?)`) {
		t.Errorf("misspelt: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runWithInput(t, "", "call", "up.archive_item", "--agent", "nobody", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, `no agent "nobody"`) {
		t.Errorf("unknown agent: exit %d, stderr:\n%s", code, errOut)
	}
	if archives.Load() != 3 {
		t.Errorf("%d archives, want 3", archives.Load())
	}
}
