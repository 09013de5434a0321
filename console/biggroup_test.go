package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// TestBigGroupPagesBounded: a group of many members makes neither page
// grow with it. The group page lists the first maxMemberRows members, the
// newest eventsShown rebalances (with a link to older ones), and at most
// maxListed moves, causes and members waited for per event, counting the
// rest; it asks the node for no more than that per list
// (group.HistoryListsTag). The groups page asks for no list entries at
// all: it shows only when the rebalances started. Before, both asked for
// every event whole: with 2,000 members the group page was 4.66 MB, and
// with 9,000 the groups page timed out (502).
func TestBigGroupPagesBounded(t *testing.T) {
	defer func(l, m, e int) { maxListed, maxMemberRows, eventsShown = l, m, e }(maxListed, maxMemberRows, eventsShown)
	maxListed, maxMemberRows, eventsShown = 3, 4, 2
	const members = 10
	// What each DescribeGroups of the console asked for and got.
	type described struct {
		lists   int32
		bounded bool
		docs    []*group.HistoryDoc
	}
	var mu sync.Mutex
	var seen []described
	n := startNode(t, false, func(c *node.Config) {
		c.Tap = func(_ server.Client, req kmsg.Request, resp kmsg.Response) {
			d, ok := req.(*kmsg.DescribeGroupsRequest)
			if !ok {
				return
			}
			var s described
			s.lists, s.bounded = group.HistoryListsRequested(d)
			for i := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				if doc, ok := group.HistoryTagOf(&resp.(*kmsg.DescribeGroupsResponse).Groups[i]); ok {
					s.docs = append(s.docs, doc)
				}
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, false)
	if _, err := kadm.NewClient(kcl).CreateTopic(ctx, 40, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	// Members join one by one, and the group converges after each join
	// (every member takes the assignment it is given): each join is a
	// rebalance that moves partitions of the members before it. The last
	// join is left in progress, waiting for them.
	g := newHandConsumers(ctx, t, kcl, "g-big", "big")
	for i := range members {
		g.join(fmt.Sprintf("m-%02d", i))
		if i < members-1 {
			g.converge()
		}
	}
	base := "http://" + n.HTTPAddr() + "/console/"
	take := func() []described {
		mu.Lock()
		defer mu.Unlock()
		s := seen
		seen = nil
		return s
	}

	code, body := get(t, base+"groups/g-big", "", "")
	if code != http.StatusOK {
		t.Fatalf("group page: %d %s", code, body)
	}
	if got := strings.Count(body, "<td title="); got != maxMemberRows {
		t.Errorf("members listed: %d, want %d", got, maxMemberRows)
	}
	if !strings.Contains(body, fmt.Sprintf(`<dd id="member-count">%d</dd>`, members)) || !strings.Contains(body, fmt.Sprintf("… and %d more members", members-maxMemberRows)) {
		t.Errorf("the page does not count the %d members and the %d not listed", members, members-maxMemberRows)
	}
	if got := strings.Count(body, "<li data-cause="); got != eventsShown {
		t.Errorf("events shown: %d, want %d", got, eventsShown)
	}
	if !strings.Contains(body, `id="timeline-older"`) || !strings.Contains(body, `href="/console/groups/g-big?events=4"`) {
		t.Errorf("no link to the older events")
	}
	moves := regexp.MustCompile(`(?s)<ul class="moves">(.*?)</ul>`).FindAllStringSubmatch(body, -1)
	if len(moves) == 0 {
		t.Fatalf("no moves shown:\n%s", body)
	}
	for _, m := range moves {
		if got := strings.Count(m[1], "<li>"); got > maxListed {
			t.Errorf("an event lists %d moves, want at most %d", got, maxListed)
		}
	}
	for _, want := range []string{"more members whose assignment changed", `id="waiting"`, `<li class="omitted">… and `} {
		if !strings.Contains(body, want) {
			t.Errorf("group page lacks %q", want)
		}
	}
	for _, d := range take() {
		if !d.bounded || d.lists != int32(maxListed) {
			t.Errorf("the group page's DescribeGroups bounds the lists to %d (%v), want %d", d.lists, d.bounded, maxListed)
		}
		for _, doc := range d.docs {
			for _, e := range doc.History {
				if len(e.Members) > maxListed || len(e.WaitedFor) > maxListed {
					t.Errorf("event %d came with %d members and %d waits, want at most %d", e.Seq, len(e.Members), len(e.WaitedFor), maxListed)
				}
			}
		}
	}
	if _, body := get(t, base+"groups/g-big?events=4", "", ""); strings.Count(body, "<li data-cause=") != 4 {
		t.Errorf("?events=4 shows %d events", strings.Count(body, "<li data-cause="))
	}
	take()

	code, body = get(t, base, "", "")
	if code != http.StatusOK || !strings.Contains(body, `data-group="g-big"`) {
		t.Fatalf("groups page: %d %s", code, body)
	}
	omitted := 0
	for _, d := range take() {
		if !d.bounded || d.lists != 0 {
			t.Errorf("the groups page's DescribeGroups bounds the lists to %d (%v), want 0", d.lists, d.bounded)
		}
		for _, doc := range d.docs {
			if len(doc.History) < 4 {
				t.Errorf("the groups page got %d events, want every one kept (it counts those of the last hour)", len(doc.History))
			}
			for _, e := range doc.History {
				if len(e.Members)+len(e.WaitedFor)+len(e.MoreCauses)+len(e.Evicted) > 0 {
					t.Errorf("the groups page got event %d with its lists", e.Seq)
				}
				if e.Omitted != nil {
					omitted += e.Omitted.Members
				}
			}
			if doc.Waiting != nil && len(doc.Waiting.Members) > 0 {
				t.Errorf("the groups page got the %d members waited for", len(doc.Waiting.Members))
			}
		}
	}
	if omitted == 0 {
		t.Errorf("the events sent to the groups page count no member left out")
	}
}
