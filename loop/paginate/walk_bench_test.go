//go:build unix

// The benchmarks read the process's CPU time with getrusage, hence unix.

package paginate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// The walker's cost over the network's: 20 pages × 250 items from a
// loopback server, walked by Walk, against a plain sequential loop of the
// same GETs with the same http.Client reading the bodies. Target: the
// walker takes at most 10% longer (ratio ≤ 1.10).
//
//	go test -run '^$' -bench 'BenchmarkWalk$' -benchtime 200x ./loop/paginate/
//
// BenchmarkWalk/interleaved runs both in every iteration, so machine
// noise hits both alike, and reports walker-ns/op, plain-ns/op and their
// ratio. BenchmarkWalk/check_only is the floor under any checked walk:
// the plain loop against the same loop with one checking pass over each
// page (query.AppendElementsAt, as readPage does) and nothing else.

const (
	benchPages = 20
	benchItems = 250
)

// benchServer serves benchPages pages of benchItems realistic items each
// (about 250 bytes per item, 63 KB per page), chained by next_cursor; the
// bodies are rendered once.
func benchServer(b *testing.B) (*httptest.Server, []string) {
	b.Helper()
	bodies := make(map[string][]byte, benchPages)
	var urls []string
	for p := 0; p < benchPages; p++ {
		var sb strings.Builder
		sb.WriteString(`{"object":"list","data":[`)
		for i := 0; i < benchItems; i++ {
			n := p*benchItems + i
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":"ord_%07d","object":"order","status":"paid","amount":%d,"currency":"eur",`+
				`"customer":{"id":"cus_%05d","name":"Customer %d","email":"c%d@example.com"},`+
				`"created":"2025-01-%02dT10:%02d:00Z","tags":["web","priority"],"note":"Line one\nline \"two\""}`,
				n, 1000+n, n%977, n%977, n%977, 1+n%28, n%60)
		}
		next := fmt.Sprintf(`"c%d"`, p+1)
		if p == benchPages-1 {
			next = "null"
		}
		fmt.Fprintf(&sb, `],"has_more":%t,"next_cursor":%s,"url":"/v1/orders"}`, p < benchPages-1, next)
		cursor := ""
		if p > 0 {
			cursor = fmt.Sprintf("c%d", p)
		}
		bodies[cursor] = []byte(sb.String())
		u := "/v1/orders?limit=250"
		if cursor != "" {
			u = "/v1/orders?cursor=" + cursor + "&limit=250"
		}
		urls = append(urls, u)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Query().Get("cursor")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	for i := range urls {
		urls[i] = srv.URL + urls[i]
	}
	return srv, urls
}

// clientCaller is the least a Caller can do: build the URL from the
// request's arguments, GET it, read the body. The walker's overhead is
// measured over it.
type clientCaller struct {
	client *http.Client
}

