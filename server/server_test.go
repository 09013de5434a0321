package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/internal/testwait"
)

func TestSupportedAPIsTable(t *testing.T) {
	// The advertised set is a product decision (see the package's brief):
	// exactly these keys and ranges.
	want := map[int16][2]int16{
		18: {0, 5}, 3: {0, 13}, 10: {0, 6}, 11: {0, 9}, 14: {0, 5}, 12: {0, 4}, 13: {0, 5},
		8: {2, 10}, 9: {1, 10}, 15: {0, 6}, 16: {0, 5}, 42: {0, 3}, 47: {0, 0}, 19: {0, 7},
		20: {0, 6}, 37: {0, 3}, 32: {0, 4},
		17: {0, 1}, 36: {0, 2}, 29: {0, 3}, 30: {0, 3}, 31: {0, 3}, 50: {0, 0}, 51: {0, 0},
		0: {3, 13}, 1: {4, 18}, 2: {0, 11}, 23: {0, 4}, // data plane (dataplane.go)
		60: {0, 2},             // DescribeCluster (describecluster.go)
		33: {0, 2}, 44: {0, 1}, // AlterConfigs, IncrementalAlterConfigs (alterconfigs.go)
		74: {0, 1},             // ListConfigResources (listconfigresources.go)
		48: {0, 1},             // DescribeClientQuotas (clientquotas.go)
		68: {0, 1}, 69: {0, 1}, // the consumer group protocol (KIP-848)
	}
	apis := SupportedAPIs()
	if len(apis) != len(want) {
		t.Fatalf("%d APIs advertised, want %d", len(apis), len(want))
	}
	for i, a := range apis {
		if i > 0 && apis[i-1].Key >= a.Key {
			t.Errorf("table not sorted by key at %d", a.Key)
		}
		w, ok := want[a.Key]
		if !ok || w != [2]int16{a.Min, a.Max} {
			t.Errorf("key %d (%s) advertised %d-%d, want %v (present %v)", a.Key, a.Name, a.Min, a.Max, w, ok)
		}
		req := kmsg.RequestForKey(a.Key)
		if req == nil || req.MaxVersion() < a.Max {
			t.Errorf("kmsg cannot encode %s up to v%d", a.Name, a.Max)
		}
		if kmsg.NameForKey(a.Key) != a.Name {
			t.Errorf("key %d named %q, kmsg says %q", a.Key, a.Name, kmsg.NameForKey(a.Key))
		}
	}
	apis[0].Max = 99
	if SupportedAPIs()[0].Max == 99 {
		t.Error("SupportedAPIs returns the table itself, not a copy")
	}
}

func checkAPIKeys(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	var got []APIVersions
	for _, k := range keys {
		got = append(got, APIVersions{Key: k.ApiKey, Name: kmsg.NameForKey(k.ApiKey), Min: k.MinVersion, Max: k.MaxVersion})
	}
	if !reflect.DeepEqual(got, SupportedAPIs()) {
		t.Fatalf("advertised %v, want %v", got, SupportedAPIs())
	}
}

func TestApiVersionsWithKgo(t *testing.T) {
	ts := startServer(t)
	cl := ts.kgoClient(t)
	// kgo asks for the highest version kmsg knows (v5); after Metadata
	// its connections name the cluster and node (KIP-1242), which must
	// match this node's for kgo to work at all.
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.Version != 5 {
		t.Fatalf("error %d at v%d, want 0 at v5", resp.ErrorCode, resp.Version)
	}
	checkAPIKeys(t, resp.ApiKeys)
}

func TestApiVersionsEveryVersionRaw(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		checkAPIKeys(t, resp.ApiKeys)
	}
}

// TestApiVersionsV5NamesClusterAndNode: KIP-1242. A v5 request naming
// neither cluster nor node (a bootstrap connection), or naming this node of
// this cluster, gets the API list; naming another cluster or another node
// is REBOOTSTRAP_REQUIRED and naming only one of the two INVALID_REQUEST,
// both without a list.
func TestApiVersionsV5NamesClusterAndNode(t *testing.T) {
	ts := startServer(t) // node 0 of "test-cluster"
	c := ts.dial(t)
	for _, tc := range []struct {
		name    string
		cluster *string
		node    int32
		want    int16
	}{
		{"neither", nil, -1, 0},
		{"this node", kmsg.StringPtr("test-cluster"), 0, 0},
		{"another node", kmsg.StringPtr("test-cluster"), 3, 129},
		{"another cluster", kmsg.StringPtr("other"), 0, 129},
		{"cluster only", kmsg.StringPtr("test-cluster"), -1, 42},
		{"node only", nil, 0, 42},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(5)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		req.ClusterID, req.NodeID = tc.cluster, tc.node
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != tc.want {
			t.Fatalf("%s: error %d, want %d", tc.name, resp.ErrorCode, tc.want)
		}
		if tc.want == 0 {
			checkAPIKeys(t, resp.ApiKeys)
		} else if len(resp.ApiKeys) != 0 {
			t.Fatalf("%s: an API list with error %d", tc.name, resp.ErrorCode)
		}
	}
}

