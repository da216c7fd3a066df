//go:build linux || darwin

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"github.com/trawl-dev/trawl/web"
	"github.com/trawl-dev/trawl/web/deploy"
)

// terminal is the binary running in a pseudo-terminal of a given size,
// as a person's shell runs it: Ctrl-C is a byte typed, the line
// discipline makes it SIGINT.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	cols int

	mu      sync.Mutex
	out     bytes.Buffer
	wake    chan struct{} // a read happened
	drained chan struct{} // closed once everything written was read
	exited  chan error
}

func startTerminal(t *testing.T, cols int, dir string, env []string, bin string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: uint16(cols)})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, cmd: cmd, tty: tty, cols: cols, wake: make(chan struct{}, 1), drained: make(chan struct{}), exited: make(chan error, 1)}
	go func() {
		defer close(term.drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.wake <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { term.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-term.exited
		}
		tty.Close()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// waitFor waits until the output after from holds want, and returns the
// offset after it.
func (term *terminal) waitFor(from int, want string) int {
	term.t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		s := term.screen()
		if i := strings.Index(s[min(from, len(s)):], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-term.wake:
		case <-deadline:
			term.t.Fatalf("waiting for %q; the terminal shows:\n%s", want, plain(s[min(from, len(s)):]))
		}
	}
}

func (term *terminal) typeIn(s string) {
	term.t.Helper()
	if _, err := term.tty.WriteString(s); err != nil {
		term.t.Fatal(err)
	}
}

// exitCode waits for the program to end.
func (term *terminal) exitCode() int {
	term.t.Helper()
	select {
	case err := <-term.exited:
		select {
		case <-term.drained: // what it printed last is read too
		case <-time.After(5 * time.Second):
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			term.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		term.t.Fatalf("the program did not exit; the terminal shows:\n%s", plain(term.screen()))
		return -1
	}
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// plain is terminal output as lines a person reads: escape sequences
// out, a carriage return starting the line again (the live progress
// line draws over itself).
func plain(s string) string {
	s = ansi.ReplaceAllString(strings.ReplaceAll(s, "\r\n", "\n"), "")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			lines[i] = l[j+1:]
		}
	}
	return strings.Join(lines, "\n")
}

// laidOut matches the lines the program lays out itself — tool calls
// (→), verdicts and progress (indented), its notes ("(…"), table rows
// (cells two spaces apart) — as opposed to prose, which the terminal
// wraps, and the echo of what was typed.
var laidOut = regexp.MustCompile(`^(  |→|\(|\S.*\S {2,}\S)`)

// tooWide lists the laid-out lines of out longer than cols.
func tooWide(out string, cols int) []string {
	var wide []string
	for _, l := range strings.Split(plain(out), "\n") {
		if utf8.RuneCountInString(l) > cols && laidOut.MatchString(l) && !strings.HasPrefix(l, "you> ") {
			wide = append(wide, fmt.Sprintf("%d: %q", utf8.RuneCountInString(l), l))
		}
	}
	return wide
}

var ptyWidths = []int{80, 120}

// TestTablesFitTheTerminal: trawl tools and trawl inspect in 80- and
// 120-column terminals print no line wider than the terminal (cells cut
// with …), and --wide prints them whole.
func TestTablesFitTheTerminal(t *testing.T) {
	bin := buildTrawl(t)
	dir := t.TempDir()
	spec, _ := filepath.Abs(filepath.Join("..", "..", "tools", "demo", "acme.yaml"))
	for _, cols := range ptyWidths {
		for _, args := range [][]string{{"tools"}, {"inspect", spec}} {
			t.Run(fmt.Sprintf("%s at %d", args[0], cols), func(t *testing.T) {
				term := startTerminal(t, cols, dir, nil, bin, args...)
				if code := term.exitCode(); code != 0 {
					t.Fatalf("exit %d:\n%s", code, term.screen())
				}
				out := term.screen()
				if wide := tooWide(out, cols); len(wide) > 0 {
					t.Errorf("lines wider than %d:\n%s", cols, strings.Join(wide, "\n"))
				}
				if !strings.Contains(out, "…") {
					t.Errorf("nothing was cut at %d columns: is the table the terminal's width?\n%s", cols, out)
				}
				wide := startTerminal(t, cols, dir, nil, bin, append(args, "--wide")...)
				if code := wide.exitCode(); code != 0 {
					t.Fatalf("--wide: exit %d", code)
				}
				if len(tooWide(wide.screen(), cols)) == 0 {
					t.Errorf("--wide printed nothing wider than %d columns", cols)
				}
			})
		}
	}
}

const (
	ptyQ1 = "How many open orders worth more than 100 do we have, and how do they split by currency?"
	ptyQ2 = "Across all our properties, how many confirmed bookings were for a week or longer?"
)

// slowDemo writes a config of the demo whose upstream answers slowly and
// whose cache is off, so a walk is running when Ctrl-C comes.
func slowDemo(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trawl.yaml"), []byte("demo: {latency_ms: 250}\ncache: {mode: off}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestChatCtrlCInProcess: `trawl chat demo` in 80- and 120-column
// terminals: a turn's verdict lines fit the width and its Markdown is
// rendered (bold, the table aligned); Ctrl-C mid-turn stops the turn and
// the prompt comes back; Ctrl-C at the prompt exits with status 130.
func TestChatCtrlCInProcess(t *testing.T) {
	bin := buildTrawl(t)
	for _, cols := range ptyWidths {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			term := startTerminal(t, cols, slowDemo(t), nil, bin, "chat", "demo")
			at := term.waitFor(0, "you> ")
			term.typeIn(ptyQ1 + "\r")
			at = term.waitFor(at, "The amounts are in each order")
			at = term.waitFor(at, "you> ")
			out := term.screen()
			if wide := tooWide(out, cols); len(wide) > 0 {
				t.Errorf("lines wider than %d:\n%s", cols, strings.Join(wide, "\n"))
			}
			shown := plain(out)
			if strings.Contains(shown, "**278") || !strings.Contains(out, "\x1b[1m278 open orders worth more than 100") {
				t.Errorf("the answer's bold is not rendered:\n%s", shown)
			}
			if !regexp.MustCompile(`(?m)^EUR\s+170\s+€131,895\.20$`).MatchString(shown) || strings.Contains(shown, "|---|") {
				t.Errorf("the answer's table is not laid out:\n%s", shown)
			}
			if !strings.Contains(shown, "✓ list_orders: complete · 364 records · 4 pages · 4 requests") {
				t.Errorf("the verdict line:\n%s", shown)
			}

			// Ctrl-C mid-walk: the turn stops, the prompt is back.
			term.typeIn(ptyQ2 + "\r")
			at = term.waitFor(at, "property_id")
			term.typeIn("\x03")
			at = term.waitFor(at, "(stopped: the turn ended here")
			at = term.waitFor(at, "you> ")
			if s := plain(term.screen()[at:]); strings.Contains(s, "157 confirmed") {
				t.Errorf("the stopped turn answered anyway: %s", s)
			}
			// Ctrl-C at the prompt: exit 130.
			term.typeIn("\x03")
			if code := term.exitCode(); code != 130 {
				t.Errorf("Ctrl-C at the prompt: exit %d, want 130\n%s", code, plain(term.screen()))
			}
		})
	}
}

