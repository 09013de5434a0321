package console

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// refreshHarness runs in every page before the console's script: the
// auto-refresh is on, the script's timers wait for __fire() instead of the
// clock (__fire() runs them, __pending() counts them), the page's visibility is set by __hide(bool)
// (both report whether the page began to reload or to ask whether the
// node answers), sessionStorage "loads" counts the page's loads.
const refreshHarness = `(function () {
  localStorage.setItem("cohort-console-refresh", "1");
  sessionStorage.setItem("loads", String(Number(sessionStorage.getItem("loads") || 0) + 1));
  var timers = {}, next = 1;
  window.setTimeout = function (fn) { timers[next] = fn; return next++; };
  window.clearTimeout = function (id) { delete timers[id]; };
  window.__pending = function () { return Object.keys(timers).length; };
  var leaving = false, fetches = 0;
  // The Navigation API's navigate event fires as a reload starts, before
  // location.reload() returns.
  window.navigation.addEventListener("navigate", function () { leaving = true; });
  var realFetch = window.fetch;
  window.fetch = function () { fetches++; return realFetch.apply(this, arguments); };
  function started(f) { var before = fetches; f(); return leaving || fetches > before; }
  window.__fire = function () {
    return started(function () {
      var due = timers; timers = {};
      Object.keys(due).forEach(function (id) { due[id](); });
    });
  };
  var hidden = false;
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get: function () { return hidden; } });
  Object.defineProperty(Document.prototype, "visibilityState", { configurable: true, get: function () { return hidden ? "hidden" : "visible"; } });
  window.__hide = function (h) { return started(function () { hidden = h; document.dispatchEvent(new Event("visibilitychange")); }); };
}());`

// refreshTab is a Chromium tab running refreshHarness.
type refreshTab struct {
	*browser
	t *testing.T
}

func newRefreshTab(t *testing.T) *refreshTab {
	b := newBrowser(t, t.Context(), chromiumPath(t), artifactDir(t), true)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: refreshHarness}); err != nil {
		t.Fatal(err)
	}
	return &refreshTab{browser: b, t: t}
}

func (r *refreshTab) eval(js string) any {
	r.t.Helper()
	v, err := chromedp.Run(r.ctx, chromedp.Evaluate[any](js))
	if err != nil {
		r.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// loads is how many times the tab loaded a console page, -1 between two
// pages or on a page that is not the console's.
func (r *refreshTab) loads() int {
	v, err := chromedp.Run(r.ctx, chromedp.Evaluate[string](`sessionStorage.getItem("loads")`))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// reloads runs js (__fire() or __hide()) and reports whether the page
// began to reload (or to ask the node whether it answers, before
// reloading); if it did, it waits for the reloaded page.
func (r *refreshTab) reloads(js string) bool {
	r.t.Helper()
	before := r.loads()
	// One evaluation: the new page may be there by the next.
	if r.eval(js) != true {
		return false
	}
	if !testwait.Until(20*time.Second, func() bool { return r.loads() == before+1 && r.eval(`document.readyState`) == "complete" }) {
		r.t.Fatalf("the page began to reload but never loaded again (at %v)", r.eval(`location.href`))
	}
	return true
}

func (r *refreshTab) fire() bool { r.t.Helper(); return r.reloads(`window.__fire()`) }

// TestAutoRefreshLeavesTheOperatorAlone: with "refresh every 5 s" on, the
// page reloads when it is due and the operator is only reading it; it does
// not reload under an operator who is choosing a filter (the choice would
// be lost: the form comes back as served) or has keyboard focus in the
// page, nor while the tab is hidden (a background tab reloaded every 5 s,
// two logins and a description of up to 1,000 groups each time, for as
// long as it stayed open); it reloads when the tab is shown again.
func TestAutoRefreshLeavesTheOperatorAlone(t *testing.T) {
	_, base := nodeWithGroup(t, "g1", "t1", 1)
	r := newRefreshTab(t)
	b, eval, fire, reloads := r.browser, r.eval, r.fire, r.reloads

	b.html(base)
	if !fire() {
		t.Fatal("a page that is only being read did not reload when the refresh was due")
	}

	// The operator picks a state with the keyboard and has not applied it.
	b.focus(`select[name="state"]`)
	if err := chromedp.Do(b.ctx, chromedp.KeyEvent("S")); err != nil { // type-ahead: Stable
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

// TestAutoRefreshSurvivesANodeRestart: a refresh that falls due while the
// node does not answer (restarting, or the network cut) keeps the page
// and says since when the node does not answer; the refresh goes on, and
// the page reloads once the node answers again. Before, the tab reloaded
// into the browser's own error page: the script was gone, and the
// refresh stopped for good.
func TestAutoRefreshSurvivesANodeRestart(t *testing.T) {
	_, base := nodeWithGroup(t, "g1", "t1", 1)
	r := newRefreshTab(t)
	if _, err := chromedp.Call(r.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	r.html(base)
	offline := func(off bool) {
		t.Helper()
		// Offline: every request fails as with the node's listener
		// closed (connection refused).
		if _, err := chromedp.Call(r.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
			MatchedNetworkConditions: []*network.Conditions{{Offline: off, DownloadThroughput: -1, UploadThroughput: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	offline(true)
	r.eval(`window.__fire()`)
	var down any
	testwait.Until(20*time.Second, func() bool {
		if r.loads() != 1 {
			return true
		}
		down = r.eval(`(function (e) { return e ? !e.hidden : false; }(document.getElementById("refresh-down")))`)
		return down == true
	})
	if n := r.loads(); n != 1 {
		href, _ := chromedp.Run(r.ctx, chromedp.Evaluate[string](`location.href`))
		text, _ := chromedp.Run(r.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 80) : ""`))
		r.screenshot("node-down")
		t.Fatalf("with the node not answering, the refresh left the console page for the browser's error page (%s: %q), where no script refreshes it again", href, text)
	}
	if down != true {
		t.Fatalf("the page does not say that the node does not answer")
	}
	// Still not answering: the refresh keeps trying and keeps the page.
	r.eval(`window.__fire()`)
	if !testwait.Until(20*time.Second, func() bool { return r.eval(`window.__pending()`) == float64(1) }) {
		t.Fatal("after a second check that found the node down, no refresh is pending")
	}
	offline(false)
	if !r.fire() {
		t.Fatal("the node answers again, and the page did not reload")
	}
	if h := r.eval(`document.getElementById("refresh-down").hidden`); h != true {
		t.Errorf("the reloaded page still says the node does not answer")
	}
	// The browser logs the failed checks (net::ERR_INTERNET_DISCONNECTED);
	// nothing else.
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if !strings.Contains(e, "Failed to load resource: net::") {
			t.Errorf("browser reported an error: %s", e)
		}
	}
}
