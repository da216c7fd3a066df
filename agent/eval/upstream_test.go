package eval

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamRecordReplay: a recording keeps each response by request;
// the replay serves them back in order with the upstream gone, and says
// which request it has nothing for.
func TestUpstreamRecordReplay(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-N", strings.Repeat("n", n))
		io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(body)+" #"+strings.Repeat("i", n))
	}))
	rec, err := NewUpstream(UpstreamRecord, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rec}
	get := func(c *http.Client, method, path, body string) string {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	first := []string{get(client, "GET", "/a?page=1", ""), get(client, "GET", "/a?page=1", ""), get(client, "POST", "/b", `{"x":1}`)}
	path := filepath.Join(t.TempDir(), UpstreamFile)
	if err := rec.Save(path); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	rep, err := NewUpstream(UpstreamReplay, nil, path)
	if err != nil {
		t.Fatal(err)
	}
	client = &http.Client{Transport: rep}
	again := []string{get(client, "GET", "/a?page=1", ""), get(client, "GET", "/a?page=1", ""), get(client, "POST", "/b", `{"x":1}`)}
	if strings.Join(first, "|") != strings.Join(again, "|") || first[0] == first[1] {
		t.Errorf("recorded %q\nreplayed %q", first, again)
	}
	if got := get(client, "GET", "/a?page=1", ""); got != first[1] {
		t.Errorf("past the last: %q, want the last again", got)
	}
	if got := get(client, "POST", "/b", `{"x":2}`); !strings.Contains(got, "the recording holds no response to POST /b") {
		t.Errorf("another body: %q", got)
	}
	if _, err := NewUpstream(UpstreamReplay, nil, filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "record one first") {
		t.Errorf("no recording: %v", err)
	}
	if _, err := NewUpstream("sometimes", nil, ""); err == nil {
		t.Error("a bad mode was taken")
	}
}
