package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// deltas follows url and returns the text deltas it yielded, and the
// error that ended the sequence.
func deltas(ctx context.Context, url string, opt FollowOptions) ([]string, error) {
	var got []string
	for ch, err := range Follow(ctx, url, opt) {
		if err != nil {
			return got, err
		}
		if d, ok := ch.(TextDelta); ok {
			got = append(got, d.Delta)
		}
	}
	return got, nil
}

func numbers(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// A live run followed through a connection that breaks twice mid-stream:
// Follow reconnects with the last id it received, and every chunk
// arrives once, in order, until [DONE].
func TestFollowResumes(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		if n > 2 {
			_ = Serve(w, r, l, "r1", ServeOptions{})
			return
		}
		rctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		_ = Serve(&abortAfter{w, 7, cancel}, r.WithContext(rctx), l, "r1", ServeOptions{})
		panic(http.ErrAbortHandler) // no clean end of the body
	}))
	defer srv.Close()
	go func() {
		defer l.Close(ctx, "r1")
		for i := range 30 {
			if _, err := l.Append(ctx, "r1", TextDelta{ID: "t", Delta: strconv.Itoa(i + 1)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got, err := deltas(ctx, srv.URL, FollowOptions{Header: http.Header{"Authorization": {"Bearer k"}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(numbers(1, 30), got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) != 3 || lastIDs[0] != "" || lastIDs[1] != "7" || lastIDs[2] != "14" {
		t.Errorf("Last-Event-ID of each request: %q; want none, then the last id received", lastIDs)
	}
}

// A response that ends before [DONE] is resumed, MaxResumes times at
// most; chunks this package cannot parse are skipped.
func TestFollowResponseEndsEarly(t *testing.T) {
	// Each response sends the next event after Last-Event-ID and ends;
	// the fifth sends [DONE].
	handler := func(w http.ResponseWriter, r *http.Request) {
		after, _ := LastEventID(r)
		SetHeaders(w.Header())
		if after == 2 {
			fmt.Fprintf(w, "id: 3\ndata: {\"type\":\"data-from-the-future\",\"data\":1,\"extra\":true}\n\n")
			return
		}
		if after == 4 {
			fmt.Fprintf(w, "data: [DONE]\n\n")
			return
		}
		enc, _ := Encode(TextDelta{ID: "t", Delta: strconv.FormatInt(after+1, 10)})
		fmt.Fprintf(w, "id: %d\ndata: %s\n\n", after+1, enc)
	}
	srv := httptest.NewServer(http.HandlerFunc(handler))
	defer srv.Close()
	got, err := deltas(context.Background(), srv.URL, FollowOptions{})
	if err != nil || !cmp.Equal(got, []string{"1", "2", "4"}) {
		t.Errorf("Follow = %v, %v; want [1 2 4] (3 is not a chunk) and no error", got, err)
	}
	got, err = deltas(context.Background(), srv.URL, FollowOptions{MaxResumes: 2})
	if err == nil || !strings.Contains(err.Error(), "ended early 3 times") || !cmp.Equal(got, []string{"1", "2"}) {
		t.Errorf("with MaxResumes 2: %v, %v; want [1 2] and an error", got, err)
	}
}

// A refusal ends the sequence at once with its error, without a
// reconnect: 204 is ErrNotRunning, any other status a *StatusError.
func TestFollowRefused(t *testing.T) {
	var requests sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := requests.LoadOrStore(r.URL.Path, new(int))
		*n.(*int)++
		switch r.URL.Path {
		case "/ended":
			w.WriteHeader(http.StatusNoContent)
		case "/forbidden":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"code":"forbidden","message":"not yours"}}`)
		}
	}))
	defer srv.Close()
	if _, err := deltas(context.Background(), srv.URL+"/ended", FollowOptions{}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("204: %v, want ErrNotRunning", err)
	}
	_, err := deltas(context.Background(), srv.URL+"/forbidden", FollowOptions{})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 403 || string(se.Body) != `{"error":{"code":"forbidden","message":"not yours"}}` {
		t.Errorf("403: %v, want a *StatusError with the body", err)
	}
	for _, path := range []string{"/ended", "/forbidden"} {
		if n, _ := requests.Load(path); *n.(*int) != 1 {
			t.Errorf("%s: %d requests, want 1 (a refusal is not retried)", path, *n.(*int))
		}
	}
}

// Breaking out of the loop closes the connection; a cancelled context
// ends the sequence with its error.
func TestFollowStops(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx, "r1")
	if _, err := l.Append(ctx, "r1", TextDelta{ID: "t", Delta: "1"}); err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = Serve(w, r, l, "r1", ServeOptions{})
		gone <- struct{}{} // the client went away: the run never ends
	}))
	defer srv.Close()
	for ch, err := range Follow(ctx, srv.URL, FollowOptions{}) {
		if err != nil || ch.(TextDelta).Delta != "1" {
			t.Fatalf("first chunk: %v, %v", ch, err)
		}
		break
	}
	<-gone
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last error
	for ch, err := range Follow(cctx, srv.URL, FollowOptions{}) {
		if err != nil {
			last = err
			continue
		}
		if ch.(TextDelta).Delta == "1" {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("after cancel: %v, want context.Canceled", last)
	}
	<-gone
}