func (c clientCaller) Call(ctx context.Context, req tools.Request) (*tools.Response, error) {
	u := req.URL
	if u == "" {
		u = queryURL(req.Tool.Origin+req.Tool.Path, req.Args)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &tools.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// queryURL is base with args as its query, as url.Values.Encode spells
// it (keys sorted, both sides query-escaped), built as a careful Caller
// builds it: one buffer, numbers and strings written without fmt.
func queryURL(base string, args map[string]any) string {
	keys := make([]string, 0, 8)
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	sb.Grow(len(base) + 1 + 32*len(keys))
	sb.WriteString(base)
	for i, k := range keys {
		if i == 0 {
			sb.WriteByte('?')
		} else {
			sb.WriteByte('&')
		}
		sb.WriteString(url.QueryEscape(k))
		sb.WriteByte('=')
		var v string
		switch a := args[k].(type) {
		case string:
			v = a
		case json.Number:
			v = string(a)
		case int:
			v = strconv.Itoa(a)
		default:
			v = fmt.Sprint(a)
		}
		sb.WriteString(url.QueryEscape(v))
	}
	return sb.String()
}

func benchWalkOptions(srv *httptest.Server, caller Caller) WalkOptions {
	max := float64(250)
	tool := &tools.Tool{ID: "shop.list_orders", Provider: "shop", Name: "list_orders", Method: http.MethodGet,
		Origin: srv.URL, Path: "/v1/orders", Params: []tools.Param{
			{Name: "limit", In: tools.InQuery, Schema: &tools.Schema{Type: "integer", Maximum: &max}},
			{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		}}
	plan := Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", Items: "data", ItemsFound: true,
		NextToken: "next_cursor", MoreFlag: "has_more", Continuation: "next_cursor", Provenance: "schema"}
	return WalkOptions{Caller: caller, Tool: tool, Plan: plan, AllPages: true}
}

func plainLoop(b *testing.B, client *http.Client, urls []string) {
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// walkOnce walks and returns the bytes of the pages received.
func walkOnce(b *testing.B, o WalkOptions) int64 {
	res, err := Walk(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	if !res.Complete || len(res.Items) != benchPages*benchItems || res.Requests != benchPages {
		b.Fatalf("walk: complete %v, %d items, %d requests", res.Complete, len(res.Items), res.Requests)
	}
	return res.Bytes
}

func BenchmarkWalk(b *testing.B) {
	srv, urls := benchServer(b)
	client := srv.Client()
	opts := benchWalkOptions(srv, clientCaller{client: client})

	b.Run("plain_loop", func(b *testing.B) {
		for b.Loop() {
			plainLoop(b, client, urls)
		}
	})
	b.Run("walker", func(b *testing.B) {
		for b.Loop() {
			walkOnce(b, opts)
		}
	})
	b.Run("walker_via_invoker", func(b *testing.B) {
		o := opts
		o.Caller = tools.NewInvoker(tools.InvokerOptions{Client: client})
		for b.Loop() {
			walkOnce(b, o)
		}
	})
	b.Run("interleaved", func(b *testing.B) { interleaved(b, client, urls, opts) })
	b.Run("check_only", func(b *testing.B) { checkOnly(b, client, urls) })
}

// getBody GETs u and reads its whole body, as the plain loop does.
func getBody(b *testing.B, client *http.Client, u string) []byte {
	resp, err := client.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// checkOnly runs the plain loop and the plain loop with one checking pass
// over each page in every iteration, and reports the second's CPU over
// the first's per MB of pages: what the pass alone adds, with the network
// and the runtime as the walk has them.
func checkOnly(b *testing.B, client *http.Client, urls []string) {
	var plainCPU, checkedCPU time.Duration
	var bytes int64
	var items [][]byte
	for b.Loop() {
		c0 := cpuTime()
		plainLoop(b, client, urls)
		c1 := cpuTime()
		for _, u := range urls {
			body := getBody(b, client, u)
			var err error
			if items, err = query.AppendElementsAt(items[:0], body, "data"); err != nil || len(items) != benchItems {
				b.Fatalf("%d items, %v", len(items), err)
			}
			bytes += int64(len(body))
		}
		checkedCPU += cpuTime() - c1
		plainCPU += c1 - c0
	}
	b.ReportMetric(float64(checkedCPU)/float64(plainCPU), "cpu-ratio")
	b.ReportMetric(float64((checkedCPU-plainCPU).Nanoseconds())/1e6/(float64(bytes)/1e6), "extra-cpu-ms/MB")
}

// interleaved runs the plain loop and the walk in every iteration and
// reports both, wall and CPU, and their ratios, and the walker's CPU over
// the plain loop's per MB of pages (issue 27's target: ≤ 1 ms/MB).
func interleaved(b *testing.B, client *http.Client, urls []string, opts WalkOptions) {
	var plain, walker, plainCPU, walkerCPU time.Duration
	var plainUse, walkerUse usage
	var bytes int64
	for b.Loop() {
		u0, t0 := rusage(), time.Now()
		plainLoop(b, client, urls)
		u1, t1 := rusage(), time.Now()
		bytes += walkOnce(b, opts)
		walker += time.Since(t1)
		u2 := rusage()
		plain += t1.Sub(t0)
		plainUse, walkerUse = plainUse.add(u1.sub(u0)), walkerUse.add(u2.sub(u1))
	}
	plainCPU, walkerCPU = plainUse.user+plainUse.sys, walkerUse.user+walkerUse.sys
	mb := float64(bytes) / 1e6
	b.ReportMetric(float64((walkerUse.user-plainUse.user).Nanoseconds())/1e6/mb, "extra-user-ms/MB")
	b.ReportMetric(float64((walkerUse.sys-plainUse.sys).Nanoseconds())/1e6/mb, "extra-sys-ms/MB")
	b.ReportMetric(float64(walkerUse.faults-plainUse.faults)/float64(b.N), "extra-faults/op")
	n := float64(b.N)
	b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(walker.Nanoseconds())/n, "walker-ns/op")
	b.ReportMetric(float64(walker)/float64(plain), "ratio")
	b.ReportMetric(float64(plainCPU.Nanoseconds())/n, "plain-cpu-ns/op")
	b.ReportMetric(float64(walkerCPU.Nanoseconds())/n, "walker-cpu-ns/op")
	b.ReportMetric(float64(walkerCPU)/float64(plainCPU), "cpu-ratio")
	b.ReportMetric(float64((walkerCPU-plainCPU).Nanoseconds())/1e6/(float64(bytes)/1e6), "extra-cpu-ms/MB")
}

// usage is the process's CPU time, user and system apart, and its minor
// page faults (getrusage).
type usage struct {
	user, sys time.Duration
	faults    int64
}

func rusage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()), faults: ru.Minflt}
}

func (u usage) sub(v usage) usage {
	return usage{user: u.user - v.user, sys: u.sys - v.sys, faults: u.faults - v.faults}
}

func (u usage) add(v usage) usage {
	return usage{user: u.user + v.user, sys: u.sys + v.sys, faults: u.faults + v.faults}
}

// cpuTime is the process's user+system CPU time (client and server
// alike), a steadier measure than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadPage is the walker's per-page work alone: items, ids and
// signals of one 250-item page.
func BenchmarkReadPage(b *testing.B) {
	srv, urls := benchServer(b)
	resp, err := srv.Client().Get(urls[0])
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	o := benchWalkOptions(srv, nil)
	w := newWalker(WalkOptions{Caller: clientCaller{}, Tool: o.Tool, Plan: o.Plan, AllPages: true})
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s, err := readPage(w.plan, body, resp.Header, w.base, w.buf, nil)
		if err != nil || len(s.items) != benchItems {
			b.Fatal(err, len(s.items))
		}
		w.buf = s.items[:0]
		if w.res.Items != nil {
			w.res.Items, w.ids = w.res.Items[:0], newIDSet(benchItems)
		}
		w.collect(s.items)
	}
}

