package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestSecuritySyncMetrics: a cluster node whose etcd user loses read
// access to the security records alone (an etcd role narrowed by hand)
// keeps its lease and stays ready, serving the users and ACLs it read
// last; each read of them fails, and the watch is set up again every
// second. cohort_cluster_security_synced (0) and
// cohort_cluster_security_sync_failures_total (rising) tell it. With the
// access back it follows etcd again (1).
func TestSecuritySyncMetrics(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const prefix, pass = "/secsync/", "etcd-pass-51c0"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass})
	n, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL,
			Username: "cohort", Password: pass, DialTimeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.HTTPAddr()
	waitMetric(t, addr, 30*time.Second, eq(1), "cohort_cluster_security_synced")
	if v := scrapeMetrics(t, addr).value("cohort_cluster_security_sync_failures_total"); v != 0 {
		t.Fatalf("security sync failures %v on a healthy node", v)
	}

	root, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), Username: "root", Password: "root-pass",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sec := n.cl.st.RecordKey(authstate.Partition, nil)
	secEnd, end := clientv3.GetPrefixRangeEnd(sec), clientv3.GetPrefixRangeEnd(prefix)
	rw := clientv3.PermissionType(clientv3.PermReadWrite)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Everything under the prefix but the security records: the narrower
	// grants first, so that the node's own keys (lease, ownership) are
	// never unreadable, which would cost it its partitions.
	must(root.RoleGrantPermission(ctx, "prefix-rw", prefix, sec, rw))
	must(root.RoleGrantPermission(ctx, "prefix-rw", secEnd, end, rw))
	must(root.RoleRevokePermission(ctx, "prefix-rw", prefix, end))
	must(root.Put(ctx, sec+"u/SCRAM-SHA-256/someone", "changed through another node"))

	waitMetric(t, addr, 30*time.Second, eq(0), "cohort_cluster_security_synced")
	waitMetric(t, addr, 30*time.Second, above(1), "cohort_cluster_security_sync_failures_total") // it keeps failing
	// The node this test means has a valid lease and is ready (on a
	// machine stalled for longer than testLeaseTTL allows, a lease may lapse
	// and come back: wait for both),
	// and its users and ACLs still do not follow etcd.
	var code int
	var body string
	if !testwait.Until(30*time.Second, func() bool {
		code, body = httpGet(t, addr, "/readyz")
		return code == 200 && scrapeMetrics(t, addr).value("cohort_cluster_lease_valid") == 1
	}) {
		t.Fatalf("/readyz %d %q, lease valid %v: the test means a node that holds its lease and is ready", code, body,
			scrapeMetrics(t, addr).value("cohort_cluster_lease_valid"))
	}
	if v := scrapeMetrics(t, addr).value("cohort_cluster_security_synced"); v != 0 {
		t.Errorf("security synced %v, ready and with a valid lease, while every read of the state fails", v)
	}

	must(root.Delete(ctx, sec+"u/SCRAM-SHA-256/someone"))
	must(root.RoleGrantPermission(ctx, "prefix-rw", prefix, end, rw))
	waitMetric(t, addr, 30*time.Second, eq(1), "cohort_cluster_security_synced")
}
