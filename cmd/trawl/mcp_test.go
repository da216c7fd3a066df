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
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// `trawl mcp` with no config serves the demo's agent over stdio to the
// Go SDK's client, at both revisions: the line README gives a client
// works on a fresh clone, and stdout carries nothing but the protocol.
func TestMCPStdioServesTheDemo(t *testing.T) {
	bin := buildTrawl(t)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.Command(bin, "mcp")
			cmd.Dir = t.TempDir() // no trawl.yaml there: the demo
			changed := make(chan struct{}, 16)
			c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
			cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Errorf("negotiated %s", got)
			}
			n := 0
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if tool.Name == "list_orders" || tool.Name == "search_tools" {
					n++
				}
			}
			if n != 2 {
				t.Errorf("list_orders and search_tools not both listed")
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_orders",
				Arguments: map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res.StructuredContent)
			var env struct {
				Complete bool `json:"_pagingComplete"`
				Boundary struct {
					Completion string `json:"completion"`
					Records    int    `json:"records"`
				} `json:"_boundary"`
				Data []map[string]any `json:"data"`
			}
			if err := json.Unmarshal(b, &env); err != nil || res.IsError || !env.Complete || env.Boundary.Completion != "complete" ||
				env.Boundary.Records == 0 || len(env.Data) != env.Boundary.Records {
				t.Errorf("walk over stdio: err %v, %s", err, b[:min(len(b), 400)])
			}
			// Nothing changed the tool list yet: no list_changed (the
			// SDK sends one 10 ms after a change; another round trip
			// after that would follow it).
			time.Sleep(300 * time.Millisecond)
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if n := len(changed); n != 0 {
				t.Errorf("%d notifications/tools/list_changed before any load_tool", n)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "load_tool", Arguments: map[string]any{"toolName": "MAIL_SEND_EMAIL"}})
			if err != nil || res.IsError {
				t.Fatalf("load_tool: %v", err)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/tools/list_changed after load_tool")
			}
			time.Sleep(300 * time.Millisecond)
			if n := len(changed); n != 0 {
				t.Errorf("%d more notifications/tools/list_changed after the one of load_tool", n)
			}
		})
	}
}

// `trawl mcp` keeps its store to itself, so a write needing approval
// from a client without elicitation is refused in words that say no one
// can reach its inbox, and where the write can be made instead.
func TestMCPStdioApprovalWithoutInbox(t *testing.T) {
	bin := buildTrawl(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(cfg, []byte("demo: {approval: {write: required}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--config", cfg)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "CHAT_SEND_MESSAGE", Arguments: map[string]any{"conversation_id": "conv_01", "text": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.HasPrefix(text, "approval_required: ") || !strings.Contains(text, "no approvals inbox anyone can reach") ||
		!strings.Contains(text, "elicitation") || strings.Contains(text, "Studio (Approvals)") {
		t.Errorf("stdio approval without elicitation: %s", text)
	}
}

// serverInfo.version is the build's, the same over stdio and over HTTP.
func TestMCPVersionSameOnBothTransports(t *testing.T) {
	bin := buildTrawl(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfgPath := filepath.Join(dir, "trawl.yaml")
	cfg := fmt.Sprintf("listen: %s\nadmin_key: %s\ndata_dir: %s\ndemo: {latency_ms: 1}\n", addr, lifecycleKey, filepath.Join(dir, "data"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startTrawl(t, bin, cfgPath, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "version-test", Version: "v0"}, nil)
	cmd := exec.Command(bin, "mcp")
	cmd.Dir = t.TempDir()
	stdio, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + lifecycleKey}}
	web, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/v1/agents/demo/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	sv, hv := stdio.InitializeResult().ServerInfo.Version, web.InitializeResult().ServerInfo.Version
	if sv != version() || hv != sv {
		t.Errorf("serverInfo.version: stdio %q, HTTP %q, the build %q", sv, hv, version())
	}
}

// headerTransport sets headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// `trawl mcp` with a config naming the deployment's Redis keeps its own
// store (the conversation is not in Redis) and shares one thing there:
// the providers' rate limits, so its walks and the replicas' keep one
// pace. Every key it writes is the limiter's.
func TestMCPStdioSharesOnlyRateLimitsInRedis(t *testing.T) {
	bin := buildTrawl(t)
	rs := redistest.Start(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "trawl.yaml")
	cfg := fmt.Sprintf("redis_url: redis://%s/0\nredis_prefix: \"mcpcmd:\"\nadmin_key: %s\nsecret_key: %s\ndemo: {}\n",
		rs.Addr, lifecycleKey, strings.Repeat("5ca1e0a7", 8))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--config", cfgPath)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_orders",
		Arguments: map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id"}}})
	if err != nil || res.IsError {
		t.Fatalf("walk over stdio with redis_url: %v %+v", err, res)
	}
	keys, err := rs.Client(t).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	limiter := 0
	for _, k := range keys {
		if !strings.HasPrefix(k, "mcpcmd:") || !strings.Contains(k, "rl:") {
			t.Errorf("trawl mcp wrote %q to the deployment's Redis: only the rate limiter's keys belong there", k)
		} else {
			limiter++
		}
	}
	if limiter == 0 {
		t.Error("trawl mcp wrote no rate-limit key to the deployment's Redis: its requests are paced apart from the replicas'")
	}
}
