package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestEtcdWatchEndsWhenMemberLosesLeader: the cluster's watch of the
// registry and ownership keys ends (a batch with Err) when the etcd member it
// is connected to loses its leader, as the catalog's and the security state's
// watches do. An isolated member delivers no more events but does not close
// a watch by itself: the node's view of who lives and who owns what then
// stopped changing while its keepalives, sent through the client's other
// endpoints, kept its lease, so that partitions of a node that died were
// never taken by this one. A watch that ends is set up again, on an endpoint
// with a leader, after a fresh read.
func TestEtcdWatchEndsWhenMemberLosesLeader(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints()[:1], DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := EtcdLeases{Client: cli, Prefix: "/isolated-watch/"}
	s, err := ls.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := ls.Watch(ctx, s.Rev+1)
	// Member 0, the only one this client talks to, loses its peers.
	ec.Stop(1)
	ec.Stop(2)
	select {
	case b, ok := <-w:
		if ok && b.Err == nil {
			t.Fatalf("the watch delivered %+v, want its end", b)
		}
	case <-ctx.Done():
		t.Fatal("the watch of a member without a leader neither ended nor said so within 60s")
	}
}
