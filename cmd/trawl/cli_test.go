package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/help")

// TestHelpGolden checks every command's --help (and -h) against its
// golden file: usage on stdout, every flag described, exit 0.
func TestHelpGolden(t *testing.T) {
	cases := map[string][][]string{"trawl": {{"--help"}, {"-h"}, {"help"}}}
	for _, c := range commands {
		cases[c.name] = [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}}
	}
	for name, argvs := range cases {
		t.Run(name, func(t *testing.T) {
			golden := filepath.Join("testdata", "help", name+".golden")
			var first string
			for i, args := range argvs {
				code, out, errOut := runCLI(t, args...)
				if code != 0 || errOut != "" {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
				}
				if i == 0 {
					first = out
				} else if out != first {
					t.Errorf("%v prints another help than %v", args, argvs[0])
				}
			}
			if *update {
				if err := os.WriteFile(golden, []byte(first), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(string(want), first); diff != "" {
				t.Errorf("help (-want +got):\n%s", diff)
			}
		})
	}
	// Every flag of every command is described in its help.
	for _, c := range commands {
		_, out, _ := runCLI(t, c.name, "--help")
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "  --") && len(strings.Fields(line)) < 3 {
				t.Errorf("%s: flag without a description: %q", c.name, line)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(out, "trawl ") || strings.Count(out, "\n") != 1 || errOut != "" {
			t.Errorf("%v: exit %d, %q, %q", args, code, out, errOut)
		}
	}
}

// TestExitCodes: 0 success, 1 a failed call, 2 bad usage (one line), 3 a
// partial result.
func TestExitCodes(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./trawl.yaml: the demo
	if err := os.WriteFile("plain.yaml", []byte("org: plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		err  string // in stderr
	}{
		{"complete", []string{"call", "acme.list_customers", "--args", `{"_all_pages": true, "_fields": ["id"]}`}, 0, "boundary: "},
		{"args before the tool", []string{"call", "--args", `{"_all_pages": true, "_fields": ["id"]}`, "acme.list_customers"}, 0, "complete: "},
		{"failed call", []string{"call", "acme.get_order", "--args", `{"order_id": "nope"}`}, 1, "404"},
		{"unknown tool", []string{"call", "acme.nope"}, 2, "no tool \"acme.nope\"; `trawl tools` lists every tool"},
		{"misspelt tool", []string{"call", "acme.list_order"}, 2, `no tool "acme.list_order" (did you mean "acme.list_orders"?); ` + "`trawl tools`"},
		{"partial", []string{"call", "acme.list_orders", "--args", `{"_all_pages": true, "_fields": ["id"]}`}, 3, "partial result: stopped by budget_pages"},
		{"bad JSON", []string{"call", "x", "--args", "notjson"}, 2, "--args is not valid JSON (at character 2"},
		{"not an object", []string{"call", "x", "--args", "[1]"}, 2, "--args must be a JSON object, not an array"},
		{"two values", []string{"call", "x", "--args", "{} {}"}, 2, "more than one JSON value"},
		{"unknown flag", []string{"serve", "--nope"}, 2, "serve: flag provided but not defined: -nope (see trawl serve --help)"},
		{"unknown call flag", []string{"call", "x", "--frob"}, 2, "call: flag provided but not defined: -frob"},
		{"no tool", []string{"call"}, 2, "call: name the tool"},
		{"two tools", []string{"call", "a", "b"}, 2, `unexpected argument "b"`},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"help for nothing", []string{"help", "frobnicate"}, 2, `help: unknown command "frobnicate"`},
		{"demo latency on a missing config", []string{"serve", "--config", "missing.yaml", "--demo-latency", "5"}, 1, "missing.yaml"},
		{"demo latency without the demo", []string{"serve", "--config", "plain.yaml", "--demo-latency", "5"}, 2, "--demo-latency applies only to the built-in demo"},
		{"demo latency out of range", []string{"serve", "--demo-latency", "20000"}, 2, "must be 0 to 10000"},
		{"chat without agent", []string{"chat"}, 2, "chat: name the agent"},
		{"chat url and config", []string{"chat", "demo", "--url", "http://127.0.0.1:1", "--config", "x.yaml"}, 2, "give one of them"},
		{"chat bad url", []string{"chat", "demo", "--url", "ftp://x", "--key", "k"}, 2, "--url must be an http(s) URL"},
		{"tools extra", []string{"tools", "extra"}, 2, `tools: unexpected argument "extra"`},
		{"version extra", []string{"version", "x"}, 2, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.err) {
				t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tt.args, code, errOut, tt.code, tt.err)
			}
			if tt.code == 2 && (strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "trawl: ")) {
				t.Errorf("a usage error is one line starting with \"trawl: \", got %q", errOut)
			}
		})
	}
}

