package deploy

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeConfigParses keeps the README's config example valid.
func TestReadmeConfigParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "```yaml\n")
	if start < 0 {
		t.Fatal("README has no yaml example")
	}
	body := text[start+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	cfg, err := ParseConfig("README.md", []byte(body), func(name string) (string, bool) {
		if name == "TRAWL_ADMIN_KEY" {
			return strings.Repeat("k", MinAdminKeyLength), true
		}
		return "x", true
	})
	if err != nil {
		t.Fatalf("README config: %v", err)
	}
	if len(cfg.Providers) != 1 || len(cfg.Agents) != 1 || cfg.Providers[0].Auth.Token != "x" {
		t.Errorf("README config read as %+v", cfg)
	}
}
