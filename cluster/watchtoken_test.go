package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestEtcdWatchAfterTokensDropped: against an etcd with authentication, a
// watch set up while another of the node's watches is running is accepted
// after etcd has stopped accepting the token the node logged in with when
// the running one started (here etcd drops every token, as when
// authentication is turned off and on; a token unused for --auth-token-ttl
// expires the same way). The etcd client would add it to the running watch's
// stream, whose token etcd then refuses; each watch has a stream of its own
// (internal/etcdwatch).
func TestEtcdWatchAfterTokensDropped(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	const prefix, pass = "/watch-token/", "wt-pass"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass})
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "cohort", Password: pass})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := &EtcdLeases{Client: cli, Prefix: prefix}
	s, err := ls.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := ls.Watch(ctx, s.Rev+1)
	// The running watch must be in place before etcd drops the tokens: its
	// two etcd watches are created asynchronously, and one created while
	// authentication is off and on again is refused ("user name is empty",
	// as the CI run that found this race showed). A watch that delivered an
	// event has been created on etcd, so register node 6 and take partition
	// 0, and wait for both.
	lease6, _, err := ls.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ls.Register(ctx, 6, []byte("{}"), lease6); err != nil || !ok {
		t.Fatalf("register 6: %v %v", ok, err)
	}
	if _, ok, err := ls.Acquire(ctx, 0, 6, lease6); err != nil || !ok {
		t.Fatalf("acquire 0: %v %v", ok, err)
	}
	for sawNode, sawOwner := false, false; !sawNode || !sawOwner; {
		select {
		case b, ok := <-running:
			if !ok || b.Err != nil {
				t.Fatalf("the running watch ended before etcd dropped the tokens: %+v (open %v)", b, ok)
			}
			sawNode = sawNode || len(b.Nodes) > 0
			sawOwner = sawOwner || len(b.Owners) > 0
		case <-ctx.Done():
			t.Fatal("the running watch delivered neither node 6's registration nor partition 0's owner")
		}
	}

	root, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "root", Password: "root-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.AuthDisable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}

	// As the cluster does: read again, then watch from there.
	s, err = ls.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again := ls.Watch(ctx, s.Rev+1)
	lease, _, err := ls.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ls.Register(ctx, 7, []byte("{}"), lease); err != nil || !ok {
		t.Fatalf("register: %v %v", ok, err)
	}
	for name, w := range map[string]<-chan WatchBatch{"the watch set up again": again, "the running watch": running} {
		select {
		case b, ok := <-w:
			if !ok || b.Err != nil || len(b.Nodes) != 1 || b.Nodes[0].ID != 7 {
				t.Errorf("%s delivered %+v (open %v), want node 7's registration", name, b, ok)
			}
		case <-ctx.Done():
			t.Fatalf("%s delivered nothing", name)
		}
	}
}
