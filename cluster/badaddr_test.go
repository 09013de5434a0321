package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/server"
)

// overwriteRegistration replaces node id's registration value in the store,
// keeping its lease, as another build or a person with etcdctl could, and
// tells the watchers.
func (m *MemLeases) overwriteRegistration(t *testing.T, id int32, info string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, ok := m.nodes[id]
	if !ok {
		t.Fatalf("node %d is not registered", id)
	}
	m.rev++
	kv.val, kv.modRev = []byte(info), m.rev
	m.nodes[id] = kv
	m.notifyLocked(WatchBatch{Nodes: []NodeKV{{ID: id, Info: []byte(info)}}})
}

// groupsOf returns, for each of the first n groups "g-0".., the node that
// holds its partition in the store.
func groupsOf(s *sim, n int) map[string]int32 {
	holders := s.mem.Holders()
	m := map[string]int32{}
	for i := 0; i < n; i++ {
		g := fmt.Sprintf("g-%d", i)
		if h, ok := holders[coordinator.PartitionFor(g, simParts)]; ok {
			m[g] = h.Node
		}
	}
	return m
}

func brokerIDs(bs []server.Broker) []int32 {
	ids := make([]int32, len(bs))
	for i, b := range bs {
		ids[i] = b.NodeID
	}
	return ids
}

// TestSimUnusableRegistrationNotAdvertised: a registration whose JSON reads
// but whose address no client can use (empty or wildcard host, port 0,
// negative or above 65535), or which cannot be read at all, keeps its node
// live — no partition moves — but the other nodes leave it out of their
// brokers and answer COORDINATOR_NOT_AVAILABLE for the groups it
// coordinates, and warn once per registration value, not at every read.
// A usable registration again brings it back.
func TestSimUnusableRegistrationNotAdvertised(t *testing.T) {
	for _, bad := range []string{
		`{"id":3,"host":"","port":9003}`,
		`{"id":3,"host":"n3","port":0}`,
		`{"id":3,"host":"n3","port":-1}`,
		`{"id":3,"host":"n3","port":65536}`,
		`{"id":3,"host":"0.0.0.0","port":9003}`,
		`{"id":3,"host":"::","port":9003}`,
		`{"id":3,"host":"n3","port":9003,"listeners":[{"name":"PLAINTEXT","host":"","port":9003}]}`,
		`{"id":3,"host":"n3","port":9003,"listeners":[{"name":"PLAINTEXT","host":"n3","port":0}]}`,
		`{"id":3,"host":"n3"`,
	} {
		t.Run(bad, func(t *testing.T) {
			s := startSim(t, 3, 3*time.Second)
			v := s.node(1)
			var logs bytes.Buffer
			v.c.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			before := s.mem.Holders()
			groups := groupsOf(s, 300)
			if !slices.Contains(slices.Collect(maps.Values(groups)), 3) {
				t.Fatal("node 3 coordinates none of the groups")
			}

			s.mem.overwriteRegistration(t, 3, bad)
			for i := 0; i < 20; i++ { // 20 reads of the registry by every node
				s.round(250 * time.Millisecond)
			}
			if got := s.mem.Holders(); !maps.EqualFunc(got, before, func(a, b Holder) bool { return a.Node == b.Node }) {
				t.Fatalf("partitions moved after node 3's registration became unusable")
			}
			if live := v.c.View().Nodes; !slices.Equal(live, []int32{1, 2, 3}) {
				t.Fatalf("node 1 sees live nodes %v, want [1 2 3]", live)
			}
			if ids := brokerIDs(v.c.Brokers()); !slices.Equal(ids, []int32{1, 2}) {
				t.Fatalf("node 1 advertises brokers %v, want [1 2]", ids)
			}
			if got := v.c.ControllerID(); got != 1 {
				t.Fatalf("controller %d, want 1", got)
			}
			for g, owner := range groups {
				b, code := v.c.Coordinator(g)
				switch {
				case owner == 3 && code != 15:
					t.Fatalf("Coordinator(%s), held by node 3: node %d %q:%d, code %d; want 15", g, b.NodeID, b.Host, b.Port, code)
				case owner != 3 && (code != 0 || b.NodeID != owner):
					t.Fatalf("Coordinator(%s), held by node %d: node %d, code %d", g, owner, b.NodeID, code)
				}
			}
			warns := strings.Count(logs.String(), "level=WARN")
			if warns != 1 || !strings.Contains(logs.String(), "node_id=3") {
				t.Fatalf("%d warnings after 20 reads of the same registration, want 1 naming node 3:\n%s", warns, logs.String())
			}

			// Another unusable value is another registration: warned again.
			s.mem.overwriteRegistration(t, 3, `{"id":3,"host":"","port":0}`)
			s.round(250 * time.Millisecond)
			if got := strings.Count(logs.String(), "level=WARN"); got != 2 {
				t.Fatalf("%d warnings after a second unusable registration, want 2:\n%s", got, logs.String())
			}

			s.mem.overwriteRegistration(t, 3, `{"id":3,"host":"n3","port":9003}`)
			s.round(250 * time.Millisecond)
			if ids := brokerIDs(v.c.Brokers()); !slices.Equal(ids, []int32{1, 2, 3}) {
				t.Fatalf("after a usable registration node 1 advertises %v, want [1 2 3]", ids)
			}
			for g, owner := range groups {
				if b, code := v.c.Coordinator(g); code != 0 || b.NodeID != owner {
					t.Fatalf("after a usable registration Coordinator(%s) = node %d code %d, want node %d", g, b.NodeID, code, owner)
				}
			}
			if !strings.Contains(logs.String(), "level=INFO") {
				t.Fatalf("no word that node 3 is advertised again:\n%s", logs.String())
			}
		})
	}
}

