package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/testchild"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// chromiumPath finds the browser: the Debian package's chromium (installed
// by .ci/run). Under CI=true a missing browser fails the test; elsewhere
// it skips with a message saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (CI=true: the browser test must run); .ci/run installs the Debian package chromium")
	}
	t.Skip("chromium is not installed; apt-get install -y chromium to run the browser test")
	return ""
}

// artifactDir is where screenshots go: $COHORT_ARTIFACTS, else a directory
// under the system temporary directory; the path is logged.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("COHORT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "cohort-artifacts")
	}
	dir = filepath.Join(dir, "console", t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browserTestBound bounds a whole browser test. TestBrowserDuringRebalance
// takes 20 s on an idle 2-core machine and went past 60 s on a loaded one
// (other test binaries and CPU burners): the bound is there to end a hung
// test, not to time it.
const browserTestBound = 4 * time.Minute

// browser is one headless Chromium tab with the errors it reported.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	mu   sync.Mutex
	errs []string
}

// newBrowser starts Chromium; scripts false disables JavaScript in the tab.
func newBrowser(t *testing.T, ctx context.Context, path, dir string, scripts bool) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	b := &browser{t: t, ctx: bctx, dir: dir}
	// Console starts the browser and subscribes before any page loads:
	// calls of console.error, uncaught exceptions and browser log errors
	// (a refused script or style, a failed load) are all recorded.
	msgs := chromedp.Console(bctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				b.mu.Lock()
				b.errs = append(b.errs, m.String()+" "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	if !scripts {
		if _, err := chromedp.Call(bctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatalf("disabling scripts: %v", err)
		}
	}
	return b
}

// html loads url and returns the page's HTML as the browser built it.
func (b *browser) html(url string) string {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("loading %s: %v", url, err)
	}
	// One evaluation in the loaded document, not a DOM query (see query).
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		b.t.Fatalf("reading %s: %v", url, err)
	}
	return s
}

// The helpers below find elements by evaluating in the page, never by a
// chromedp DOM query (Text, OuterHTML, Focus, SendKeys, Click...). A query
// runs on node ids that chromedp keeps for the document, and chromedp
// refreshes them on its own goroutine when the browser reports a new
// document: it asks for the document again, and that makes the browser drop
// every node id handed out before. On a loaded machine that refresh can
// still be pending when a navigation has returned, and lands between a
// query and its read: "No node with given id found" (seen in CI, in html
// right after a reload). An evaluation finds and reads the element in one
// step in the document loaded now.

// query evaluates fn, a JavaScript function of one element, on the element
// matching sel and returns what fn returns; no element matching sel fails
// the test.
func (b *browser) query(sel, fn string) any {
	b.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]any](
		`(function (e) { return e ? [(`+fn+`)(e)] : []; }(document.querySelector(`+string(q)+`)))`))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	if len(v) == 0 {
		b.screenshot("missing")
		b.t.Fatalf("no element matches %s on %s", sel, b.location())
	}
	return v[0]
}

// text is what a person reads in the element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, _ := b.query(sel, `function (e) { return e.innerText; }`).(string)
	return strings.Join(strings.Fields(s), " ")
}

// outerHTML is the HTML of the element matching sel.
func (b *browser) outerHTML(sel string) string {
	b.t.Helper()
	s, _ := b.query(sel, `function (e) { return e.outerHTML; }`).(string)
	return s
}

// focus gives the keyboard focus to the element matching sel, as a
// person tabbing to it; keys then go to it (chromedp.KeyEvent).
func (b *browser) focus(sel string) {
	b.t.Helper()
	if b.query(sel, `function (e) { e.focus(); return document.activeElement === e; }`) != true {
		b.t.Fatalf("%s does not take the keyboard focus", sel)
	}
}

// clickAt is a left click in the middle of the element matching sel,
// scrolled into view, as the mouse of a person does it.
func (b *browser) clickAt(sel string) chromedp.Action[chromedp.Void] {
	b.t.Helper()
	xy, _ := b.query(sel, `function (e) {
		e.scrollIntoView({block: "center", inline: "center"});
		var r = e.getBoundingClientRect();
		return r.width > 0 && r.height > 0 ? [r.left + r.width / 2, r.top + r.height / 2] : null;
	}`).([]any)
	if len(xy) != 2 {
		b.t.Fatalf("%s is not visible: nothing to click", sel)
	}
	x, _ := xy[0].(float64)
	y, _ := xy[1].(float64)
	return chromedp.MouseClickXY(x, y)
}