func TestApiVersionsUnsupportedVersionAnswersV0(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for _, v := range []int16{6, 127, -1} {
		// The body is garbage on purpose: Kafka does not parse it.
		c.writeRaw(frame(18, v, 99, "future-client", []byte{0xde, 0xad}))
		corr, body, err := c.recvFrame()
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse() // v0
		if err := resp.ReadFrom(body); err != nil || corr != 99 {
			t.Fatalf("v%d: corr %d, decode at v0: %v", v, corr, err)
		}
		if resp.ErrorCode != 35 {
			t.Fatalf("v%d: error %d, want 35 UNSUPPORTED_VERSION", v, resp.ErrorCode)
		}
		// As Kafka (KIP-511): only ApiVersions' own range, which is all
		// the client needs to ask again.
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion < 3 {
			t.Fatalf("v%d: keys %+v, want ApiVersions' range alone", v, resp.ApiKeys)
		}
	}
}

func createTopic(t *testing.T, c *catalog.Catalog, name string, n int32, racks [][]string) catalog.Topic {
	t.Helper()
	tp, err := c.Create(name, n, racks)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestMetadataEveryVersion(t *testing.T) {
	ts := startServer(t)
	cat := ts.srv.Catalog()
	createTopic(t, cat, "orders", 3, nil)
	createTopic(t, cat, "audit", 1, nil)
	self := ts.topo.Self()
	c := ts.dial(t)
	for v := int16(0); v <= lookupAPI(keyMetadata).Max; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			// All topics: v0 with an empty list, v1+ with null.
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			if v == 0 {
				req.Topics = []kmsg.MetadataRequestTopic{}
			}
			req.AllowAutoTopicCreation = true // must not create anything
			resp := c.roundTrip(req).(*kmsg.MetadataResponse)
			if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 0 || resp.Brokers[0].Host != self.Host || resp.Brokers[0].Port != self.Port {
				t.Fatalf("brokers %+v, want the node itself %+v", resp.Brokers, self)
			}
			if v >= 1 && resp.ControllerID != 0 {
				t.Errorf("controller %d", resp.ControllerID)
			}
			if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "test-cluster") {
				t.Errorf("cluster id %v", resp.ClusterID)
			}
			if resp.ErrorCode != 0 { // v13+ (KIP-1102): only REBOOTSTRAP_REQUIRED would go here
				t.Errorf("top-level error %d", resp.ErrorCode)
			}
			var names []string
			for _, tp := range resp.Topics {
				names = append(names, *tp.Topic)
				if tp.ErrorCode != 0 {
					t.Errorf("%s: error %d", *tp.Topic, tp.ErrorCode)
				}
				want, _ := cat.Lookup(*tp.Topic)
				if int32(len(tp.Partitions)) != want.Partitions {
					t.Errorf("%s: %d partitions, want %d", *tp.Topic, len(tp.Partitions), want.Partitions)
				}
				for i, p := range tp.Partitions {
					if p.Partition != int32(i) || p.Leader != 0 || !slices.Equal(p.Replicas, []int32{0}) || !slices.Equal(p.ISR, []int32{0}) || p.ErrorCode != 0 {
						t.Errorf("%s[%d] = %+v", *tp.Topic, i, p)
					}
				}
				if v >= 10 && tp.TopicID != want.ID {
					t.Errorf("%s: topic id %x, want %x", *tp.Topic, tp.TopicID, want.ID)
				}
			}
			if strings.Join(names, ",") != "audit,orders" {
				t.Fatalf("topics %v, want audit,orders", names)
			}

			if v == 0 {
				return
			}
			// Named topics, one unknown; v1+ empty list = no topics.
			req = kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			for _, n := range []string{"orders", "ghost", "orders"} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(n)
				req.Topics = append(req.Topics, rt)
			}
			req.AllowAutoTopicCreation = true
			resp = c.roundTrip(req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "orders" || resp.Topics[0].ErrorCode != 0 ||
				*resp.Topics[1].Topic != "ghost" || resp.Topics[1].ErrorCode != 3 {
				t.Fatalf("named request answered %+v", resp.Topics)
			}
			if _, ok := cat.Lookup("ghost"); ok {
				t.Fatal("Metadata auto-created a topic")
			}
			req = kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			req.Topics = []kmsg.MetadataRequestTopic{}
			if resp = c.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
				t.Fatalf("empty topic list (v%d) answered %d topics", v, len(resp.Topics))
			}
		})
	}
}