// TestSimUnusableListenerEndpointLeftOut: one unusable endpoint among a
// registration's listeners is left out, so clients of that listener are not
// sent to the node (as for a node without that listener), while clients of
// its other listeners are.
func TestSimUnusableListenerEndpointLeftOut(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	v := s.node(1)
	var logs bytes.Buffer
	v.c.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.mem.overwriteRegistration(t, 3, `{"id":3,"host":"n3","port":9003,"listeners":[`+
		`{"name":"PLAINTEXT","host":"n3","port":9003},{"name":"SSL","host":"n3","port":70000}]}`)
	for i := 0; i < 10; i++ {
		s.round(250 * time.Millisecond)
	}
	var n3 *server.Broker
	for _, b := range v.c.Brokers() {
		if b.NodeID == 3 {
			n3 = &b
		}
	}
	if n3 == nil {
		t.Fatal("node 3, usable on PLAINTEXT, is not advertised")
	}
	want := []server.Endpoint{{Listener: "PLAINTEXT", Host: "n3", Port: 9003}}
	if !slices.Equal(n3.Endpoints, want) {
		t.Fatalf("node 3's endpoints %v, want %v", n3.Endpoints, want)
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 || !strings.Contains(logs.String(), "SSL") {
		t.Fatalf("%d warnings, want 1 naming the SSL listener:\n%s", got, logs.String())
	}
}

// TestSimUnusableSelfNotAdvertised: a node whose own advertised address is
// unusable registers it, and the other nodes leave it out of their
// brokers; the node itself listed that address to its clients all the
// same (Brokers added its own entry whenever the registry's was missing,
// hidden included). Now it leaves itself out too, as the others do.
// (node refuses such an address at start; this is Cluster's own guard.)
func TestSimUnusableSelfNotAdvertised(t *testing.T) {
	for _, self := range []server.Broker{{Host: " ", Port: 9003}, {Host: "0.0.0.0", Port: 9003}, {Host: "n3", Port: 0}} {
		t.Run(fmt.Sprintf("%q:%d", self.Host, self.Port), func(t *testing.T) {
			s := newSim(t, 3*time.Second)
			for id := int32(1); id <= 3; id++ {
				s.add(id, 1)
			}
			s.node(3).c.SetSelf(self)
			s.settle(250*time.Millisecond, 10*time.Second)
			for id := int32(1); id <= 3; id++ {
				if ids := brokerIDs(s.node(id).c.Brokers()); !slices.Equal(ids, []int32{1, 2}) {
					t.Errorf("node %d advertises brokers %v, want [1 2] (node 3's address %q:%d is unusable)", id, ids, self.Host, self.Port)
				}
			}
		})
	}
}
