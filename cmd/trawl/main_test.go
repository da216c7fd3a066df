package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return exitCode(err, &errb), out.String(), errb.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"inspect"}, {"call"}, {"call", "x", "--args", "[1]"}, {"serve", "--nope"}, {"replay"}} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "trawl: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestInspectDemoSpec(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "acme.yaml")
	if err := os.WriteFile(spec, demoSpec(), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "inspect", spec, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var report struct {
		Tools []struct {
			Tool       string `json:"tool"`
			Pagination struct {
				Strategy string  `json:"strategy"`
				Items    *string `json:"items"`
			} `json:"pagination"`
		} `json:"tools"`
		ImportWarnings []any `json:"importWarnings"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || report.ImportWarnings == nil {
		t.Fatalf("not the report: %v\n%s", err, out)
	}
	ins := report.Tools
	got := map[string]string{}
	for _, i := range ins {
		got[i.Tool] = i.Pagination.Strategy
	}
	want := map[string]string{"list_orders": "page", "list_customers": "offset", "list_tickets": "cursor",
		"list_events": "link_header", "get_stats": "none"}
	for tool, s := range want {
		if got[tool] != s {
			t.Errorf("%s: strategy %q; want %q", tool, got[tool], s)
		}
	}
	code, table, _ := runCLI(t, "inspect", spec)
	if code != 0 || !strings.Contains(table, "list_tickets") {
		t.Errorf("table: %d %s", code, table)
	}
	if code, _, errOut := runCLI(t, "inspect", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing spec: %d %s", code, errOut)
	}
}

func TestCallWalksTheDemo(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./trawl.yaml: the demo
	code, out, errOut := runCLI(t, "call", "acme.list_customers", "--args", `{"_all_pages": true, "_fields": ["id"]}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var env struct {
		Items    []any `json:"items"`
		Complete bool  `json:"_pagingComplete"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || !env.Complete || len(env.Items) != 1337 {
		t.Errorf("envelope: complete=%v items=%d err=%v", env.Complete, len(env.Items), err)
	}
	if !strings.Contains(errOut, "progress: ") || !strings.Contains(errOut, "boundary: ") {
		t.Errorf("stderr lacks progress or boundary:\n%s", errOut)
	}
	if code, _, errOut := runCLI(t, "call", "acme.get_order", "--args", `{"order_id": "nope"}`); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("failed call: exit %d, %s", code, errOut)
	}
}