// Fetching ahead against a slow upstream: a 20-page offset walk with a
// total, each answer 100 ms late (a CRM's pace), walked one request at a
// time (Concurrency 1: the walk of before) and fetching ahead (adaptive),
// both in every iteration. Targets: wall time ≤ 0.35× the sequential
// walk's, CPU per page within 1.1×.
//
// Its name does not start with BenchmarkWalk, so that -bench
// 'BenchmarkWalk/interleaved' (whose first part also matches any longer
// name) does not run it at the walk benchmark's 300 iterations — 300 × 2
// walks at 100 ms a page, a quarter of an hour at no CPU, which looked
// like a hang.
//
//	go test -run '^$' -bench BenchmarkFetchAhead -benchtime 5x ./loop/paginate/
func BenchmarkFetchAhead(b *testing.B) {
	const size, pages, latency = 250, 20, 100 * time.Millisecond
	rows := make([]string, pages*(size-1)) // the overlap re-reads a row a page: 20 pages exactly
	for n := range rows {
		rows[n] = fmt.Sprintf(`{"id":"ord_%07d","object":"order","status":"paid","amount":%d,"currency":"eur",`+
			`"customer":{"id":"cus_%05d","name":"Customer %d","email":"c%d@example.com"},`+
			`"created":"2025-01-%02dT10:%02d:00Z","tags":["web","priority"],"note":"Line one\nline \"two\""}`,
			n, 1000+n, n%977, n%977, n%977, 1+n%28, n%60)
	}
	var bodies sync.Map // by offset: rendered once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		q := r.URL.Query()
		off, _ := strconv.Atoi(q.Get("offset"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		body, ok := bodies.Load([2]int{off, limit})
		if !ok {
			end := min(off+limit, len(rows))
			body = []byte(`{"data":[` + strings.Join(rows[min(off, end):end], ",") + `],"total":` + strconv.Itoa(len(rows)) + `}`)
			bodies.Store([2]int{off, limit}, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body.([]byte))
	}))
	b.Cleanup(srv.Close)
	max := float64(size)
	tool := &tools.Tool{ID: "crm.list_deals", Provider: "crm", Name: "list_deals", Method: http.MethodGet,
		Origin: srv.URL, Path: "/deals", Params: []tools.Param{
			{Name: "limit", In: tools.InQuery, Schema: &tools.Schema{Type: "integer", Maximum: &max}},
			{Name: "offset", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		}}
	plan := Plan{Strategy: Offset, SizeParam: "limit", OffsetParam: "offset", Items: "data", ItemsFound: true,
		Total: "total", Continuation: "total", Provenance: "schema"}
	inv := tools.NewInvoker(tools.InvokerOptions{Client: srv.Client()})
	walk := func(concurrency int) (*Result, time.Duration, time.Duration) {
		c0, t0 := cpuTime(), time.Now()
		res, err := Walk(context.Background(), WalkOptions{Caller: inv, Tool: tool, Plan: plan, AllPages: true,
			Budget: Budget{Concurrency: concurrency}})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Complete || len(res.Items) != len(rows) || res.Pages != pages {
			b.Fatalf("walk (concurrency %d): complete %v, %d items, %d pages (%s)", concurrency, res.Complete, len(res.Items), res.Pages, res.Cause)
		}
		return res, time.Since(t0), cpuTime() - c0
	}
	var seqWall, aheadWall, seqCPU, aheadCPU time.Duration
	seqReqs, aheadReqs := 0, 0
	for b.Loop() {
		res, wall, cpu := walk(1)
		seqWall, seqCPU, seqReqs = seqWall+wall, seqCPU+cpu, seqReqs+res.Requests
		res, wall, cpu = walk(0)
		aheadWall, aheadCPU, aheadReqs = aheadWall+wall, aheadCPU+cpu, aheadReqs+res.Requests
	}
	n := float64(b.N)
	b.ReportMetric(float64(seqWall.Milliseconds())/n, "sequential-ms/walk")
	b.ReportMetric(float64(aheadWall.Milliseconds())/n, "ahead-ms/walk")
	b.ReportMetric(float64(aheadWall)/float64(seqWall), "wall-ratio")
	b.ReportMetric(float64(seqCPU.Microseconds())/n/pages, "sequential-cpu-µs/page")
	b.ReportMetric(float64(aheadCPU.Microseconds())/n/pages, "ahead-cpu-µs/page")
	b.ReportMetric(float64(aheadCPU)/float64(seqCPU), "cpu-ratio")
	b.ReportMetric(float64(aheadReqs)/float64(seqReqs), "requests-ratio")
}

// The benchmark's Caller spells a request's URL as url.Values would.
func TestQueryURLIsValuesEncode(t *testing.T) {
	for _, args := range []map[string]any{
		{"limit": 250},
		{"limit": json.Number("250"), "cursor": "c1"},
		{"cursor": "a b&c=d/é", "limit": "10", "z": 1.5, "a": true},
	} {
		q := url.Values{}
		for k, v := range args {
			q.Set(k, fmt.Sprint(v))
		}
		if got, want := queryURL("http://h/p", args), "http://h/p?"+q.Encode(); got != want {
			t.Errorf("queryURL(%v) = %s, want %s", args, got, want)
		}
	}
}

// partHeld is what a part of BenchmarkPlainLoopPlus keeps, let go after
// each iteration.
var partHeld [][]byte

// BenchmarkPlainLoopPlus ranks what the walker's CPU over the plain loop
// is made of: each sub-benchmark runs the plain loop and, in the same
// iteration, the plain loop plus one more part of a walk, and reports
// the second's CPU over the first's per MB of pages (user and system
// time apart), as BenchmarkWalk/interleaved does for the whole walker:
//
//   - check: one checking pass over each page (BenchmarkWalk/check_only);
//   - keep: that, the pages kept until the last one is read, then let go
//     (a walk's Result holds every page: the collector finds them live);
//   - keep_rows: that, and every page's rows gathered in one slice, sized
//     as Walk sizes Result.Items;
//   - walk: Walk itself.
//
// The steps between them are the price of each part under the runtime as
// the walk has it (its collections, its page faults, its threads). Its
// name does not start with BenchmarkWalk, so that -bench 'BenchmarkWalk/…'
// does not run it.
//
//	go test -run '^$' -bench 'BenchmarkPlainLoopPlus' -benchtime 300x -count 3 ./loop/paginate/
func BenchmarkPlainLoopPlus(b *testing.B) {
	srv, urls := benchServer(b)
	client := srv.Client()
	opts := benchWalkOptions(srv, clientCaller{client: client})
	get := func(u string) []byte { return getBody(b, client, u) }
	var items [][]byte
	check := func(body []byte) {
		var err error
		if items, err = query.AppendElementsAt(items[:0], body, "data"); err != nil || len(items) != benchItems {
			b.Fatalf("%d items, %v", len(items), err)
		}
	}
	parts := []struct {
		name string
		run  func() int64
	}{
		{"check", func() (n int64) {
			for _, u := range urls {
				body := get(u)
				check(body)
				n += int64(len(body))
			}
			return n
		}},
		{"keep", func() (n int64) {
			pages := make([][]byte, 0, len(urls))
			for _, u := range urls {
				body := get(u)
				check(body)
				pages = append(pages, body)
				n += int64(len(body))
			}
			partHeld = pages
			return n
		}},
		{"keep_rows", func() (n int64) {
			// The rows keep their pages alive, as Result.Items does.
			rows := make([][]byte, 0, min(benchItems*opts.Budget.Resolved().Pages, opts.Budget.Resolved().Items+benchItems))
			for _, u := range urls {
				body := get(u)
				check(body)
				rows = append(rows, items...)
				n += int64(len(body))
			}
			partHeld = rows
			return n
		}},
		{"walk", func() int64 { return walkOnce(b, opts) }},
	}
	for _, part := range parts {
		b.Run(part.name, func(b *testing.B) {
			var plainUse, partUse usage
			var bytes int64
			for b.Loop() {
				u0 := rusage()
				plainLoop(b, client, urls)
				u1 := rusage()
				bytes += part.run()
				u2 := rusage()
				partHeld = nil
				plainUse, partUse = plainUse.add(u1.sub(u0)), partUse.add(u2.sub(u1))
			}
			mb := float64(bytes) / 1e6
			b.ReportMetric(float64((partUse.user+partUse.sys-plainUse.user-plainUse.sys).Nanoseconds())/1e6/mb, "extra-cpu-ms/MB")
			b.ReportMetric(float64((partUse.user-plainUse.user).Nanoseconds())/1e6/mb, "extra-user-ms/MB")
			b.ReportMetric(float64((partUse.sys-plainUse.sys).Nanoseconds())/1e6/mb, "extra-sys-ms/MB")
		})
	}
}

// BenchmarkMemoryWalk is the walker without the network: the 20 pages
// of BenchmarkWalk handed back from memory, each copied into a fresh
// slice as a Caller reading it would, walked by Walk; against, in the
// same iteration, the same copies checked once each
// (query.AppendElementsAt) and nothing else. walker-over-check-ms/MB is
// the walker's process CPU over that check's per MB of pages: its own
// code and what the collector spends on what a walk holds, without the
// scheduler's and the sockets' noise. (Not named BenchmarkWalk…, so that
// -bench 'BenchmarkWalk/…' does not run it.)
//
//	go test -run '^$' -bench 'BenchmarkMemoryWalk' -benchtime 2000x -count 3 ./loop/paginate/
func BenchmarkMemoryWalk(b *testing.B) {
	srv, urls := benchServer(b)
	bodies := make(map[string][]byte, len(urls))
	for _, u := range urls {
		body := getBody(b, srv.Client(), u)
		q, _ := url.Parse(u)
		bodies[q.Query().Get("cursor")] = body
	}
	header := http.Header{"Content-Type": {"application/json"}}
	caller := CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		c, _ := argString(req.Args, "cursor")
		body, ok := bodies[c]
		if !ok {
			return &tools.Response{Status: http.StatusNotFound, Header: header}, nil
		}
		return &tools.Response{Status: http.StatusOK, Header: header, Body: append([]byte(nil), body...)}, nil
	})
	opts := benchWalkOptions(srv, caller)
	order := make([][]byte, len(urls))
	for i, u := range urls {
		q, _ := url.Parse(u)
		order[i] = bodies[q.Query().Get("cursor")]
	}
	var items [][]byte
	var walkCPU, checkCPU time.Duration
	var bytes int64
	for b.Loop() {
		c0 := cpuTime()
		for _, body := range order {
			page := append([]byte(nil), body...)
			var err error
			if items, err = query.AppendElementsAt(items[:0], page, "data"); err != nil || len(items) != benchItems {
				b.Fatalf("%d items, %v", len(items), err)
			}
		}
		c1 := cpuTime()
		bytes += walkOnce(b, opts)
		walkCPU += cpuTime() - c1
		checkCPU += c1 - c0
	}
	mb := float64(bytes) / 1e6
	b.ReportMetric(float64(walkCPU.Nanoseconds())/1e6/mb, "walk-cpu-ms/MB")
	b.ReportMetric(float64(checkCPU.Nanoseconds())/1e6/mb, "check-cpu-ms/MB")
	b.ReportMetric(float64((walkCPU-checkCPU).Nanoseconds())/1e6/mb, "walker-over-check-ms/MB")
}
