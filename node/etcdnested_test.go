package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterNestedPrefixesIsolated: three clusters on one etcd whose
// prefixes nest and start with the names of cohort's key groups
// (/cohort/, /cohort/dev/ under its records' d, /cohort/nodes/eu/ under
// its registrations' nodes/), each with its own partition count, topic
// and committed offset under the same names. Each serves all of its own
// partitions, and only its own topic and offset, before and after all
// restart (a start reads its state back from etcd): none takes another's
// keys for its records, nodes or partition ownership.
func TestClusterNestedPrefixesIsolated(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	prefixes := []string{"/cohort/", "/cohort/dev/", "/cohort/nodes/eu/"}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(i int) *Node {
		t.Helper()
		n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "nested", Partitions: 2 + i, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefixes[i], LeaseTTL: testLeaseTTL}})
		if err != nil {
			t.Fatalf("the node of %s: %v", prefixes[i], err)
		}
		t.Cleanup(func() { n.Close() })
		testwait.For(t, 60*time.Second, fmt.Sprintf("the node of %s owning its %d partitions", prefixes[i], 2+i), func() bool {
			return len(n.Cluster().OwnedPartitions()) == 2+i
		})
		return n
	}
	check := func(ns []*Node) {
		t.Helper()
		for i, n := range ns {
			adm := kadm.NewClient(client(t, n.Addr()))
			td, err := adm.ListTopics(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if got := len(td["t"].Partitions); got != 1+i || len(td) != 1 {
				t.Errorf("%s: topic t has %d partitions (topics %v), want its own %d", prefixes[i], got, td.Names(), 1+i)
			}
			offs, err := adm.FetchOffsets(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := offs.Lookup("t", 0); !ok || o.At != int64(10*(i+1)) {
				t.Errorf("%s: group g's offset of t/0 is %+v (found %v), want its own %d", prefixes[i], o, ok, 10*(i+1))
			}
			if got := len(n.Cluster().OwnedPartitions()); got != 2+i {
				t.Errorf("%s: owns %d partitions, want its %d", prefixes[i], got, 2+i)
			}
		}
	}
	var ns []*Node
	for i := range prefixes {
		n := start(i)
		adm := kadm.NewClient(client(t, n.Addr()))
		if _, err := adm.CreateTopic(ctx, int32(1+i), 1, nil, "t"); err != nil {
			t.Fatal(err)
		}
		commitUntilOwned(ctx, t, adm, "g", "t", int64(10*(i+1)))
		ns = append(ns, n)
	}
	check(ns)
	for _, n := range ns {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ns = ns[:0]
	for i := range prefixes {
		ns = append(ns, start(i))
	}
	check(ns)
}
