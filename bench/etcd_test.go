package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// cohort-etcd: one cohort node in cluster mode on a three-member etcd
// cluster started in this process (every commit is an etcd transaction
// replicated to a quorum and fsynced). Opt-in only: it is added when
// COHORT_BENCH_TARGETS names it, e.g.
//
//	COHORT_BENCH=1 COHORT_BENCH_TARGETS=cohort-disk,cohort-etcd COHORT_BENCH_ONLY=commit go test -run TestCompare -v ./bench/
//
// cohort-etcd-multi is the same with ClusterConfig.MultiAppend (the batches
// of all partitions packed into shared transactions).
func init() {
	for _, name := range []string{"cohort-etcd", "cohort-etcd-multi"} {
		if strings.Contains(","+os.Getenv("COHORT_BENCH_TARGETS")+",", ","+name+",") {
			multi := name == "cohort-etcd-multi"
			targets = append(targets, target{name, func(t *testing.T) (string, func()) { return startCohortEtcd(t, multi) }})
		}
	}
}

func startCohortEtcd(t *testing.T, multi bool) (string, func()) {
	ec := etcdtest.Start(t, 3)
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{
		Listen: "127.0.0.1:0", NodeID: 1, Group: cfg,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), LeaseTTL: 10 * time.Second, MultiAppend: multi},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !n.Cluster().Settled() {
		select {
		case <-n.Cluster().Changed():
		case <-ctx.Done():
			n.Close()
			t.Fatal("cohort on etcd did not take its partitions in 30s")
		}
	}
	return n.Addr(), func() { n.Close() }
}