// location is the address the tab shows, or why it cannot be read.
func (b *browser) location() string {
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		return "(location: " + err.Error() + ")"
	}
	return loc
}

// until reloads url until ok accepts the page's HTML, for at most 20 s.
func (b *browser) until(what, url string, ok func(html string) bool) string {
	b.t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		h := b.html(url)
		if ok(h) {
			return h
		}
		select {
		case <-deadline.C:
			b.screenshot("timeout")
			b.t.Fatalf("waiting for %s on %s: none in 20s; last page:\n%s", what, url, h)
		case <-tick.C:
		}
	}
}

// search types query into the groups page's search box at base, as a
// person does, and submits the form (Enter, or the Apply button);
// it returns the address the browser then shows.
func (b *browser) search(base, query string, enter bool) string {
	b.t.Helper()
	b.html(base)
	// The page is loaded: the keys go to the box with the focus, and a
	// submit that loads no page fails in a minute, not when the test's
	// context ends. A minute, not less: typing the 276 characters of
	// TestBrowserSearchBoxLength is over 800 key events, and took more
	// than 10 s on a loaded 2-core machine.
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	b.focus(`form.filter input[name="q"]`)
	var submit chromedp.Action[chromedp.Void]
	if enter {
		submit = chromedp.KeyEvent(query + "\r")
	} else {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(query)); err != nil {
			b.t.Fatalf("typing %q: %v", query, err)
		}
		submit = b.clickAt(`form.filter button[type="submit"]`)
	}
	if _, err := chromedp.RunResponse(ctx, submit); err != nil {
		b.t.Fatalf("searching %q: %v", query, err)
	}
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

func (b *browser) noErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser reported an error: %s", e)
	}
}