func TestMetadataByTopicID(t *testing.T) {
	ts := startServer(t)
	orders := createTopic(t, ts.srv.Catalog(), "orders", 2, nil)
	c := ts.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, id := range [][16]byte{orders.ID, {1, 2, 3}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "orders" || len(got.Partitions) != 2 {
		t.Errorf("by id: %+v", got)
	}
	if got := resp.Topics[1]; got.ErrorCode != 100 || got.TopicID != ([16]byte{1, 2, 3}) {
		t.Errorf("unknown id: error %d id %x, want 100 UNKNOWN_TOPIC_ID", got.ErrorCode, got.TopicID)
	}
}

func TestMetadataRacks(t *testing.T) {
	ra, rb := "rack-a", "rack-b"
	topo := &fakeTopology{
		brokers: []Broker{{NodeID: 1, Host: "h1", Port: 1, Rack: &ra}, {NodeID: 2, Host: "h2", Port: 2, Rack: &rb}, {NodeID: 3, Host: "h3", Port: 3, Rack: &rb}},
	}
	ts := startServer(t, func(c *Config) { c.Topology = topo })
	createTopic(t, ts.srv.Catalog(), "racked", 4, [][]string{{"rack-b"}, {"rack-a", "rack-b"}, {"nowhere"}, nil})
	resp := ts.dial(t).roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	var got [][]int32
	for _, p := range resp.Topics[0].Partitions {
		got = append(got, p.Replicas)
		if p.Leader != p.Replicas[0] {
			t.Errorf("partition %d: leader %d not first replica %v", p.Partition, p.Leader, p.Replicas)
		}
	}
	// rack-b → broker 2 (first in rack-b); rack-a,rack-b → 1,2; unknown
	// rack and no rack → the default leader (first broker).
	if want := [][]int32{{2}, {1, 2}, {1}, {1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("replicas %v, want %v", got, want)
	}
}

// fakeTopology is a multi-node topology; groups named "unowned*" have no
// coordinator.
type fakeTopology struct{ brokers []Broker }

func (f *fakeTopology) ClusterID() string   { return "fake" }
func (f *fakeTopology) NodeID() int32       { return f.brokers[0].NodeID }
func (f *fakeTopology) ControllerID() int32 { return f.brokers[0].NodeID }
func (f *fakeTopology) Brokers() []Broker   { return f.brokers }
func (f *fakeTopology) Coordinator(g string) (Broker, int16) {
	if strings.HasPrefix(g, "unowned") {
		return Broker{}, 15
	}
	return f.brokers[len(g)%len(f.brokers)], 0
}

func TestFindCoordinatorEveryVersion(t *testing.T) {
	topo := &fakeTopology{brokers: []Broker{{NodeID: 1, Host: "h1", Port: 9001}, {NodeID: 2, Host: "h2", Port: 9002}}}
	ts := startServer(t, func(c *Config) { c.Topology = topo })
	c := ts.dial(t)
	type want struct {
		code int16
		node int32
	}
	cases := []struct {
		key     string
		keyType int8
		minV    int16
		want    func(v int16) want
	}{
		{"g1", 0, 0, func(int16) want { return want{0, 1} }},  // len 2 % 2 brokers → brokers[0]
		{"grp", 0, 0, func(int16) want { return want{0, 2} }}, // len 3 % 2 → brokers[1]
		{"unowned", 0, 0, func(int16) want { return want{15, -1} }},
		// No transaction coordinator, share groups off: INVALID_REQUEST,
		// which fails a transactional producer at once.
		{"txn", 1, 1, func(int16) want { return want{42, -1} }},
		{"share", 2, 1, func(v int16) want { return want{42, -1} }},
		{"bogus", 9, 1, func(int16) want { return want{42, -1} }},
	}
	for v := int16(0); v <= 6; v++ {
		for _, tc := range cases {
			if v < tc.minV {
				continue
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(v)
			req.CoordinatorType = tc.keyType
			if v < 4 {
				req.CoordinatorKey = tc.key
			} else {
				req.CoordinatorKeys = []string{tc.key}
			}
			resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
			var code int16
			var node, port int32
			var host string
			if v < 4 {
				code, node, host, port = resp.ErrorCode, resp.NodeID, resp.Host, resp.Port
			} else {
				if len(resp.Coordinators) != 1 || resp.Coordinators[0].Key != tc.key {
					t.Fatalf("v%d %q: coordinators %+v", v, tc.key, resp.Coordinators)
				}
				rc := resp.Coordinators[0]
				code, node, host, port = rc.ErrorCode, rc.NodeID, rc.Host, rc.Port
			}
			w := tc.want(v)
			if code != w.code || node != w.node {
				t.Errorf("v%d key %q type %d: error %d node %d, want error %d node %d", v, tc.key, tc.keyType, code, node, w.code, w.node)
			}
			if code != 0 && (host != "" || port != -1) {
				t.Errorf("v%d key %q: error node has host %q port %d", v, tc.key, host, port)
			}
			if code == 0 && (host != fmt.Sprintf("h%d", node) || port != 9000+node) {
				t.Errorf("v%d key %q: node %d at %s:%d", v, tc.key, node, host, port)
			}
		}
	}
	// Batched (v4+): answers in request order, each with its own error.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(6)
	req.CoordinatorKeys = []string{"a", "unowned-x", "bb"}
	resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	var got []string
	for _, rc := range resp.Coordinators {
		got = append(got, fmt.Sprintf("%s:%d:%d", rc.Key, rc.ErrorCode, rc.NodeID))
	}
	if want := "a:0:2,unowned-x:15:-1,bb:0:1"; strings.Join(got, ",") != want {
		t.Fatalf("batched answer %v, want %s", got, want)
	}
}

func TestGroupRequestReachesGroupsWithKgo(t *testing.T) {
	ts := startServer(t)
	cl := ts.kgoClient(t)
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 27
	resp, err := req.RequestWith(testCtx(t), cl) // kgo finds the coordinator first
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 27 {
		t.Fatalf("heartbeat error %d, want the fake's 27", resp.ErrorCode)
	}
	calls := ts.groups.snapshot()
	if len(calls) != 1 {
		t.Fatalf("Groups saw %d calls, want 1", len(calls))
	}
	got := calls[0]
	if got.key != 12 || got.version != 4 || got.client.ID != "kgo-test" || got.client.Host != "127.0.0.1" {
		t.Fatalf("Groups saw %+v, want Heartbeat v4 from kgo-test@127.0.0.1", got)
	}
	if hb := got.req.(*kmsg.HeartbeatRequest); hb.Group != "g" || hb.MemberID != "m" {
		t.Fatalf("decoded heartbeat %+v", hb)
	}
}

func TestGroupRequestsFlexibleAndNot(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	// JoinGroup is flexible from v6, Heartbeat from v4, OffsetDelete never.
	for _, v := range []int16{0, 5, 6, 9} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(v)
		req.Group, req.ProtocolType = fmt.Sprintf("join-v%d", v), "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1, 2, 3}}}
		resp := c.roundTrip(req).(*kmsg.JoinGroupResponse)
		if resp.MemberID != "member-of-"+req.Group {
			t.Fatalf("v%d: member id %q", v, resp.MemberID)
		}
	}
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(v)
		req.Generation = 27
		if resp := c.roundTrip(req).(*kmsg.HeartbeatResponse); resp.ErrorCode != 27 {
			t.Fatalf("heartbeat v%d: error %d", v, resp.ErrorCode)
		}
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	c.roundTrip(od)
	var got []string
	for _, cl := range ts.groups.snapshot() {
		got = append(got, fmt.Sprintf("%d/%d/%s", cl.key, cl.version, cl.client.ID))
		if jg, ok := cl.req.(*kmsg.JoinGroupRequest); ok && !slices.Equal(jg.Protocols[0].Metadata, []byte{1, 2, 3}) {
			t.Errorf("join v%d metadata %v", cl.version, jg.Protocols[0].Metadata)
		}
	}
	want := "11/0/raw,11/5/raw,11/6/raw,11/9/raw,12/0/raw,12/1/raw,12/2/raw,12/3/raw,12/4/raw,47/0/raw"
	if strings.Join(got, ",") != want {
		t.Fatalf("Groups saw %v, want %s", got, want)
	}
}

func TestNullClientID(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(0)
	body := req.AppendTo(nil)
	f := frame(12, 0, 5, "", body)
	// Replace the empty client id (length 0) by a null one (length -1).
	f[12], f[13] = 0xff, 0xff
	c.writeRaw(f)
	c.recv(req, 5)
	calls := ts.groups.snapshot()
	if len(calls) != 1 || calls[0].client.ID != "" {
		t.Fatalf("calls %+v", calls)
	}
}

func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "park"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Generation = 27
	c.send(join, 1)
	c.send(hb, 2)
	<-ts.groups.parked
	// While the join is parked the heartbeat must not be answered (nor
	// even handed to Groups: one request at a time per connection).
	c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := c.recvFrame(); err == nil {
		t.Fatal("a response arrived while the first request was parked")
	}
	if n := len(ts.groups.snapshot()); n != 1 {
		t.Fatalf("Groups saw %d requests while the first was parked, want 1", n)
	}
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	close(ts.groups.release)
	if r := c.recv(join, 1).(*kmsg.JoinGroupResponse); r.MemberID != "member-of-park" {
		t.Fatalf("first response %+v", r)
	}
	if r := c.recv(hb, 2).(*kmsg.HeartbeatResponse); r.ErrorCode != 27 {
		t.Fatalf("second response %+v", r)
	}
}

func TestHangUpCancelsParkedRequest(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "park"
	c.send(join, 1)
	<-ts.groups.parked
	c.nc.Close()
	select {
	case <-ts.groups.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the connection did not cancel the parked request's context")
	}
}

// TestHangUpWatchRearmed runs the hang-up watch at once (the default waits
// hangupWatchDelay first): a watch that ran while a request was parked gives
// the reader back with the pipelined request's bytes intact and the read
// deadline cleared, and the next parked request on the connection is
// watched again.
func TestHangUpWatchRearmed(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.hangupWatchDelay = time.Nanosecond })
	released := make(chan struct{})
	ts.groups.hook = func(ctx context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		resp := req.ResponseKind()
		if j, ok := req.(*kmsg.JoinGroupRequest); ok {
			resp.(*kmsg.JoinGroupResponse).MemberID = "member-of-" + j.Group
			ts.groups.parked <- struct{}{}
			select {
			case <-released:
				released = make(chan struct{}) // the next join parks again
			case <-ctx.Done():
				ts.groups.cancelled <- struct{}{}
				return nil, ctx.Err()
			}
		}
		return resp, nil
	}
	c := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "g"
	hb := kmsg.NewPtrHeartbeatRequest()
	c.send(join, 1)
	c.send(hb, 2) // pipelined: the watch finds these bytes
	<-ts.groups.parked
	time.Sleep(50 * time.Millisecond) // lets the watch reach its read (not needed for the outcome)
	close(released)
	if r := c.recv(join, 1).(*kmsg.JoinGroupResponse); r.ErrorCode != 0 || r.MemberID != "member-of-g" {
		t.Fatalf("first join answered %+v", r)
	}
	if r := c.recv(hb, 2).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("pipelined heartbeat answered %+v", r)
	}
	c.send(join, 3)
	<-ts.groups.parked
	c.nc.Close()
	select {
	case <-ts.groups.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("a hang-up during the connection's second parked request was not noticed")
	}
}

