package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestStudioEvalsInBrowser drives the Studio's Evals page in headless
// Chromium: a run of the demo's dataset started from the page, its
// progress streamed, its cases shown passing; then, with looping off for
// list_orders, a run compared with the first: the regression named, each
// failing case beside its baseline with the call whose verdict changed
// marked, and the filter by failed check showing only the cases that
// failed it — on a desktop and a phone screen, without a console error.
func TestStudioEvalsInBrowser(t *testing.T) {
	br := startBrowser(t, 120*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	br.login(ts, "/studio/#/evals")
	br.run("the empty list",
		chromedp.WaitVisible(chromedp.ID("evals-empty")),
		br.view("evals-empty"))
	br.run("run the demo dataset",
		chromedp.Click(chromedp.ID("evals-start")),
		chromedp.WaitVisible(chromedp.ID("eval-totals")))
	if got := br.text("#eval-totals"); !strings.Contains(got, "4 of 4 cases passed · pass rate 100%") {
		t.Errorf("totals: %s", got)
	}
	if n := br.count(`details.eval-case[data-passed="true"]`); n != 4 {
		t.Errorf("%d passing cases shown; want 4", n)
	}
	first := strings.Fields(br.text("#eval-run-title"))[0]

	if st, b := ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false}); st != 200 {
		t.Fatalf("PATCH: %d %s", st, b)
	}
	br.run("the list, and a run compared with the first",
		chromedp.Navigate(ts.URL+"/studio/#/evals"),
		chromedp.WaitVisible(chromedp.CSS(`#evals-list tr[data-eval-id="`+first+`"]`)),
		chromedp.SetValue(chromedp.ID("evals-baseline"), first),
		chromedp.Click(chromedp.ID("evals-start")),
		chromedp.WaitVisible(chromedp.ID("eval-comparison")),
		br.view("evals-run"))
	if got := br.text("#eval-comparison"); !strings.Contains(got, "Against "+first+": 3 newly failing") || !strings.Contains(got, "regressed") {
		t.Errorf("comparison: %s", got)
	}
	total := `details.eval-case[data-case="open-orders-total"]`
	if !br.eval(`document.querySelector('` + total + `').open && document.querySelector('` + total + `').dataset.passed === 'false'`) {
		t.Error("the failing case is not shown open, failing")
	}
	run := total + ` [data-side="run"]`
	base := total + ` [data-side="baseline"]`
	if n := br.count(run + ` li.eval-call.diff[data-verdict="unverified"]`); n != 1 {
		t.Errorf("%d changed calls marked on the run's side; want list_orders, unverified", n)
	}
	if n := br.count(base + ` li.eval-call[data-verdict="complete"] [data-verdict="complete"]`); n != 1 {
		t.Errorf("the baseline's list_orders has no complete badge (%d)", n)
	}
	if !br.eval(`document.querySelector('` + run + ` .eval-answer').dataset.differs === 'true'`) {
		t.Error("the differing answer is not marked")
	}
	for _, want := range []string{"unsupported_claim", "verdict_changed", "was complete when recorded, unverified now"} {
		if !strings.Contains(br.text(run+` .eval-checks`), want) {
			t.Errorf("the run's checks lack %q: %s", want, br.text(run+` .eval-checks`))
		}
	}
	if !strings.Contains(br.text(base+` .eval-answer`), "There are 364 open orders in total") {
		t.Errorf("the baseline's answer: %s", br.text(base+` .eval-answer`))
	}
	br.run("choose a failed check", chromedp.SetValue(chromedp.ID("evals-filter"), "unsupported_claim"))
	if !br.eval(`document.getElementById('evals-filter').dispatchEvent(new Event('change'))`) {
		t.Error("the filter's change was not dispatched")
	}
	br.run("filter by failed check",
		jsTrue(`document.querySelectorAll('details.eval-case').length === 2`),
		br.view("evals-filtered"))
	// Both answers that claim a total over the unlooped walk fail it.
	for _, c := range []string{"open-orders-total", "orders-by-currency"} {
		if n := br.count(`details.eval-case[data-case="` + c + `"]`); n != 1 {
			t.Errorf("the filter does not show %s", c)
		}
	}
	if !br.eval(`document.querySelector('[data-nav="evals"]').getAttribute('aria-current') === 'page'`) {
		t.Error("the Evals tab is not marked current")
	}
}
