package scaleout_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
)

// The trawl binary, built once per test process (real processes, so that
// their CPU time and memory are theirs alone, not the load generator's).
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func trawlBinary(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "trawl-bench-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "trawl")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/trawl")
		cmd.Dir = "../.." // the module root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/trawl: %v\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return buildBin
}

func randomHex(n int) string {
	p := make([]byte, n)
	rand.Read(p)
	return hex.EncodeToString(p)
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// deploymentConfig is what every replica of one deployment shares.
type deploymentConfig struct {
	AdminKey  string
	SecretKey string
	RedisURL  string // "": the embedded default
	Prefix    string
	LatencyMs int
	// Bin is the trawl binary to run; "": one built from this tree.
	Bin string
}

func newDeploymentConfig(redisURL string) deploymentConfig {
	return deploymentConfig{AdminKey: "bench_" + randomHex(16), SecretKey: randomHex(32), RedisURL: redisURL,
		Prefix: "bench" + randomHex(4) + ":", LatencyMs: 50}
}

// yaml is the config file of one replica: the built-in demo with its
// upstream answering in LatencyMs, the dataset cache off so that every
// turn walks the upstream.
func (d deploymentConfig) yaml(listen, dataDir string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "listen: %s\ndata_dir: %s\nadmin_key: %s\n", listen, dataDir, d.AdminKey)
	fmt.Fprintf(&s, "demo:\n  latency_ms: %d\ncache:\n  mode: \"off\"\nlog:\n  level: warn\n", d.LatencyMs)
	if d.RedisURL != "" {
		fmt.Fprintf(&s, "redis_url: %s\nredis_prefix: %q\nsecret_key: %s\n", d.RedisURL, d.Prefix, d.SecretKey)
	}
	return s.String()
}

// replica is one running trawl process.
type replica struct {
	URL     string
	DataDir string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// startReplica starts trawl serve on cfg with a data directory of its
// own (dataDir, or a new one when ""), and waits until it is ready.
func startReplica(b *testing.B, cfg deploymentConfig, dataDir string) (*replica, error) {
	b.Helper()
	bin := cfg.Bin
	if bin == "" {
		bin = trawlBinary(b)
	}
	dir := b.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(b))
	cfgPath := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.yaml(listen, dataDir)), 0o600); err != nil {
		return nil, err
	}
	r := &replica{URL: "http://" + listen, DataDir: dataDir, logPath: filepath.Join(dir, "log"), exited: make(chan struct{})}
	logf, err := os.Create(r.logPath)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	r.cmd.Dir = dir
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	// gctrace: each GC's live heap, for memory per active turn.
	r.cmd.Env = append(os.Environ(), "GOMAXPROCS=2", "GODEBUG=gctrace=1")
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		r.cmd.Wait()
		logf.Close()
		close(r.exited)
	}()
	b.Cleanup(r.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-r.exited:
			return nil, fmt.Errorf("trawl exited at start:\n%s", r.log())
		default:
		}
		resp, err := http.Get(r.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("trawl not ready on %s within 60 s:\n%s", listen, r.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// liveHeaps returns the live heap (bytes marked) of each GC the
// process's log reports after byte offset from, and the log's length.
func (r *replica) liveHeaps(from int64) ([]int64, int64) {
	b, _ := os.ReadFile(r.logPath)
	if from > int64(len(b)) {
		from = int64(len(b))
	}
	var out []int64
	// "gc 7 @0.5s 1%: ...ms clock, ...ms cpu, 4->5->2 MB, 5 MB goal, ..."
	for line := range strings.SplitSeq(string(b[from:]), "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		_, rest, ok := strings.Cut(line, " cpu, ")
		heaps, _, ok2 := strings.Cut(rest, " MB")
		f := strings.Split(heaps, "->")
		if !ok || !ok2 || len(f) != 3 {
			continue
		}
		if mb, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			out = append(out, mb<<20)
		}
	}
	return out, int64(len(b))
}

func (r *replica) Pid() int { return r.cmd.Process.Pid }

// stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (r *replica) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// procCPU is a process's user + system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procRSS is a process's resident set size from /proc/<pid>/statm.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()), err
}

// session mints a user session on r with the admin key.
func session(ctx context.Context, r *replica, adminKey, user string) (string, error) {
	body := fmt.Sprintf(`{"user_id": %q}`, user)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/v1/sessions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Token == "" {
		return "", fmt.Errorf("POST /v1/sessions: %s %v", resp.Status, err)
	}
	return out.Token, nil
}

// sseEvent is one event of a chat stream as a client reads it.
type sseEvent struct {
	Seq  int64
	At   time.Time
	Type string // the chunk's "type"
}

// readEvents reads an SSE chat stream, calling each for every event,
// until [DONE] (nil), the end of the body, or each returning false.
func readEvents(body io.Reader, each func(sseEvent) bool) error {
	br := bufio.NewReader(body)
	var seq int64 = -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				return errors.New("the stream ended without [DONE]")
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			seq, err = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				return fmt.Errorf("event id %q", line)
			}
		case strings.HasPrefix(line, "data: "):
			data := strings.TrimPrefix(line, "data: ")
			if data == stream.Done {
				return nil
			}
			at := time.Now()
			var c struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				return fmt.Errorf("chunk %q: %v", data, err)
			}
			if !each(sseEvent{Seq: seq, At: at, Type: c.Type}) {
				return nil
			}
		}
	}
}

// getJSON GETs path on r as benchUser's session and decodes the answer.
func (d *deployment) getJSON(ctx context.Context, r *replica, path string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("GET %s: %s %s", path, resp.Status, body)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