func TestCloseCancelsParkedRequestAndReturns(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "park"
	c.send(join, 1)
	<-ts.groups.parked
	closed := make(chan error, 1)
	go func() { closed <- ts.srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a request was parked")
	}
	select {
	case <-ts.groups.cancelled:
	default:
		t.Fatal("Close returned before the parked request's context was cancelled")
	}
	c.expectClosed()
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Fatal("server still accepting after Close")
	}
}

func TestServeStopsWithContext(t *testing.T) {
	srv, err := New(Config{Listen: "127.0.0.1:0", Groups: newFakeGroups(), Topology: SingleNode(Broker{}, "c"), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrServerClosed) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}

func TestServeListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Groups: newFakeGroups(), Topology: SingleNode(Broker{}, "c"), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeListener(context.Background(), ln)
	defer srv.Close()
	ts := &testServer{srv: srv, addr: ln.Addr().String()}
	resp := ts.dial(t).roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	checkAPIKeys(t, resp.ApiKeys)
	// Answered, so the server is serving ln.
	if srv.Addr().String() != ln.Addr().String() {
		t.Fatalf("Addr %v, want %v", srv.Addr(), ln.Addr())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	topo := SingleNode(Broker{}, "c")
	for _, cfg := range []Config{
		{Topology: topo},
		{Groups: newFakeGroups()},
		{Groups: newFakeGroups(), Topology: topo, MaxFrameBytes: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, withRegistry(reg))
	c := ts.dial(t)
	for i := 0; i < 3; i++ {
		c.roundTrip(kmsg.NewPtrHeartbeatRequest())
	}
	c.roundTrip(kmsg.NewPtrMetadataRequest())
	bad := ts.dial(t)
	bad.writeRaw(frame(12, 99, 1, "x", nil))
	bad.expectClosed()

	count := func(name, label, value string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == label && l.GetValue() == value {
						if m.Counter != nil {
							return m.Counter.GetValue()
						}
						return float64(m.Histogram.GetSampleCount())
					}
				}
			}
		}
		return 0
	}
	if got := count("cohort_server_requests_total", "api", "Heartbeat"); got != 3 {
		t.Errorf("Heartbeat requests %v, want 3", got)
	}
	// A request is counted after its response is written, so the client
	// can read the Metadata response first: wait (bounded) for its sample.
	var got float64
	testwait.Until(5*time.Second, func() bool {
		got = count("cohort_server_request_duration_seconds", "api", "Metadata")
		return got != 0
	})
	if got != 1 {
		t.Errorf("Metadata latency samples %v, want 1", got)
	}
	if got := count("cohort_server_protocol_errors_total", "reason", "unsupported_version"); got != 1 {
		t.Errorf("protocol errors %v, want 1", got)
	}
	if g := gauge(t, reg, "cohort_server_connections"); g != 1 && g != 2 { // c, and maybe the bad one
		t.Errorf("connections gauge %v with one live connection", g)
	}
	ts.srv.Close() // waits for every connection goroutine
	if g := gauge(t, reg, "cohort_server_connections"); g != 0 {
		t.Errorf("connections gauge %v after Close, want 0", g)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].Gauge.GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestShutdownLetsParkedRequestAnswer(t *testing.T) {
	ts := startServer(t)
	ts.groups.hook = func(ctx context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		ts.groups.parked <- struct{}{}
		<-ctx.Done() // parked until shutdown, then answered like a coordinator moving away
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = 16 // NOT_COORDINATOR
		return resp, nil
	}
	c := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "g"
	c.send(join, 1)
	c.send(kmsg.NewPtrHeartbeatRequest(), 2) // queued behind the join: never handled
	<-ts.groups.parked
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if r := c.recv(join, 1).(*kmsg.JoinGroupResponse); r.ErrorCode != 16 {
		t.Fatalf("parked join answered %d, want 16", r.ErrorCode)
	}
	c.expectClosed()
	if n := len(ts.groups.snapshot()); n != 1 {
		t.Fatalf("Groups saw %d requests, want only the join", n)
	}
}

