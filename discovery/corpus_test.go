package discovery

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// vendorKits are the vendor OpenAPI documents of ../shared/specs whose
// operations the held-out and tuning sets search, each imported as a
// connected-app toolkit the way a deployment would wrap it: tool names
// prefixed with the toolkit id (as the demo toolkits' are), a display
// name and a one-line toolkit description.
var vendorKits = []struct {
	file, id, name, description string
}{
	{"xero-accounting.yaml", "xero", "Xero", "Accounting: invoices, bills, payments, bank transactions, contacts and financial reports."},
	{"intercom.yaml", "intercom", "Intercom", "Customer support: conversations, tickets, contacts, companies and help center articles."},
	{"sentry.json", "sentry", "Sentry", "Application monitoring: errors and issues, releases, projects, teams and alerts."},
	{"discord.json", "discord", "Discord", "Community chat: servers (guilds), channels, messages, members and roles."},
	{"okta-management.yaml", "okta", "Okta", "Identity and access: users, groups, applications, sign-in policies and the system log."},
}

// sharedSpecs is ../shared/specs beside the module root, or "" when it
// is absent.
func sharedSpecs() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	specs := filepath.Join(dir, "..", "shared", "specs")
	if _, err := os.Stat(specs); err != nil {
		return ""
	}
	return specs
}

var vendorOnce struct {
	sync.Once
	tools []*tools.Tool
	err   error
}

// vendorTools are the vendorKits' tools (about 1,650), imported once per
// test binary. The test is skipped when ../shared is absent.
func vendorTools(tb testing.TB) []*tools.Tool {
	tb.Helper()
	dir := sharedSpecs()
	if dir == "" {
		tb.Skip("../shared not found: the vendor OpenAPI documents live in ../shared/specs beside the repository; only the demo toolkits are searched")
	}
	vendorOnce.Do(func() {
		for _, k := range vendorKits {
			ts, err := tools.ImportOpenAPI(context.Background(), filepath.Join(dir, k.file), tools.ImportOptions{ProviderID: k.id})
			if err != nil {
				vendorOnce.err = err
				return
			}
			for _, t := range ts {
				c := *t
				c.Name = k.id + "_" + t.Name
				c.ID = k.id + "." + c.Name
				c.Kind = tools.KindApp
				c.Toolkit, c.ToolkitName, c.ToolkitDescription = k.id, k.name, k.description
				vendorOnce.tools = append(vendorOnce.tools, &c)
			}
		}
	})
	if vendorOnce.err != nil {
		tb.Fatal(vendorOnce.err)
	}
	return vendorOnce.tools
}
