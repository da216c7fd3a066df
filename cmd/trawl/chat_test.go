package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trawl-dev/trawl/web"
	"github.com/trawl-dev/trawl/web/deploy"
)

// dropAfter passes n event writes through, then breaks the connection.
type dropAfter struct {
	http.ResponseWriter
	n      int
	cancel context.CancelFunc
}

func (d *dropAfter) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), "id: ") {
		if d.n == 0 {
			d.cancel()
			return 0, http.ErrAbortHandler
		}
		d.n--
	}
	return d.ResponseWriter.Write(p)
}

func (d *dropAfter) Flush() { d.ResponseWriter.(http.Flusher).Flush() }

func (d *dropAfter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// TestChatResumesAfterADrop runs `trawl chat` against a live demo server
// whose first two stream connections break mid-turn (the server side
// closes them without ending the response): the client resumes with
// Last-Event-ID each time and prints the whole answer exactly once.
func TestChatResumesAfterADrop(t *testing.T) {
	cfg := deploy.DemoConfig()
	cfg.DataDir = t.TempDir()
	if err := cfg.SetDemoLatency(150); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := web.New(ctx, cfg, web.Options{Stdout: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var streams atomic.Int32
	var mu sync.Mutex
	var lastIDs []string
	h := srv.Handler()
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/stream") {
			h.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		n := streams.Add(1)
		if n > 2 {
			h.ServeHTTP(w, r)
			return
		}
		// Break the first connection inside the first step's text, the
		// second a few events later (around the tool call).
		rctx, rcancel := context.WithCancel(r.Context())
		defer rcancel()
		defer func() {
			if recover() != nil || rctx.Err() != nil {
				panic(http.ErrAbortHandler) // no clean end of the body
			}
		}()
		h.ServeHTTP(&dropAfter{ResponseWriter: w, n: 5, cancel: rcancel}, r.WithContext(rctx))
		if rctx.Err() != nil {
			panic(http.ErrAbortHandler)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: wrapped}
	go hs.Serve(ln)
	defer hs.Close()

	q := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	code, out, errOut := runCLI(t, "chat", "demo", "--url", "http://"+ln.Addr().String(), "--key", srv.AdminKey(), "--message", q)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if n := streams.Load(); n < 3 {
		t.Fatalf("%d stream connections; the drops did not happen", n)
	}
	mu.Lock()
	if lastIDs[0] != "" || lastIDs[1] == "" || lastIDs[2] == "" || lastIDs[1] == lastIDs[2] {
		t.Errorf("Last-Event-ID per connection: %q; want none, then the last id received each time", lastIDs)
	}
	mu.Unlock()
	for _, want := range []string{
		"I'll have every open order fetched, not just the first page, and counted and totalled by currency by trawl itself, so no row is added up by hand.",
		"You have **278 open orders worth more than 100**",
		"The amounts are in each order's own currency, so I haven't added them together.",
		"→ list_orders {",
		"✓ list_orders: complete · 364 records · 4 pages",
		"· aggregate over the 278 of all 364 rows that match the filter (complete)\n",
	} {
		if c := strings.Count(out, want); c != 1 {
			t.Errorf("%q printed %d times:\n%s", want, c, out)
		}
	}
}

// TestChatInProcess runs `trawl chat` without --url: the demo starts
// in-process behind a loopback listener, and the answer streams from it.
func TestChatInProcess(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errOut := runCLI(t, "chat", "--message", "How many open orders worth more than 100?", "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "You have **278 open orders") || !strings.Contains(out, "… page ") {
		t.Errorf("output:\n%s", out)
	}
	code, _, errOut = runCLI(t, "chat", "nobody", "--message", "hi")
	if code != 1 || !strings.Contains(errOut, "no agent") {
		t.Errorf("unknown agent: exit %d, %s", code, errOut)
	}
}