func TestShutdownDeadlineClosesStuckConnections(t *testing.T) {
	ts := startServer(t)
	stuck := make(chan struct{})
	defer close(stuck)
	ts.groups.hook = func(ctx context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		ts.groups.parked <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c := ts.dial(t)
	c.send(kmsg.NewPtrHeartbeatRequest(), 1)
	<-ts.groups.parked
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	c.expectClosed()
}

// TestReusedFrameBufferKeepsRequestBytes: heartbeat, commit and fetch frames
// are read into a reused buffer; requests whose decoded form points into
// their frame (JoinGroup protocol metadata, SyncGroup assignments) must keep
// their bytes when later requests arrive on the same connection, and keep
// no more than their own frame.
func TestReusedFrameBufferKeepsRequestBytes(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	meta := bytes.Repeat([]byte("M"), 64)
	assignment := bytes.Repeat([]byte("A"), 64)
	for round := range 3 {
		join := kmsg.NewPtrJoinGroupRequest()
		join.Version = 5
		join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", append([]byte(nil), meta...)
		join.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		c.roundTrip(join)
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = 3
		sync.Group, sync.MemberID, sync.Generation = "g", "m", 1
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = "m", append([]byte(nil), assignment...)
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{a}
		c.roundTrip(sync)
		// Frames of the same size as the join and sync, different bytes.
		for i := range 4 {
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Version = 3
			hb.Group, hb.MemberID = strings.Repeat("x", 100+i), strings.Repeat("y", 100)
			c.roundTrip(hb)
			commit := kmsg.NewPtrOffsetCommitRequest()
			commit.Version = 7
			commit.Group, commit.Generation = strings.Repeat("z", 90), -1
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = strings.Repeat("t", 60)
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Offset = int64(i)
			tp.Partitions = []kmsg.OffsetCommitRequestTopicPartition{pp}
			commit.Topics = []kmsg.OffsetCommitRequestTopic{tp}
			c.roundTrip(commit)
		}
		calls := ts.groups.snapshot()
		var joins, syncs int
		for _, cl := range calls {
			switch r := cl.req.(type) {
			case *kmsg.JoinGroupRequest:
				joins++
				if !bytes.Equal(r.Protocols[0].Metadata, meta) {
					t.Fatalf("round %d: JoinGroup metadata changed after later requests: %q", round, r.Protocols[0].Metadata)
				}
			case *kmsg.SyncGroupRequest:
				syncs++
				if !bytes.Equal(r.GroupAssignment[0].MemberAssignment, assignment) {
					t.Fatalf("round %d: SyncGroup assignment changed after later requests: %q", round, r.GroupAssignment[0].MemberAssignment)
				}
				// A group keeps the assignment, hence its frame: the frame
				// is the request's own size, not a 4 KiB reusable buffer.
				if c := cap(r.GroupAssignment[0].MemberAssignment); c > 256 {
					t.Fatalf("round %d: the kept assignment holds a buffer of %d bytes", round, c)
				}
			case *kmsg.HeartbeatRequest:
				if !strings.HasPrefix(r.Group, "xxx") || r.MemberID != strings.Repeat("y", 100) {
					t.Fatalf("round %d: heartbeat fields changed: %q %q", round, r.Group, r.MemberID)
				}
			}
		}
		if joins != round+1 || syncs != round+1 {
			t.Fatalf("saw %d joins and %d syncs, want %d", joins, syncs, round+1)
		}
	}
}

// TestApiVersionsFeatures: ApiVersions v3+ reports the finalized feature
// group.version 1 (the consumer group protocol is on), as Kafka 4 does;
// older versions have no feature fields.
func TestApiVersionsFeatures(t *testing.T) {
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := apiVersions(&request{key: 18, version: v, req: req}, SingleNode(Broker{NodeID: 1}, "c")).(*kmsg.ApiVersionsResponse)
		if v < 3 {
			continue // no feature fields before v3
		}
		decoded := kmsg.NewPtrApiVersionsResponse()
		decoded.Version = v
		if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, f := range decoded.FinalizedFeatures {
			if f.Name == "group.version" && f.MaxVersionLevel >= 1 {
				ok = true
			}
		}
		if !ok || decoded.FinalizedFeaturesEpoch < 0 {
			t.Fatalf("v%d: finalized features %+v epoch %d", v, decoded.FinalizedFeatures, decoded.FinalizedFeaturesEpoch)
		}
		// Below v4 a supported range starting at 0 is left out, as Kafka
		// does: Java clients 3.3-3.7 send v3 and refuse a minimum of 0.
		// From v4 group.version is supported from 0 to 1.
		var group *kmsg.ApiVersionsResponseSupportedFeature
		for i, f := range decoded.SupportedFeatures {
			if f.MinVersion < 1 && v < 4 {
				t.Fatalf("v%d: supported feature %+v starts at 0", v, f)
			}
			if f.Name == "group.version" {
				group = &decoded.SupportedFeatures[i]
			}
		}
		if v >= 4 && (group == nil || group.MinVersion != 0 || group.MaxVersion != 1) {
			t.Fatalf("v%d: supported features %+v, want group.version 0-1", v, decoded.SupportedFeatures)
		}
	}
}

