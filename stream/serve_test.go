package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sse "github.com/r3labs/sse/v2"
)

// streamServer serves GET /runs/{run} from l with Serve, answering 204 for
// an unknown run and 400 for a bad Last-Event-ID as the web package does.
// Serve's result for each request goes to errs when it is not nil.
func streamServer(t *testing.T, l EventLog, opts ServeOptions, errs chan<- error) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		err := Serve(w, r, l, r.PathValue("run"), opts)
		switch {
		case errors.Is(err, ErrRunNotFound):
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, ErrUnknownEventID):
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		if errs != nil {
			errs <- err
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, lastEventID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestServeWire(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Chunk{Start{MessageID: "m1"}, TextStart{ID: "t"}, TextDelta{ID: "t", Delta: "hi"}, TextEnd{ID: "t"}, Finish{}} {
		if _, err := l.Append(ctx, "r1", c); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	srv := streamServer(t, l, ServeOptions{}, errs)

	for _, tc := range []struct {
		lastEventID string
		want        string
	}{
		{"", `id: 1
data: {"type":"start","messageId":"m1"}

id: 2
data: {"type":"text-start","id":"t"}

id: 3
data: {"type":"text-delta","id":"t","delta":"hi"}

id: 4
data: {"type":"text-end","id":"t"}

id: 5
data: {"type":"finish"}

data: [DONE]

`},
		{"3", `id: 4
data: {"type":"text-end","id":"t"}

id: 5
data: {"type":"finish"}

data: [DONE]

`},
		{"5", "data: [DONE]\n\n"},
	} {
		t.Run("after "+tc.lastEventID, func(t *testing.T) {
			resp := get(t, srv.URL+"/runs/r1", tc.lastEventID)
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errs; err != nil {
				t.Errorf("Serve: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			wantHeaders := map[string]string{
				"Content-Type":                  "text/event-stream",
				"Cache-Control":                 "no-cache",
				"X-Vercel-Ai-Ui-Message-Stream": "v1",
				"X-Accel-Buffering":             "no",
			}
			for k, v := range wantHeaders {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if diff := cmp.Diff(tc.want, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeRefusals(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "r1", 2)
	errs := make(chan error, 1)
	srv := streamServer(t, l, ServeOptions{}, errs)
	for _, tc := range []struct {
		name, run, lastEventID string
		status                 int
		err                    error
	}{
		{"unknown run", "nope", "", http.StatusNoContent, ErrRunNotFound},
		{"id not a number", "r1", "abc", http.StatusBadRequest, ErrUnknownEventID},
		{"negative id", "r1", "-1", http.StatusBadRequest, ErrUnknownEventID},
		{"id past the end", "r1", "3", http.StatusBadRequest, ErrUnknownEventID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, srv.URL+"/runs/"+tc.run, tc.lastEventID)
			if err := <-errs; !errors.Is(err, tc.err) {
				t.Errorf("Serve: %v, want %v", err, tc.err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" {
				t.Errorf("Serve set stream headers before refusing")
			}
		})
	}
	_ = l.Close(ctx, "r1")
}

// abortAfter wraps a ResponseWriter and cancels its request once n events
// have been written, so that the handler can then break the connection.
type abortAfter struct {
	http.ResponseWriter
	n      int
	cancel context.CancelFunc
}

func (a *abortAfter) Write(p []byte) (int, error) {
	if string(p) == "id: " {
		if a.n == 0 {
			a.cancel()
			return 0, errors.New("aborted by the test")
		}
		a.n--
	}
	return a.ResponseWriter.Write(p)
}

func (a *abortAfter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// retryNow is an r3labs reconnect strategy: reconnect at once, at most n times.
type retryNow struct{ n int }

func (r *retryNow) NextBackOff() time.Duration {
	if r.n == 0 {
		return -1 // backoff.Stop
	}
	r.n--
	return 0
}
func (r *retryNow) Reset() {}

// TestServeResumeWithR3labsClient reads a live run with r3labs/sse's
// client, breaks the connection mid-stream, and lets the client reconnect
// by itself with Last-Event-ID: every event arrives once, in order.
func TestServeResumeWithR3labsClient(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	const n, breakAfter = 40, 17

	var mu sync.Mutex
	var lastEventIDs []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastEventIDs = append(lastEventIDs, r.Header.Get("Last-Event-ID"))
		first := len(lastEventIDs) == 1
		mu.Unlock()
		if !first {
			if err := Serve(w, r, l, r.PathValue("run"), ServeOptions{}); err != nil {
				t.Errorf("Serve on reconnect: %v", err)
			}
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		_ = Serve(&abortAfter{w, breakAfter, cancel}, r.WithContext(ctx), l, r.PathValue("run"), ServeOptions{})
		panic(http.ErrAbortHandler) // break the connection: no clean end of the body
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The producer runs live while the client reads.
	go func() {
		defer l.Close(ctx, "r1")
		for i := range n {
			if _, err := l.Append(ctx, "r1", TextDelta{ID: "t", Delta: fmt.Sprint(i + 1)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()

	client := sse.NewClient(srv.URL + "/runs/r1")
	client.ReconnectStrategy = &retryNow{n: 3}
	var ids, deltas []string
	var done bool
	err := client.SubscribeRawWithContext(ctx, func(msg *sse.Event) {
		if string(msg.Data) == Done {
			done = true
			return
		}
		c, err := ParseChunk(msg.Data)
		if err != nil {
			t.Errorf("event %s: %v", msg.ID, err)
			return
		}
		ids = append(ids, string(msg.ID))
		deltas = append(deltas, c.(TextDelta).Delta)
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint(i+1))
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("event ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, deltas); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if !done {
		t.Error("no [DONE] at the end")
	}
	if diff := cmp.Diff([]string{"", fmt.Sprint(breakAfter)}, lastEventIDs); diff != "" {
		t.Errorf("Last-Event-ID of each request (-want +got):\n%s", diff)
	}
}

func TestServeHeartbeat(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	srv := streamServer(t, l, ServeOptions{Heartbeat: time.Millisecond}, nil)
	resp := get(t, srv.URL+"/runs/r1", "")
	body := bufio.NewReader(resp.Body)
	first := make([]byte, len(": ping\n\n"))
	if _, err := io.ReadFull(body, first); err != nil || string(first) != ": ping\n\n" {
		t.Fatalf("start of an idle stream %q, %v; want a ping", first, err)
	}
	if _, err := l.Append(ctx, "r1", StartStep{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	// Pings may come between events, never inside one.
	got := strings.ReplaceAll(string(rest), ": ping\n\n", "")
	want := "id: 1\ndata: {\"type\":\"start-step\"}\n\ndata: [DONE]\n\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestServeStalledClient: a client that stops reading is cut off after the
// write timeout, while another client of the same run reads it all.
func TestServeStalledClient(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	srv := streamServer(t, l, ServeOptions{WriteTimeout: 50 * time.Millisecond, Heartbeat: -1}, errs)
	// The reading client's server has no write timeout, so that a busy
	// machine cannot make this test flaky.
	readerErrs := make(chan error, 1)
	readerSrv := streamServer(t, l, ServeOptions{WriteTimeout: -1}, readerErrs)

	stalled := get(t, srv.URL+"/runs/r1", "") // never read
	defer stalled.Body.Close()

	big := TextDelta{ID: "t", Delta: strings.Repeat("x", 32<<10)}
	const n = 200 // 6.4 MB: more than the socket buffers hold
	for range n {
		if _, err := l.Append(ctx, "r1", big); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil {
		t.Fatal("Serve to a stalled client ended without an error")
	}

	reader := get(t, readerSrv.URL+"/runs/r1", "")
	body, err := io.ReadAll(reader.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-readerErrs; err != nil {
		t.Fatalf("Serve to a reading client: %v", err)
	}
	if got := strings.Count(string(body), "\nid: ") + 1; got != n {
		t.Errorf("reading client got %d events, want %d", got, n)
	}
}

func TestServeClientGone(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "r1", 1)
	defer l.Close(ctx, "r1")
	errs := make(chan error, 1)
	srv := streamServer(t, l, ServeOptions{}, errs)

	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(reqCtx, "GET", srv.URL+"/runs/r1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "id: 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve after the client left: %v, want context.Canceled", err)
	}
}

func TestWriterSplitsLines(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec, 0)
	if err := w.WriteEvent(Event{Seq: 7, Data: []byte("{\"a\":\n1,\r\n\"b\":\r2}")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteComment("bad\ncomment"); err == nil {
		t.Error("a comment with a line break was written")
	}
	want := "id: 7\ndata: {\"a\":\ndata: 1,\ndata: \"b\":\ndata: 2}\n\n"
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !rec.Flushed {
		t.Error("event not flushed")
	}
}
