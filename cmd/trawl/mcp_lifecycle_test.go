package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpDemoConfig writes a config serving the demo, each upstream answer
// delayed by latency, with the shutdown grace given.
func mcpDemoConfig(t *testing.T, latency, grace time.Duration) (cfgPath, addr string) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	cfgPath = filepath.Join(dir, "trawl.yaml")
	cfg := fmt.Sprintf("listen: %s\ndata_dir: ./data\nadmin_key: %s\nshutdown_grace: %s\ndemo: {latency_ms: %d}\n",
		addr, lifecycleKey, grace, latency.Milliseconds())
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, addr
}

type adminKey struct{}

func (adminKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+lifecycleKey)
	return http.DefaultTransport.RoundTrip(r)
}

// walkThroughSIGTERM starts a long walk on cs (20 pages of the demo's
// orders), sends the process SIGTERM once its first page is in, and
// returns the call's answer.
func walkThroughSIGTERM(t *testing.T, connect func(*mcp.ClientOptions) *mcp.ClientSession, proc func() *os.Process) (*mcp.CallToolResult, error) {
	t.Helper()
	started := make(chan struct{}, 64)
	cs := connect(&mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case started <- struct{}{}:
		default:
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: "list_orders", Arguments: map[string]any{"_all_pages": true, "_fields": []any{"id"}}}
	p.SetProgressToken("w")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, p)
		done <- answer{res, err}
	}()
	select {
	case <-started:
	case a := <-done:
		t.Fatalf("the walk ended before its first progress: %v", a.err)
	}
	if err := proc().Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-done
	return a.res, a.err
}

func envelope(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// A call running when `trawl serve` gets SIGTERM finishes within the
// grace and its answer reaches the client, at both revisions; past the
// grace it is cancelled and answers with what it fetched, noted as
// interrupted.
func TestMCPCallThroughSIGTERM(t *testing.T) {
	bin := buildTrawl(t)
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"finishes", 20 * time.Second}, {"grace-ends", 1500 * time.Millisecond}} {
		for _, v := range []string{"2026-07-28", "2025-11-25"} {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				cfg, addr := mcpDemoConfig(t, 500*time.Millisecond, tc.grace)
				p := startTrawl(t, bin, cfg, addr)
				connect := func(opt *mcp.ClientOptions) *mcp.ClientSession {
					c := mcp.NewClient(&mcp.Implementation{Name: "sigterm-test", Version: "v0"}, opt)
					cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/v1/agents/demo/mcp",
						HTTPClient: &http.Client{Transport: adminKey{}}}, &mcp.ClientSessionOptions{ProtocolVersion: v})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cs.Close() })
					return cs
				}
				res, err := walkThroughSIGTERM(t, connect, func() *os.Process { return p.cmd.Process })
				checkShutdownAnswer(t, tc.grace > 10*time.Second, res, err)
				select {
				case err := <-p.exited:
					p.exited <- err // for the cleanup
				case <-time.After(30 * time.Second):
					t.Fatal("trawl did not exit")
				}
			})
		}
	}
}

// checkShutdownAnswer holds a call's answer through a shutdown to what
// it must be: the whole walk when the grace sufficed, else its partial
// with the interruption said.
func checkShutdownAnswer(t *testing.T, whole bool, res *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("no answer through the shutdown: %v", err)
	}
	env := envelope(t, res)
	if whole {
		if res.IsError || env["_stoppedBy"] == "cancelled" || env["_boundary"] == nil || res.Meta["trawl/interrupted"] != nil {
			t.Errorf("the walk did not finish in the grace: %.400v", env)
		}
		return
	}
	var said bool
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && strings.Contains(tc.Text, "The server shut down before this call") {
			said = true
		}
	}
	if env["_stoppedBy"] != "cancelled" || res.Meta["trawl/interrupted"] == nil || !said {
		t.Errorf("past the grace: stopped by %v, _meta %v, said %v", env["_stoppedBy"], res.Meta, said)
	}
}

// `trawl mcp` on SIGTERM answers the running call (the whole walk
// within the grace; past it, what it fetched) before it exits.
func TestMCPStdioCallThroughSIGTERM(t *testing.T) {
	bin := buildTrawl(t)
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{{"finishes", 20 * time.Second}, {"grace-ends", 1500 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := mcpDemoConfig(t, 500*time.Millisecond, tc.grace)
			cmd := exec.Command(bin, "mcp", "--config", cfg)
			connect := func(opt *mcp.ClientOptions) *mcp.ClientSession {
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "sigterm-test", Version: "v0"}, opt).
					Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			res, err := walkThroughSIGTERM(t, connect, func() *os.Process { return cmd.Process })
			checkShutdownAnswer(t, tc.grace > 10*time.Second, res, err)
		})
	}
}
