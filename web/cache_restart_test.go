package web

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// The dataset cache lives in the bbolt file: a complete walk recorded
// before a restart is a hit after it, with no upstream walk.
func TestDatasetCacheSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *testServer {
		cfg := DemoConfig()
		cfg.DataDir = dir
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler()}
		ln, _ := netListen()
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		return &testServer{Server: srv, URL: "http://" + ln.Addr().String()}
	}
	call := func(ts *testServer) {
		t.Helper()
		st, b := ts.do(t, "POST", "/v1/tools/acme.list_tickets/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}})
		if st != 200 {
			t.Fatalf("invoke: %d %s", st, b)
		}
	}
	ts := start()
	call(ts)
	if st := ts.dep.Cache().Stats(); st.Stores != 1 || st.Walks != 1 {
		t.Fatalf("first call: %+v, want one complete walk recorded", st)
	}
	ts.Close()
	ts2 := start()
	defer ts2.Close()
	call(ts2)
	if st := ts2.dep.Cache().Stats(); st.Hits != 1 || st.Walks != 0 {
		t.Errorf("after restart: %+v, want a hit and no walk", st)
	}
}
