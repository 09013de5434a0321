package console

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupPageWhoseCoordinatorTheClientDoesNotKnow: a group's page whose
// coordinator, as the console's own node names it, is a node the page's
// client does not know (it joined as the page loaded, and the node kgo asked
// for brokers lags) was a 502 ("DescribeGroups at the coordinator (node 2):
// unknown broker"). It is now a 503 that names the node and asks for a
// reload. kgo is made not to know node 2 by asking it under an id no node
// has (nodeBroker), as in TestGroupsPageWithANodeTheClientDoesNotKnow.
func TestGroupPageWhoseCoordinatorTheClientDoesNotKnow(t *testing.T) {
	ns := twoNodes(t, "/console-unknown-coordinator/")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, ns[0], false))
	byNode := map[int32]string{}
	for i := 0; i < 16 && len(byNode) < 2; i++ {
		id := fmt.Sprintf("app-%d", i)
		commit(ctx, t, adm, id, "orders", 1)
		if b, code := ns[0].Cluster().Coordinator(id); code == 0 {
			byNode[b.NodeID] = id
		}
	}
	theirs, ours := byNode[2], byNode[1]
	if theirs == "" || ours == "" {
		t.Fatalf("no group on each node: %v", byNode)
	}

	clientDoesNotKnow(t, 2)
	code, body := get(t, "http://"+ns[0].HTTPAddr()+"/console/groups/"+theirs, "", "")
	if code != http.StatusServiceUnavailable {
		t.Errorf("group %s, coordinated by node 2: %d, want %d\n%s", theirs, code, http.StatusServiceUnavailable, body)
	}
	if want := "Group " + theirs + " is not shown: the coordinator of the group, node 2, joined the cluster as the page loaded"; !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
	// A group node 1 coordinates is shown as ever.
	if code, body := get(t, "http://"+ns[0].HTTPAddr()+"/console/groups/"+ours, "", ""); code != http.StatusOK || !strings.Contains(body, "<td>orders</td>") {
		t.Errorf("group %s, coordinated by node 1: %d\n%s", ours, code, body)
	}
}

// TestConsumerRowsWithoutSummaryAskTheCoordinatorOfTheSeed: on the groups
// page, a consumer-protocol group whose coordinator gives no summary (an
// older cohort) is asked ConsumerGroupDescribe; that request went by kgo's
// routing, which asks a node picked at random for the coordinator, and a
// node whose view lags names one that no longer coordinates the group. It
// is now sent to the coordinator the console's own node (the seed) names,
// as the DescribeGroups before it. Here (franz-go's kfake, which gives no
// summary) every node but the seed names the wrong node; each round is a
// new client, so kgo's pick is made afresh each time.
func TestConsumerRowsWithoutSummaryAskTheCoordinatorOfTheSeed(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(8, "jobs"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	seedHost, seedPort, _ := net.SplitHostPort(addrs[0])
	port, _ := strconv.Atoi(seedPort)
	const seed = int32(0) // kfake's first broker, addrs[0]
	grp := ""
	for i := 0; i < 100 && grp == ""; i++ {
		if id := fmt.Sprintf("jobs-app-%d", i); c.CoordinatorFor(id) != seed {
			grp = id
		}
	}
	if grp == "" {
		t.Fatal("no group id is coordinated by a node other than the seed")
	}
	coord := c.CoordinatorFor(grp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	joiner, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer joiner.Close()
	joinConsumers(ctx, t, joiner, grp, "jobs", 3)

	// From now on, every node but the seed lags: it names the seed as the
	// group's coordinator.
	var mu sync.Mutex
	var askedAt []int32 // the nodes each ConsumerGroupDescribe reached
	c.ControlKey(kmsg.FindCoordinator.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() == seed {
			return nil, nil, false
		}
		req := r.(*kmsg.FindCoordinatorRequest)
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.SetVersion(req.GetVersion())
		resp.NodeID, resp.Host, resp.Port = seed, seedHost, int32(port)
		for _, k := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.NodeID, rc.Host, rc.Port = k, seed, seedHost, int32(port)
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.ConsumerGroupDescribe.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		askedAt = append(askedAt, c.CurrentNode())
		mu.Unlock()
		return nil, nil, false
	})
	const rounds = 6
	for range rounds {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]))
		if err != nil {
			t.Fatal(err)
		}
		rows := []GroupRow{{ID: grp, Type: "consumer", Generation: -1}}
		err = describeRows(ctx, cl, rows, time.Now())
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r := rows[0]; r.Err != "" || r.Members != 3 || r.Generation <= 0 || r.ProtocolType != "consumer" {
			t.Errorf("the row of %s: %+v", grp, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(askedAt) != rounds {
		t.Errorf("%d ConsumerGroupDescribe sent in %d rounds, want one each (at %v)", len(askedAt), rounds, askedAt)
	}
	for _, n := range askedAt {
		if n != coord {
			t.Errorf("ConsumerGroupDescribe reached nodes %v, want only the coordinator, node %d", askedAt, coord)
			break
		}
	}
}
