package console

import (
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestNarrowWindow: at a phone's width (360 px) no page is wider than the
// window. A wide table scrolls sideways in its own box, and a long group id
// wraps, so the header, the summary and the notes stay in view; before, the
// tables made the whole page scroll sideways, the header ended at the
// window's edge and the columns on the right were off screen.
func TestNarrowWindow(t *testing.T) {
	const id = "payments-settlement-reconciliation-consumer-group-with-a-very-long-name-0123456789abcdef"
	_, base := nodeWithGroup(t, id, "payments-settlement-events-topic-with-a-long-name", 3)
	b := newBrowser(t, t.Context(), chromiumPath(t), artifactDir(t), true)
	if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 360, Height: 740, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	for _, page := range []struct{ name, url, table string }{
		{"groups", base, "#groups"},
		{"group", base + "groups/" + id, "#offsets"},
		{"topics", base + "topics", "#topics"},
	} {
		b.html(page.url)
		w, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
		if err != nil {
			t.Fatal(err)
		}
		b.screenshot("narrow-" + page.name)
		if w[0] > w[1] {
			t.Errorf("the %s page is %d px wide in a window of %d px: it scrolls sideways as a whole", page.name, w[0], w[1])
		}
		if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("`+page.table+` tbody tr").length`)); err != nil || n == 0 {
			t.Errorf("the %s page shows no rows in %s (%v)", page.name, page.table, err)
		}
	}
	b.noErrors()
}
