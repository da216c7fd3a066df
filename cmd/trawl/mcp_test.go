package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
			c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil)
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