// TestBrowserDuringRebalance drives headless Chromium against a live node
// while a group of three franz-go consumers rebalances: one consumer is a
// child process that is SIGKILLed (it never leaves), and one survivor holds
// the rebalance open in its revoke callback until the test has looked. A
// person sees the group Stable with 3 members, then PreparingRebalance
// after the kill, then Stable with the 2 survivors holding all 6
// partitions; the same pages are read with scripts disabled, and neither
// tab reports an error.
func TestBrowserDuringRebalance(t *testing.T) {
	testwait.WallClock(t, "headless Chromium during a live rebalance")
	path := chromiumPath(t)
	dir := artifactDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTestBound)
	defer cancel()
	n := startNode(t, false)
	adm := kadm.NewClient(kafkaClient(t, n, false))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	// A group the search below must leave out.
	commit(ctx, t, adm, "other-app", "events", 1)
	const grp = "web-app"
	// The victim: a child process with a short session.
	child, out := testchild.Start(t, childEnv+"="+strings.Join([]string{n.Addr(), grp, "events", "victim", "1500ms"}, ","))
	// The survivors: long sessions so only the victim expires; "slow"
	// holds the next rebalance open until release is closed.
	release := make(chan struct{})
	var releaseOnce sync.Once
	var armed atomic.Bool // hold only the rebalance that follows the kill
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	for _, id := range []string{"fast", "slow"} {
		opts := []kgo.Opt{kgo.ConsumerGroup(grp), kgo.ConsumeTopics("events"), kgo.ClientID(id),
			kgo.SessionTimeout(30 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
			kgo.Balancers(kgo.RangeBalancer())}
		if id == "slow" {
			opts = append(opts, kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {
				if !armed.Load() {
					return
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}))
		}
		cl := kafkaClient(t, n, false, opts...)
		go func() {
			for ctx.Err() == nil {
				if cl.PollFetches(ctx).IsClientClosed() {
					return
				}
			}
		}()
	}
	go func() {
		for out.Scan() {
			t.Logf("victim: %s", out.Text())
		}
	}()

	js := newBrowser(t, ctx, path, dir, true)
	nojs := newBrowser(t, ctx, path, dir, false)
	base := "http://" + n.HTTPAddr() + "/console/"
	groupURL := base + "groups/" + grp

	// 1. Three members, Stable.
	stable3 := js.until("3 members, Stable", groupURL, func(h string) bool {
		return strings.Contains(h, `id="state">Stable<`) && strings.Contains(h, `id="member-count">3<`)
	})
	if got := js.text("#state"); got != "Stable" {
		t.Errorf("state reads %q", got)
	}
	for _, id := range []string{"victim", "fast", "slow"} {
		if !strings.Contains(js.text("#members"), id) {
			t.Errorf("members table lacks client %s", id)
		}
	}
	js.screenshot("1-group-stable-3-members")
	victimParts := regexp.MustCompile(`(?s)<td>victim</td>.*?<b>events</b> ([0-9,]+)`).FindStringSubmatch(stable3)
	if victimParts == nil {
		t.Fatalf("the victim's assignment is not on the page:\n%s", stable3)
	}
	js.html(base)
	row := js.text(`#groups tr[data-group="` + grp + `"]`)
	if !strings.Contains(row, "Stable") || !strings.Contains(row, " 3 ") {
		t.Errorf("groups page row: %q, want Stable with 3 members", row)
	}
	js.screenshot("1-groups-stable")

	// 2. SIGKILL the victim: its session expires, the group rebalances and
	// "slow" holds it open.
	armed.Store(true)
	child.Kill()
	js.until("PreparingRebalance", groupURL, func(h string) bool {
		return strings.Contains(h, `id="state">PreparingRebalance<`)
	})
	js.screenshot("2-group-rebalancing")
	// What the rebalance waits for, and what started it: the kill.
	if w := js.text("#waiting"); !strings.Contains(w, "slow") || !strings.Contains(w, "join") {
		t.Errorf("during the rebalance the page should say it waits for slow to join; it reads %q", w)
	}
	if p := js.text("#in-progress"); !strings.Contains(p, "session timeout") || !strings.Contains(p, "victim") {
		t.Errorf("during the rebalance the page should say the victim's session timeout started it; it reads %q", p)
	}
	if m := js.text("#members"); strings.Contains(m, "victim") {
		t.Errorf("the killed member is still listed during the rebalance: %q", m)
	}
	h := nojs.html(groupURL)
	if !strings.Contains(h, `id="state">PreparingRebalance<`) {
		t.Errorf("without scripts, the group page does not show PreparingRebalance:\n%s", h)
	}
	nojs.screenshot("2-group-rebalancing-noscript")
	js.html(base + "?state=PreparingRebalance")
	if row := js.text(`#groups tr[data-group="` + grp + `"]`); !strings.Contains(row, "PreparingRebalance") {
		t.Errorf("groups page filtered on PreparingRebalance: %q", row)
	}
	js.screenshot("2-groups-rebalancing")

	// 3. Release: Stable with the two survivors holding all 6 partitions.
	releaseOnce.Do(func() { close(release) })
	js.until("Stable with 2 members", groupURL, func(h string) bool {
		return strings.Contains(h, `id="state">Stable<`) && strings.Contains(h, `id="member-count">2<`) &&
			strings.Count(h, "<b>events</b>") == 2
	})
	members := js.text("#members")
	if !strings.Contains(members, "fast") || !strings.Contains(members, "slow") || strings.Contains(members, "victim") {
		t.Errorf("members after the rebalance: %q", members)
	}
	js.screenshot("3-group-stable-2-members")
	checkTimeline(t, js, groupURL, "victim", strings.Split(victimParts[1], ","))
	js.screenshot("3-group-timeline")

	// The same pages without scripts: everything is in the HTML, and the
	// script-made refresh control is absent.
	for _, u := range []string{base, groupURL, base + "topics", base + "?state=Stable&sort=members&desc=1"} {
		h := nojs.html(u)
		if strings.Contains(h, `id="auto-refresh"`) {
			t.Errorf("%s: the refresh control exists with scripts disabled", u)
		}
		if !strings.Contains(h, grp) && !strings.Contains(u, "topics") {
			t.Errorf("%s without scripts lacks the group:\n%s", u, h)
		}
	}
	if !strings.Contains(nojs.html(groupURL), `id="member-count">2<`) {
		t.Errorf("without scripts, the group page does not show 2 members")
	}
	nojs.screenshot("3-group-noscript")
	// Search: a part of the id typed into the form finds the group and
	// leaves the other out, with scripts and without; the address keeps
	// the search, so it can be pasted, and opens the same list.
	for _, tab := range []struct {
		b     *browser
		name  string
		enter bool
	}{{js, "4-groups-search", true}, {nojs, "4-groups-search-noscript", false}} {
		loc := tab.b.search(base, "eb-ap", tab.enter)
		if !strings.Contains(loc, "q=eb-ap") {
			t.Errorf("%s: after the search the address is %s, without the query", tab.name, loc)
		}
		rows := tab.b.text("#groups tbody")
		if !strings.Contains(rows, grp) || strings.Contains(rows, "other-app") {
			t.Errorf("%s: rows after searching eb-ap: %q, want %s only", tab.name, rows, grp)
		}
		if c := tab.b.text("#count"); c != "1 of 2 groups match" {
			t.Errorf("%s: the count reads %q", tab.name, c)
		}
		tab.b.screenshot(tab.name)
		if h := tab.b.html(loc); !strings.Contains(h, `value="eb-ap"`) || strings.Contains(h, "other-app") {
			t.Errorf("%s: the pasted address %s does not show the search", tab.name, loc)
		}
	}
	if !strings.Contains(js.html(groupURL), `id="auto-refresh"`) {
		t.Errorf("with scripts, the progressive refresh control is missing (script blocked?)")
	}
	js.noErrors()
	nojs.noErrors()
}

