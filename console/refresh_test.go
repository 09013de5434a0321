package console

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// refreshHarness runs in every page before the console's script: the
// auto-refresh is on, the script's timers wait for __fire() instead of the
// clock (__fire() runs them), the page's visibility is set by __hide(bool)
// (both report whether the page began to reload), sessionStorage
// "loads" counts the page's loads and __leaving is set when the page
// starts to reload or leave.
const refreshHarness = `(function () {
  localStorage.setItem("cohort-console-refresh", "1");
  sessionStorage.setItem("loads", String(Number(sessionStorage.getItem("loads") || 0) + 1));
  var timers = {}, next = 1;
  window.setTimeout = function (fn) { timers[next] = fn; return next++; };
  window.clearTimeout = function (id) { delete timers[id]; };
  window.__fire = function () {
    var due = timers; timers = {};
    Object.keys(due).forEach(function (id) { due[id](); });
    return window.__leaving;
  };
  window.__leaving = false;
  // The Navigation API's navigate event fires as a reload starts, before
  // location.reload() returns.
  window.navigation.addEventListener("navigate", function () { window.__leaving = true; });
  var hidden = false;
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get: function () { return hidden; } });
  Object.defineProperty(Document.prototype, "visibilityState", { configurable: true, get: function () { return hidden ? "hidden" : "visible"; } });
  window.__hide = function (h) { hidden = h; document.dispatchEvent(new Event("visibilitychange")); return window.__leaving; };
}());`

// TestAutoRefreshLeavesTheOperatorAlone: with "refresh every 5 s" on, the
// page reloads when it is due and the operator is only reading it; it does
// not reload under an operator who is choosing a filter (the choice would
// be lost: the form comes back as served) or has keyboard focus in the
// page, nor while the tab is hidden (a background tab reloaded every 5 s,
// two logins and a description of up to 1,000 groups each time, for as
// long as it stayed open); it reloads when the tab is shown again.
func TestAutoRefreshLeavesTheOperatorAlone(t *testing.T) {
	_, base := nodeWithGroup(t, "g1", "t1", 1)
	b := newBrowser(t, t.Context(), chromiumPath(t), artifactDir(t), true)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: refreshHarness}); err != nil {
		t.Fatal(err)
	}
	eval := func(js string) any {
		t.Helper()
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	loads := func() int {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem("loads")`))
		if err != nil {
			return -1 // between two documents
		}
		n := 0
		for _, c := range v {
			n = n*10 + int(c-'0')
		}
		return n
	}
	// reloads runs js (__fire() or __hide()) and reports whether the page
	// began to reload; if it did, it waits for the new page.
	reloads := func(js string) bool {
		t.Helper()
		before := loads()
		// One evaluation: the new page may be there by the next.
		if eval(js) != true {
			return false
		}
		if !testwait.Until(20*time.Second, func() bool { return loads() == before+1 && eval(`document.readyState`) == "complete" }) {
			t.Fatalf("the page began to reload but never loaded again")
		}
		return true
	}
	fire := func() bool { t.Helper(); return reloads(`window.__fire()`) }

	b.html(base)
	if !fire() {
		t.Fatal("a page that is only being read did not reload when the refresh was due")
	}

	// The operator picks a state with the keyboard and has not applied it.
	if err := chromedp.Do(b.ctx, chromedp.Focus(`select[name="state"]`), chromedp.KeyEvent("S")); err != nil { // type-ahead: Stable
		t.Fatal(err)
	}
	chosen := eval(`document.querySelector('select[name="state"]').value`)
	if chosen != "Stable" {
		t.Fatalf("typing S in the state list chose %q, want Stable", chosen)
	}
	if fire() {
		t.Errorf("the page reloaded while the operator was choosing a filter: the choice %q is lost (the form shows %q)", chosen, eval(`document.querySelector('select[name="state"]').value`))
	}

	// Keyboard focus on a link of the page.
	b.html(base)
	eval(`document.querySelector('#groups a').focus(); 1`)
	if fire() {
		t.Errorf("the page reloaded under the keyboard focus of the operator (focus is back at the top: %v)", eval(`document.activeElement.tagName`))
	} else if eval(`document.getElementById("refresh-paused").hidden`) != false {
		t.Errorf("the page does not say that its refresh is paused")
	}
	// Focus gone, the refresh resumes.
	eval(`document.activeElement.blur(); 1`)
	if !fire() {
		t.Errorf("the page did not reload once the operator left it alone")
	}

	// A hidden tab is not reloaded; shown again, it is.
	b.html(base)
	if reloads(`window.__hide(true)`) || fire() {
		t.Errorf("a hidden tab reloaded")
	}
	if !reloads(`window.__hide(false)`) {
		t.Errorf("the tab, shown again after its refresh was due, did not reload")
	}
	b.noErrors()
}
