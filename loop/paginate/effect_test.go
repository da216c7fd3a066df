package paginate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// TestEffectsOfSpecs derives the effect of every operation of every vendor
// spec under ../shared/specs and checks the counts per effect: GET and
// HEAD read, DELETE destroys, POST/PUT/PATCH write, except a POST that
// pages through a response array or is named as a search, list or query.
func TestEffectsOfSpecs(t *testing.T) {
	dir := filepath.Join(mustShared(t), "specs")
	want := map[string][3]int{ // read, write, destructive
		"adyen-management.json": {63, 63, 8},
		"asana.yaml":            {117, 107, 23},
		"datadog-v2.yaml":       {421, 412, 152},
		"discord.json":          {103, 100, 39},
		"github-ghes-2.18.yaml": {259, 164, 76},
		"intercom.yaml":         {114, 86, 31},
		"okta-management.yaml":  {289, 332, 111},
		"openai.yaml":           {123, 122, 43},
		"plaid.yaml":            {156, 173, 0}, // every operation is a POST; /…/get, /…/list and "List …" read
		"pokeapi.yml":           {96, 0, 0},
		"sentry.json":           {120, 68, 35},
		"slack-web-v2.json":     {80, 94, 0},
		"square.json":           {141, 149, 26},
		"stripe-2023.yaml":      {211, 205, 30},
		"twilio-api-v2010.json": {103, 62, 32},
		"xero-accounting.yaml":  {126, 99, 10},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		name := e.Name()
		if ext := filepath.Ext(name); ext != ".json" && ext != ".yaml" && ext != ".yml" {
			continue
		}
		ts, err := tools.ImportOpenAPI(context.Background(), filepath.Join(dir, name), tools.ImportOptions{ProviderID: "p"})
		if err != nil {
			// Lenient import of broken documents is the importer's
			// concern; an effect needs tools to derive from.
			t.Logf("%s: not imported, no effects to check: %v", name, err)
			continue
		}
		var n [3]int
		for _, tool := range ts {
			effect := Effect(tool, Detect(tool), "")
			switch e := effect; e {
			case tools.EffectRead:
				n[0]++
			case tools.EffectWrite:
				n[1]++
				if m := tool.Method; m != "POST" && m != "PUT" && m != "PATCH" {
					t.Errorf("%s %s %s: write", name, m, tool.Path)
				}
			case tools.EffectDestructive:
				n[2]++
				if tool.Method != "DELETE" {
					t.Errorf("%s %s %s: destructive", name, tool.Method, tool.Path)
				}
			default:
				t.Errorf("%s %s: effect %q", name, tool.Name, e)
			}
			if effect == tools.EffectRead && tool.Method != "GET" && tool.Method != "HEAD" {
				summary := strings.ToLower(tool.Description)
				named := tools.QueryNamed(tool) || strings.HasPrefix(summary, "list") || strings.HasPrefix(summary, "search") || strings.HasPrefix(summary, "quer")
				if tool.Method != "POST" || !named && !Detect(tool).Paginated() {
					t.Errorf("%s %s %s: read without a reason", name, tool.Method, tool.Path)
				}
			}
		}
		got = append(got, fmt.Sprintf("%q: {%d, %d, %d},", name, n[0], n[1], n[2]))
		if w, ok := want[name]; !ok {
			t.Logf("%s: no expected counts (a new spec?): %v", name, n)
		} else if w != n {
			t.Errorf("%s: read, write, destructive = %v, want %v", name, n, w)
		}
	}
	slices.Sort(got)
	if t.Failed() {
		t.Logf("counts:\n%s", strings.Join(got, "\n"))
	}
}