// Metadata for a topic whose name no topic can have is
// INVALID_TOPIC_EXCEPTION, as Kafka answers it, so that a client fails
// instead of waiting for the topic; a valid missing name is
// UNKNOWN_TOPIC_OR_PARTITION. (cohort answered 3 for both.)
func TestMetadataInvalidTopicName(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for _, v := range []int16{1, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		for _, n := range []string{"bad/name", "..", "ok-but-missing"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		want := []int16{17, 17, 3}
		for i, tp := range resp.Topics {
			if tp.ErrorCode != want[i] {
				t.Errorf("v%d %q: error %d, want %d", v, *tp.Topic, tp.ErrorCode, want[i])
			}
		}
	}
}

// Without an authorizer, Metadata's authorized operations (when asked for)
// are every operation Kafka defines for the resource, as Kafka answers them.
// (cohort answered them as omitted.)
func TestMetadataAuthorizedOpsWithoutAuthorizer(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "t", 1, nil)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(10)
	req.IncludeTopicAuthorizedOperations = true
	req.IncludeClusterAuthorizedOperations = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := ts.dial(t).roundTrip(req).(*kmsg.MetadataResponse)
	if ops := resp.Topics[0].AuthorizedOperations; ops != 3576 { // READ…ALTER_CONFIGS, as Kafka's
		t.Errorf("topic authorized operations %d, want 3576", ops)
	}
	if ops := resp.AuthorizedOperations; ops != 8096 { // CREATE…IDEMPOTENT_WRITE
		t.Errorf("cluster authorized operations %d, want 8096", ops)
	}
}

