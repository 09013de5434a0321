package console

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
)

// TestBrowserQuietMember: a consumer-protocol member that stops
// heartbeating (a hung process), on a live node whose clock is fake. 30 s
// into its 45 s session the group page, read in headless Chromium, marks
// its row quiet, shows "30s ago of 45s" and that its session timeout
// evicts it in 15 s; the member that heartbeated 3 s ago is not marked.
// Once its session has run out and the same client joins again with a new
// member id, the timeline's entry of that join names the member evicted.
func TestBrowserQuietMember(t *testing.T) {
	testwait.WallClock(t, "headless Chromium")
	path := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTestBound)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC))
	n := startNode(t, false, func(c *node.Config) { c.Clock = clk })
	cl := kafkaClient(t, n, false)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	g := newHandConsumers(ctx, t, cl, "quiet-app", "work")
	g.join("alive-member-0001")
	g.join("hung-member-00001")
	g.converge()
	clk.Advance(27 * time.Second)
	g.beat("alive-member-0001")
	clk.Advance(3 * time.Second)

	b := newBrowser(t, ctx, path, artifactDir(t), true)
	b.html("http://" + n.HTTPAddr() + "/console/groups/quiet-app")
	hung, alive := `#members tr[data-member="hung-member-00001"]`, `#members tr[data-member="alive-member-0001"]`
	if cls, _ := b.query(hung, `function (e) { return e.className; }`).(string); cls != "quiet" {
		b.screenshot("quiet")
		t.Errorf("the hung member's row has class %q, want quiet", cls)
	}
	if got := b.text(hung + " td.heard"); !strings.HasPrefix(got, "30s ago of 45s") || !strings.Contains(got, "evicts it in 15s unless it heartbeats") {
		t.Errorf("the hung member's last-heard cell reads %q", got)
	}
	if got := b.text(hung + " td"); !strings.Contains(got, "quiet") {
		t.Errorf("the hung member's first cell reads %q, without the quiet tag", got)
	}
	if cls, _ := b.query(alive, `function (e) { return e.className; }`).(string); cls != "" {
		t.Errorf("the member heard 3 s ago has class %q", cls)
	}
	if got := b.text(alive + " td.heard"); got != "3s ago of 45s" {
		t.Errorf("the live member's last-heard cell reads %q", got)
	}

	// The hung member's session runs out at 45 s; the same client (every
	// hand member here is one client id on one host) joins again 3 s
	// later with a new member id: the timeline links the join to the
	// eviction.
	g.beat("alive-member-0001")
	clk.Advance(15 * time.Second)
	url := "http://" + n.HTTPAddr() + "/console/groups/quiet-app"
	// The node fences it when its loop sees the timer fire: wait for that
	// before the clock moves on, or the fence is dated later.
	b.until("the hung member evicted", url, func(h string) bool {
		return !strings.Contains(h, `data-member="hung-member-00001"`)
	})
	g.ids = slices.DeleteFunc(g.ids, func(id string) bool { return id == "hung-member-00001" })
	clk.Advance(3 * time.Second)
	g.join("back-member-00001")
	g.converge()
	b.until("the rejoin on the timeline", url, func(h string) bool {
		return strings.Contains(h, "(back-member-00001)")
	})
	if got := b.text(`#timeline > li`); !strings.Contains(got, "back-member-00001") ||
		!strings.Contains(got, "rejoined after the eviction of hung-member-00001 (session timeout) 3s earlier") {
		t.Errorf("the newest timeline entry reads %q", got)
	}
	b.noErrors()
}

// TestMemberLastHeardCell: the cell of a classic member parked in
// JoinGroup, of a member heard 22.5 s ago of 45 s (exactly half: not
// quiet), and of a node that does not send the tag.
func TestMemberLastHeardCell(t *testing.T) {
	for _, c := range []struct {
		heard *group.LastHeard
		text  string
		quiet bool
	}{
		{&group.LastHeard{Session: 10 * time.Second, Parked: true}, "parked of 10s", false},
		{&group.LastHeard{Silent: 22500 * time.Millisecond, Session: 45 * time.Second}, "22.5s ago of 45s", false},
		{&group.LastHeard{Silent: 22600 * time.Millisecond, Session: 45 * time.Second}, "22.6s ago of 45s", true},
		{nil, "—", false},
	} {
		m := Member{ID: "m", Heard: c.heard}
		if m.HeardText() != c.text || m.Quiet() != c.quiet {
			t.Errorf("%+v: %q quiet %v, want %q quiet %v", c.heard, m.HeardText(), m.Quiet(), c.text, c.quiet)
		}
	}
}