func TestToolsListsPagination(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errOut := runCLI(t, "tools")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"TOOL", "PAGINATION", "acme.list_orders", "page", "acme.list_tickets", "cursor", "tools, 5 with detected pagination", "EFFECT", "destructive", "that change data"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "tools", "--json")
	if code != 0 || !strings.HasPrefix(out, "[") || !strings.Contains(out, `"strategy": "cursor"`) {
		t.Errorf("--json: exit %d:\n%.400s", code, out)
	}
}

// TestProgressLineFits renders the live line at several widths: it never
// reaches the last column, keeps the items, and fills the bar by progress
// (items of the reported total, fan-out values done), never by budget.
func TestProgressLineFits(t *testing.T) {
	walk := loop.Progress{Progress: paginate.Progress{Page: 3, PagesMax: 20, Items: 300, Requests: 3, RequestsMax: 60,
		Elapsed: 1500 * time.Millisecond, Total: 2400}}
	fan := loop.Progress{Progress: paginate.Progress{Page: 1, PagesMax: 20, Items: 1234, Requests: 31, RequestsMax: 60,
		Elapsed: 2 * time.Second}, ForEach: &loop.ForEachProgress{Key: "property_id", Value: "p_30", Index: 29, Total: 40}}
	cursor := loop.Progress{Progress: paginate.Progress{Page: 5, PagesMax: 20, Items: 250, Requests: 59, RequestsMax: 60}}
	for _, width := range []int{20, 40, 60, 80, 100, 200} {
		for name, p := range map[string]loop.Progress{"walk": walk, "fan-out": fan, "cursor": cursor} {
			line := progressLine(p, width, 7)
			if n := utf8.RuneCountInString(line); n > width-1 {
				t.Errorf("%s at %d columns: %d runes: %q", name, width, n, line)
			}
			if width >= 40 && !strings.Contains(line, "items") {
				t.Errorf("%s at %d columns drops the items: %q", name, width, line)
			}
			if width >= 80 && !strings.HasPrefix(line, "[") {
				t.Errorf("%s at %d columns has no bar: %q", name, width, line)
			}
		}
	}
	line := progressLine(walk, 80, 0)
	if !strings.Contains(line, "300 of 2400 items") || !strings.Contains(line, "page 3 of ~24") {
		t.Errorf("walk with a total: %q", line)
	}
	bar := func(l string) string { return l[1:strings.Index(l, "]")] }
	if got, want := strings.Count(bar(line), "█"), 3; got != want { // 300/2400 of 24 cells
		t.Errorf("walk bar has %d filled cells, want %d: %q", got, want, line)
	}
	fb := []rune(bar(progressLine(fan, 120, 0)))
	if got, want := strings.Count(string(fb), "█"), int(29.0/40*float64(len(fb))+0.5); got != want { // 29 of 40 values done
		t.Errorf("fan-out bar has %d of %d cells filled, want %d", got, len(fb), want)
	}
	// A cursor walk with no total: 59 of 60 requests used says nothing of
	// how far the end is, so the bar is a moving block, not nearly full.
	a, b := bar(progressLine(cursor, 80, 1)), bar(progressLine(cursor, 80, 2))
	if strings.Count(a, "█") != 3 || a == b {
		t.Errorf("unknown end: bars %q then %q, want a moving 3-cell block", a, b)
	}
	if got := progressLine(cursor, 80, 0); strings.Contains(got, " of ") {
		t.Errorf("no total, yet %q claims one", got)
	}
}

// TestProgressBarRedrawsInPlace drives the terminal renderer with an
// explicit width: every redraw clears the line and stays inside it.
func TestProgressBarRedrawsInPlace(t *testing.T) {
	var b strings.Builder
	bar := &progressBar{w: &b, tty: true, width: func() int { return 50 }}
	for i := 1; i <= 5; i++ {
		bar.update(loop.Progress{Progress: paginate.Progress{Page: i, PagesMax: 20, Items: i * 100, Requests: i, RequestsMax: 60, Total: 500}})
	}
	bar.done()
	out := b.String()
	if strings.Contains(out, "\n") {
		t.Errorf("the live line wrote a newline: %q", out)
	}
	frames := strings.Split(out, "\r\033[K")
	if len(frames) != 7 { // "" before the first, 5 redraws, "" after done
		t.Fatalf("%d frames: %q", len(frames), out)
	}
	for _, f := range frames {
		if n := utf8.RuneCountInString(f); n > 49 {
			t.Errorf("frame of %d runes in 50 columns: %q", n, f)
		}
	}
	if last := frames[5]; !strings.Contains(last, "500 of 500 items") || strings.Contains(last, "·]") {
		t.Errorf("the last frame is not a full bar of 500 of 500 items: %q", last)
	}
}