// A DeleteTopics naming a topic twice, or (v6+) an entry with both a name
// and an ID, or neither, is INVALID_REQUEST for those entries and deletes
// nothing of them, as Kafka. (cohort deleted the topic at the first entry and
// answered the second UNKNOWN_TOPIC_OR_PARTITION; with both, the name won.)
func TestDeleteTopicsDuplicate(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "d", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(5)
	req.TopicNames = []string{"d", "d"}
	resp := ts.dial(t).roundTrip(req).(*kmsg.DeleteTopicsResponse)
	for _, r := range resp.Topics {
		if r.ErrorCode != 42 {
			t.Errorf("%s: error %d, want 42", *r.Topic, r.ErrorCode)
		}
	}
	if _, ok := ts.srv.Catalog().Lookup("d"); !ok {
		t.Error("d was deleted")
	}
}

func TestDeleteTopicsNameAndID(t *testing.T) {
	ts := startServer(t)
	a := createTopic(t, ts.srv.Catalog(), "a", 1, nil)
	createTopic(t, ts.srv.Catalog(), "b", 1, nil)
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr("b"), a.ID // name b, id of a
	neither := kmsg.NewDeleteTopicsRequestTopic()
	resp := ts.dial(t).roundTrip(delReq(6, both, neither)).(*kmsg.DeleteTopicsResponse)
	for i, r := range resp.Topics {
		if r.ErrorCode != 42 {
			t.Errorf("entry %d: error %d, want 42", i, r.ErrorCode)
		}
	}
	if _, ok := ts.srv.Catalog().Lookup("b"); !ok {
		t.Error("b was deleted")
	}
}

