package tools_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/limittest"
)

func listTool(origin string) *tools.Tool {
	return &tools.Tool{ID: "acme.list", Provider: "acme", Name: "list", Kind: tools.KindAPI, Method: "GET", Path: "/items", Origin: origin}
}

// An upstream that serves two requests at once and answers 429 beyond:
// the invoker's limiter learns the bound from the first 429s, so after
// them the callers (retrying at once, as a tight loop would) almost never
// hit it again, and every call completes.
func TestInvokerLearnsTheConcurrencyFrom429s(t *testing.T) {
	var inflight, tooMany, served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inflight.Add(1) > 2 {
			inflight.Add(-1)
			tooMany.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		time.Sleep(2 * time.Millisecond) // a request takes a moment, so calls overlap
		inflight.Add(-1)
		served.Add(1)
		io.WriteString(w, `{"items":[]}`)
	}))
	defer srv.Close()
	inv := tools.NewInvoker(tools.InvokerOptions{Limiter: tools.NewMemoryLimiter(tools.LimiterOptions{})})
	tool := listTool(srv.URL)
	const workers, calls = 8, 10
	var late atomic.Int32 // 429s after half the calls were served
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				for attempt := 0; ; attempt++ {
					resp, err := inv.Call(context.Background(), tools.Request{Tool: tool})
					if err != nil {
						t.Error(err)
						return
					}
					if resp.Status == http.StatusOK {
						break
					}
					if served.Load() >= workers*calls/2 {
						late.Add(1)
					}
					if attempt > 50 {
						t.Error("still 429 after 50 attempts")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if served.Load() != workers*calls {
		t.Fatalf("served %d of %d calls", served.Load(), workers*calls)
	}
	// 8 at once against 2: the first wave's 6 answers 429, the bound is
	// halved once per wave until it fits; growing back by 1/(8c) an
	// answer probes once more within 80 calls at most.
	if n := tooMany.Load(); n > 16 {
		t.Errorf("%d answers were 429 over %d calls", n, workers*calls)
	}
	if n := late.Load(); n > 2 {
		t.Errorf("%d answers were 429 in the second half of the calls", n)
	}
	t.Logf("%d answers 429 (%d in the second half) over %d calls", tooMany.Load(), late.Load(), workers*calls)
}

// X-RateLimit-Remaining: 0 with a reset 2 s ahead: no request reaches the
// upstream until then, and a call whose deadline comes first fails at
// once without a request.
func TestInvokerWaitsForTheReset(t *testing.T) {
	clock := limittest.NewClock(time.Now().Truncate(time.Second))
	var mu sync.Mutex
	var seen []time.Time
	reset := clock.Now().Add(2 * time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, clock.Now())
		mu.Unlock()
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		io.WriteString(w, `{"items":[]}`)
	}))
	defer srv.Close()
	inv := tools.NewInvoker(tools.InvokerOptions{Limiter: tools.NewMemoryLimiter(tools.LimiterOptions{Clock: clock})})
	tool := listTool(srv.URL)
	if _, err := inv.Call(context.Background(), tools.Request{Tool: tool}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := inv.Call(ctx, tools.Request{Tool: tool})
	var rle *tools.RateLimitError
	if !errors.As(err, &rle) || rle.Cause != "paused" || rle.Wait != 2*time.Second {
		t.Fatalf("a call with 1 s left: %v", err)
	}
	resp, err := inv.Call(context.Background(), tools.Request{Tool: tool})
	if err != nil || resp.Status != 200 {
		t.Fatal(resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the upstream saw %d requests, want 2", len(seen))
	}
	if seen[1].Before(reset) {
		t.Errorf("the second request came %v before the reset", reset.Sub(seen[1]))
	}
}

// A runtime credential's reported limit pauses that user's requests only.
func TestInvokerLimitsPerCredential(t *testing.T) {
	clock := limittest.NewClock(time.Now())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer user-1-token" {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, `{"items":[]}`)
	}))
	defer srv.Close()
	inv := tools.NewInvoker(tools.InvokerOptions{Limiter: tools.NewMemoryLimiter(tools.LimiterOptions{Clock: clock})})
	inv.SetAuth("acme", tools.ProviderAuth{Runtime: tools.AuthSpec{Type: tools.AuthBearer}})
	tool := listTool(srv.URL)
	if resp, err := inv.Call(context.Background(), tools.Request{Tool: tool, Credential: "user-1-token"}); err != nil || resp.Status != 429 {
		t.Fatal(resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := inv.Call(ctx, tools.Request{Tool: tool, Credential: "user-2-token"}); err != nil || resp.Status != 200 {
		t.Fatalf("user 2 during user 1's pause: %v %v", resp, err)
	}
	var rle *tools.RateLimitError
	if _, err := inv.Call(ctx, tools.Request{Tool: tool, Credential: "user-1-token"}); !errors.As(err, &rle) {
		t.Fatalf("user 1 during its pause: %v", err)
	}
}