// TestBrowserSearchBoxLength: a person types more multi-byte characters
// into the search box than its maxlength lets in; Chromium keeps the first
// maxSearchLen units (an emoji is two) and the console accepts what it
// sends: the search of maxSearchLen three-byte characters finds the group
// of that id, and the one of emoji is no 400 either.
func TestBrowserSearchBoxLength(t *testing.T) {
	testwait.WallClock(t, "headless Chromium")
	path := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTestBound)
	defer cancel()
	cjk := strings.Repeat("日", maxSearchLen)
	n, _ := nodeWithGroup(t, cjk, "t", 1)
	base := "http://" + n.HTTPAddr() + "/console/"
	b := newBrowser(t, ctx, path, artifactDir(t), false)
	for _, tc := range []struct {
		typed, want string
	}{
		{cjk + strings.Repeat("日", 20), cjk},
		{strings.Repeat("😀", maxSearchLen/2+10), strings.Repeat("😀", maxSearchLen/2)},
	} {
		loc := b.search(base, tc.typed, true)
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Query().Get("q"); got != tc.want {
			t.Fatalf("the box sent %d runes (%d bytes), want the first %d runes typed", utf8.RuneCountInString(got), len(got),
				utf8.RuneCountInString(tc.want))
		}
		resp, err := http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a search the box let through (%d bytes): %d, want 200\n%s", len(tc.want), resp.StatusCode, body)
		}
		if tc.want == cjk && !strings.Contains(string(body), "1 of 1 groups match") {
			t.Errorf("the search of %d characters does not find the group of that id", maxSearchLen)
		}
	}
	b.noErrors()
}

// TestBrowserHelpersHoldNoNodeIDs: the helpers read and act on the page
// loaded now even when every node id chromedp holds has gone stale, as
// happens when its own refresh of the document lands right after a
// navigation (see query). The test makes that happen at will: it asks the
// browser for the document itself, which drops all node ids handed out
// before and leaves chromedp's cached document stale. A helper that went
// through a chromedp DOM query would fail with "No node with given id
// found" or wait for a node until its context ends.
func TestBrowserHelpersHoldNoNodeIDs(t *testing.T) {
	testwait.WallClock(t, "headless Chromium")
	path := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTestBound)
	defer cancel()
	_, base := nodeWithGroup(t, "stale-ids", "t", 1)
	b := newBrowser(t, ctx, path, artifactDir(t), true)
	// Each step of the test gets a minute, not the test's whole bound: a
	// helper that waits on a stale node fails here, by name.
	tab := b.ctx
	step := func(what string, f func()) {
		t.Helper()
		sctx, scancel := context.WithTimeout(tab, time.Minute)
		defer scancel()
		b.ctx = sctx
		defer func() { b.ctx = tab }()
		b.html(base)
		if _, err := chromedp.Call(b.ctx, dom.GetDocument, dom.GetDocumentParams{}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		f()
	}
	step("text", func() {
		if got := b.text(`#groups tr[data-group="stale-ids"]`); !strings.Contains(got, "stale-ids") {
			t.Errorf("the group's row reads %q", got)
		}
	})
	step("outerHTML", func() {
		if got := b.outerHTML(`#groups tr[data-group="stale-ids"]`); !strings.HasPrefix(got, "<tr") || !strings.Contains(got, "stale-ids") {
			t.Errorf("the group's row is %q", got)
		}
	})
	step("focus and type", func() {
		b.focus(`select[name="state"]`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("S")); err != nil {
			t.Fatal(err)
		}
		if v, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('select[name="state"]').value`)); v != "Stable" {
			t.Errorf("typing S in the state list chose %q, want Stable", v)
		}
	})
	step("type and click", func() {
		b.focus(`form.filter input[name="q"]`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("stale")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.RunResponse(b.ctx, b.clickAt(`form.filter button[type="submit"]`)); err != nil {
			t.Fatal(err)
		}
		if loc := b.location(); !strings.Contains(loc, "q=stale") {
			t.Errorf("after typing stale and clicking Apply the address is %s", loc)
		}
	})
	b.noErrors()
}