func delReq(v int16, ts ...kmsg.DeleteTopicsRequestTopic) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.SetVersion(v)
	r.Topics = ts
	return r
}

// An ApiVersions v3+ whose client software name or version is not a word of
// letters, digits, '-' and '.' (starting and ending with a letter or digit)
// is answered INVALID_REQUEST without the API list, as Kafka validates it;
// the connection stays usable. (cohort accepted anything.)
func TestApiVersionsValidatesClientSoftware(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for _, tc := range []struct {
		name, version string
		ok            bool
	}{
		{"franz-go", "v1.18.0", true},
		{"apache-kafka-java", "3.9.0", true},
		{"a", "1", true},
		{"", "1", false},
		{"kgo", "", false},
		{"-kgo", "1", false},
		{"kgo.", "1", false},
		{"my client", "1", false},
		{"kgo", "1.0+build", false},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.version
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if got := resp.ErrorCode == 0; got != tc.ok {
			t.Errorf("%q %q: error %d", tc.name, tc.version, resp.ErrorCode)
		}
		if !tc.ok && (resp.ErrorCode != errInvalidRequest || len(resp.ApiKeys) != 0) {
			t.Errorf("%q %q: error %d with %d API keys, want 42 and none", tc.name, tc.version, resp.ErrorCode, len(resp.ApiKeys))
		}
	}
	// v0-2 carry no software fields: nothing to check.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(2)
	if resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("v2: error %d", resp.ErrorCode)
	}
}

// A FindCoordinator for a transaction key says why it fails: a
// transactional producer reports the message (Java's raises it at once).
func TestFindCoordinatorTransactionMessage(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorType, req.CoordinatorKeys = coordinatorTransaction, []string{"tx"}
	rc := c.roundTrip(req).(*kmsg.FindCoordinatorResponse).Coordinators[0]
	if rc.ErrorCode != errInvalidRequest || rc.ErrorMessage == nil || !strings.Contains(*rc.ErrorMessage, "no transaction coordinator") {
		t.Fatalf("%+v", rc)
	}
}
