package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
)

// Upstream modes.
const (
	UpstreamLive   = "live"   // the tools call their upstreams
	UpstreamRecord = "record" // …and every response is kept (upstream.jsonl)
	UpstreamReplay = "replay" // the kept responses are served back; nothing is sent
)

// Exchange is one upstream request and its response, as a recording
// keeps it: the request by method, path with query, and a hash of its
// body (not its host, nor its headers: the credentials and a demo's port
// differ from run to run).
type Exchange struct {
	Method   string      `json:"method"`
	Path     string      `json:"path"`
	BodyHash string      `json:"bodyHash,omitempty"`
	Status   int         `json:"status"`
	Header   http.Header `json:"header,omitempty"`
	Body     []byte      `json:"body"`
}

func (e Exchange) key() string { return e.Method + " " + e.Path + " " + e.BodyHash }

// Upstream is an http.RoundTripper for the tools' requests: live,
// recording or replaying (see the modes). Requests that are the same
// (same key) are served back in the order they were recorded; past the
// last, the last again.
type Upstream struct {
	mode string
	next http.RoundTripper

	mu       sync.Mutex
	recorded []Exchange            // record: in order
	served   map[string][]Exchange // replay: by key
	at       map[string]int
}

// NewUpstream returns an Upstream in mode over next (nil:
// http.DefaultTransport). For UpstreamReplay, recording is the file of
// an earlier UpstreamRecord run.
func NewUpstream(mode string, next http.RoundTripper, recording string) (*Upstream, error) {
	if next == nil {
		next = http.DefaultTransport
	}
	u := &Upstream{mode: mode, next: next}
	switch mode {
	case UpstreamLive, UpstreamRecord:
		return u, nil
	case UpstreamReplay:
		f, err := os.Open(recording)
		if err != nil {
			return nil, fmt.Errorf("--upstream replay: %w (record one first: --upstream record --out DIR)", err)
		}
		defer f.Close()
		u.served, u.at = map[string][]Exchange{}, map[string]int{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		line := 0
		for sc.Scan() {
			line++
			var e Exchange
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", recording, line, err)
			}
			u.served[e.key()] = append(u.served[e.key()], e)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %v", recording, err)
		}
		return u, nil
	}
	return nil, fmt.Errorf("--upstream: want live, record or replay, not %q", mode)
}

// RoundTrip implements http.RoundTripper.
func (u *Upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if u.mode == UpstreamLive {
		return u.next.RoundTrip(req)
	}
	e := Exchange{Method: req.Method, Path: req.URL.RequestURI()}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		e.BodyHash = hex.EncodeToString(sum[:8])
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if u.mode == UpstreamReplay {
		u.mu.Lock()
		list := u.served[e.key()]
		i := u.at[e.key()]
		if i < len(list)-1 {
			u.at[e.key()] = i + 1
		}
		u.mu.Unlock()
		if len(list) == 0 {
			return nil, fmt.Errorf("--upstream replay: the recording holds no response to %s %s", e.Method, e.Path)
		}
		return list[i].response(req), nil
	}
	resp, err := u.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	e.Status, e.Header, e.Body = resp.StatusCode, resp.Header.Clone(), body
	e.Header.Del("Set-Cookie")
	u.mu.Lock()
	u.recorded = append(u.recorded, e)
	u.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (e Exchange) response(req *http.Request) *http.Response {
	return &http.Response{Status: fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status)), StatusCode: e.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: e.Header.Clone(), Body: io.NopCloser(bytes.NewReader(e.Body)),
		ContentLength: int64(len(e.Body)), Request: req}
}

// Save writes what a recording run kept, one exchange a line, sorted by
// request so that the file does not depend on the cases' interleaving
// (requests of the same key keep their order). A live or replaying
// Upstream saves nothing.
func (u *Upstream) Save(path string) error {
	if u.mode != UpstreamRecord {
		return nil
	}
	u.mu.Lock()
	list := slices.Clone(u.recorded)
	u.mu.Unlock()
	slices.SortStableFunc(list, func(a, b Exchange) int {
		switch {
		case a.key() < b.key():
			return -1
		case a.key() > b.key():
			return 1
		}
		return 0
	})
	var buf bytes.Buffer
	for _, e := range list {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	if buf.Len() == 0 {
		return errors.New("--upstream record: no upstream request was made, so nothing was recorded")
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
