package console

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// TestConsumerMembersNotListed: the groups page shows a consumer-protocol
// group's state, member count, group epoch and assignor from the summary
// DescribeGroups gives with group.MembersTag (group.ConsumerSummaryTag), and
// sends no ConsumerGroupDescribe, which answers every member with its
// subscription, assignment and target: with groups of thousands of members
// each view of the page transferred megabytes only to count them. The
// group's own page still asks ConsumerGroupDescribe: it lists the members.
func TestConsumerMembersNotListed(t *testing.T) {
	const (
		members    = 12
		partitions = 1500
	)
	var mu sync.Mutex
	var cgds []int       // bytes of each ConsumerGroupDescribe answer
	var summaries []bool // per DescribeGroups naming cg-fat: did its entry carry the summary
	var describeBytes []int
	n := startNode(t, false, func(c *node.Config) {
		c.Tap = func(_ server.Client, req kmsg.Request, resp kmsg.Response) {
			mu.Lock()
			defer mu.Unlock()
			switch r := resp.(type) {
			case *kmsg.ConsumerGroupDescribeResponse:
				cgds = append(cgds, len(r.AppendTo(nil)))
			case *kmsg.DescribeGroupsResponse:
				for i := range r.Groups {
					if r.Groups[i].Group == "cg-fat" {
						_, ok := group.ConsumerSummaryOf(&r.Groups[i])
						summaries = append(summaries, ok)
						describeBytes = append(describeBytes, len(r.AppendTo(nil)))
					}
				}
			}
		}
	})
	take := func() (c []int, s []bool, b []int) {
		mu.Lock()
		defer mu.Unlock()
		c, s, b = cgds, summaries, describeBytes
		cgds, summaries, describeBytes = nil, nil, nil
		return c, s, b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, false)
	if _, err := kadm.NewClient(kcl).CreateTopic(ctx, partitions, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	joinConsumers(ctx, t, kcl, "cg-fat", "wide", members)

	// What a stock ConsumerGroupDescribe gets, and what the page sent
	// before for the row.
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	creq.Groups = []string{"cg-fat"}
	cresp, err := creq.RequestWith(ctx, kcl)
	if err != nil || len(cresp.Groups) != 1 || len(cresp.Groups[0].Members) != members {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, cresp)
	}
	want := cresp.Groups[0]
	full, _, _ := take()
	if len(full) != 1 {
		t.Fatalf("the tap saw %d ConsumerGroupDescribe answers, want 1", len(full))
	}

	base := "http://" + n.HTTPAddr() + "/console/"
	code, body := get(t, base, "", "")
	if code != http.StatusOK {
		t.Fatalf("groups page: %d %s", code, body)
	}
	row := regexp.MustCompile(`(?s)<tr data-group="cg-fat".*?</tr>`).FindString(body)
	for _, cell := range []string{
		fmt.Sprintf(`state-%s">%s<`, strings.ToLower(want.State), want.State),
		"<td>consumer</td>",
		fmt.Sprintf("<td>consumer / %s</td>", want.AssignorName),
		fmt.Sprintf(`<td class="num">%d</td>`, members),
		fmt.Sprintf(`<td class="num">%d</td>`, want.Epoch),
	} {
		if !strings.Contains(row, cell) {
			t.Errorf("the groups page's row of cg-fat lacks %q: %s", cell, row)
		}
	}
	got, sums, sizes := take()
	if len(got) != 0 {
		t.Errorf("the groups page sent %d ConsumerGroupDescribe (answers of %v bytes), want none", len(got), got)
	}
	if len(sums) == 0 {
		t.Fatal("the groups page did not describe cg-fat with DescribeGroups")
	}
	t.Logf("ConsumerGroupDescribe answer: %d bytes; the groups page's DescribeGroups answers: %v bytes", full[0], sizes)
	for i := range sums {
		if !sums[i] {
			t.Errorf("the groups page's DescribeGroups got no summary of cg-fat")
		}
		if sizes[i] > full[0]/4 {
			t.Errorf("the groups page's DescribeGroups answer is %d bytes, ConsumerGroupDescribe's %d", sizes[i], full[0])
		}
	}

	code, body = get(t, base+"groups/cg-fat", "", "")
	if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`<dd id="member-count">%d</dd>`, members)) {
		t.Fatalf("group page: %d, no member count %d:\n%s", code, members, body)
	}
	if got, _, _ := take(); len(got) != 1 {
		t.Errorf("the group page sent %d ConsumerGroupDescribe, want 1 (it lists the members)", len(got))
	}
}

// TestConsumerRowsWithoutSummary: a node that gives no consumer-protocol
// summary in DescribeGroups (franz-go's kfake here, as Kafka or an older
// cohort) still fills a consumer group's row, from ConsumerGroupDescribe.
func TestConsumerRowsWithoutSummary(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "jobs"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	cgds := 0
	c.ControlKey(kmsg.ConsumerGroupDescribe.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		cgds++
		mu.Unlock()
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	joinConsumers(ctx, t, cl, "jobs-app", "jobs", 3)

	rows := []GroupRow{{ID: "jobs-app", Type: "consumer", Generation: -1}}
	if err := describeRows(ctx, cl, rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if r.Err != "" || r.Members != 3 || r.Generation <= 0 || r.State == "" || r.ProtocolType != "consumer" {
		t.Errorf("the row from a node without the summary: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if cgds != 1 {
		t.Errorf("%d ConsumerGroupDescribe sent, want 1 (the fallback)", cgds)
	}
}

// joinConsumers forms consumer-protocol group grp of n members subscribed
// to topic, sending each member's heartbeats through cl, until a round of
// heartbeats changes nothing (the group converged).
func joinConsumers(ctx context.Context, t *testing.T, cl *kgo.Client, grp, topic string, n int) {
	t.Helper()
	g := newHandConsumers(ctx, t, cl, grp, topic)
	for i := range n {
		g.join(fmt.Sprintf("m-%02d", i))
	}
	g.converge()
}