// TestChatCtrlCWithURL: with --url, Ctrl-C mid-turn leaves the turn
// running on the server and says how to follow it again; following it
// that way shows its end. NO_COLOR keeps the text as written.
func TestChatCtrlCWithURL(t *testing.T) {
	bin := buildTrawl(t)
	cfg := deploy.DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.Demo = &deploy.DemoSettings{LatencyMs: 250}
	cfg.Cache.Mode = "off"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := web.New(ctx, cfg, web.Options{Stdout: io.Discard})
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
	url := "http://" + ln.Addr().String()
	dir := t.TempDir()
	for _, cols := range ptyWidths {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			chat := fmt.Sprintf("pty-%d", cols)
			term := startTerminal(t, cols, dir, []string{"NO_COLOR=1"}, bin, "chat", "demo", "--url", url, "--key", srv.AdminKey(), "--chat", chat)
			at := term.waitFor(0, "you> ")
			term.typeIn(ptyQ2 + "\r")
			at = term.waitFor(at, "property_id")
			term.typeIn("\x03")
			follow := fmt.Sprintf("trawl chat demo --url %s --chat %s", url, chat)
			at = term.waitFor(at, "(detached: the turn goes on on the server")
			term.waitFor(at, "you> ")
			if !strings.Contains(strings.ReplaceAll(plain(term.screen()), "\n  ", " "), follow) {
				t.Errorf("the note does not say %q:\n%s", follow, plain(term.screen()))
			}
			req, _ := http.NewRequest("GET", url+"/v1/agents/demo/chat/"+chat+"/stream", nil)
			req.Header.Set("Authorization", "Bearer "+srv.AdminKey())
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
				t.Errorf("the turn is not running on the server after detaching: %v %v", resp.Status, err)
			} else {
				resp.Body.Close()
			}
			term.typeIn("\x03")
			if code := term.exitCode(); code != 130 {
				t.Errorf("Ctrl-C at the prompt: exit %d, want 130", code)
			}
			// Following it again, as the note says, shows its end.
			again := startTerminal(t, cols, dir, []string{"NO_COLOR=1"}, bin, "chat", "demo", "--url", url, "--key", srv.AdminKey(), "--chat", chat)
			got := again.waitFor(0, "(a turn is running on this chat: following it)")
			got = again.waitFor(got, "**157 confirmed bookings**") // NO_COLOR: as written
			again.waitFor(got, "you> ")
			if wide := tooWide(again.screen(), cols); len(wide) > 0 {
				t.Errorf("lines wider than %d:\n%s", cols, strings.Join(wide, "\n"))
			}
			again.typeIn("\x03")
			if code := again.exitCode(); code != 130 {
				t.Errorf("Ctrl-C at the prompt: exit %d, want 130", code)
			}
		})
	}
}
