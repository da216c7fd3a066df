package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"
)

// TestStudioConnectionsInBrowser drives the Studio's Connections page in
// headless Chromium: a user's OAuth connection (scopes, expiry, last
// refresh) and pasted token are listed with the admin key's ?user_id=
// form, never a token; Disconnect deletes the OAuth one on the server
// (DELETE /v1/connections/{toolkit}) and the list then shows the other
// alone, on a desktop and a phone screen.
func TestStudioConnectionsInBrowser(t *testing.T) {
	br := startBrowser(t, 120*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	ctx := context.Background()
	conns := ts.Deployment().Connections()
	const access, refresh, pasted = "studio-access-token-8d1f", "studio-refresh-token-2c7a", "studio-pasted-token-5e90"
	expiry := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	tok := (&oauth2.Token{AccessToken: access, RefreshToken: refresh, Expiry: expiry}).WithExtra(map[string]any{"scope": "crm.read crm.write"})
	if err := conns.StoreOAuth(ctx, "ann", "crm", tok); err != nil {
		t.Fatal(err)
	}
	if err := conns.Store(ctx, "ann", "mail", pasted); err != nil {
		t.Fatal(err)
	}
	row := func(tk string) string { return `#connections-table tr[data-toolkit="` + tk + `"]` }

	br.login(ts, "/studio/#/connections")
	br.run("no user named",
		chromedp.WaitVisible(chromedp.ID("connections-user")),
		jsTrue(`document.querySelector('#connections-count').textContent.includes('Name a user')`))
	if !br.eval(`document.querySelector('[data-nav="connections"]').getAttribute('aria-current') === 'page'`) {
		t.Error("the Connections tab is not marked current")
	}
	br.run("ann's connections",
		chromedp.SendKeys(chromedp.ID("connections-user"), "ann"),
		chromedp.Click(chromedp.ID("connections-show")),
		chromedp.WaitVisible(chromedp.CSS(row("crm")+` button[data-disconnect]`)),
		chromedp.WaitVisible(chromedp.CSS(row("mail"))),
		br.view("connections"))
	if !br.eval(`location.hash === '#/connections/ann'`) {
		t.Error("the user is not in the address")
	}
	got := br.text(row("crm"))
	for _, want := range []string{"OAuth 2.0", "connected", "crm.read", "crm.write", "never", "Disconnect"} {
		if !strings.Contains(got, want) {
			t.Errorf("the crm row lacks %q: %s", want, got)
		}
	}
	if br.text(row("crm")+` .connection-expires`) == "—" {
		t.Errorf("the crm row shows no expiry: %s", got)
	}
	if got := br.text(row("mail")); !strings.Contains(got, "token") {
		t.Errorf("the mail row: %s", got)
	}
	if got := br.text("#connections-table"); strings.Contains(got, access) || strings.Contains(got, refresh) || strings.Contains(got, pasted) {
		t.Errorf("the page shows a token: %s", got)
	}
	if got := br.text("#connections-count"); got != "2 connections of ann" {
		t.Errorf("count: %q", got)
	}

	br.run("disconnect crm",
		chromedp.Click(chromedp.CSS(row("crm")+` button[data-disconnect]`)),
		jsTrue(`document.querySelector('#connections-msg').textContent.includes('Disconnected crm')`),
		jsTrue(`!document.querySelector('#connections-table tr[data-toolkit="crm"]')`),
		chromedp.WaitVisible(chromedp.CSS(row("mail"))))
	_, b := ts.do(t, "GET", "/v1/connections?user_id=ann", "", nil)
	var listed struct{ Connections []struct{ Toolkit string } }
	if err := json.Unmarshal(b, &listed); err != nil || len(listed.Connections) != 1 || listed.Connections[0].Toolkit != "mail" {
		t.Errorf("on the server after disconnect: %s %v", b, err)
	}
	if got := br.text("#connections-count"); got != "1 connection of ann" {
		t.Errorf("count after disconnect: %q", got)
	}
}
