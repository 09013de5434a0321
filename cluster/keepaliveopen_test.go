package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestEtcdKeepAliveOpeningBoundedByItsContext: a keepalive that has to open
// the keepalive stream returns when its context ends, even if opening the
// stream does not. With etcd's authentication on, the etcd client logs in
// (Authenticate) before it opens a stream, with the stream's context; the
// stream lives as long as the client, so a login that etcd does not answer
// (a member that hangs, or is slow to commit the login through raft) held
// the keepalive, and the lock every later keepalive of the node takes,
// until the client closed: the node's lease expired while a keepalive
// through a healthy member would have renewed it. Here the login hangs
// until its context ends; the keepalive's context ending must end it.
func TestEtcdKeepAliveOpeningBoundedByItsContext(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	const prefix, pass = "/keepalive-open/", "ko-pass"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass})
	var stall atomic.Bool
	stalled := make(chan struct{}, 1)
	hang := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Auth/Authenticate" && stall.Load() {
			select {
			case stalled <- struct{}{}:
			default:
			}
			<-ctx.Done() // etcd does not answer
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "cohort", Password: pass, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(hang)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := &EtcdLeases{Client: cli, Prefix: prefix}
	id, _, err := ls.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// No stream yet: this keepalive opens one, and etcd does not answer
	// the login.
	stall.Store(true)
	kctx, kcancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := ls.KeepAlive(kctx, id)
		res <- err
	}()
	select {
	case <-stalled:
	case err := <-res:
		t.Fatalf("keepalive returned %v before logging in", err)
	case <-ctx.Done():
		t.Fatal("the keepalive never logged in")
	}
	kcancel()
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("keepalive whose login never answered: no error")
		}
	case <-time.After(10 * time.Second): // a guard: it returns at once
		t.Fatal("keepalive still opening its stream 10s after its context ended")
	}

	// etcd answers again: the next keepalive opens a stream and renews.
	stall.Store(false)
	kctx, kcancel = context.WithTimeout(ctx, 5*time.Second)
	defer kcancel()
	if ttl, err := ls.KeepAlive(kctx, id); err != nil || ttl != 10*time.Second {
		t.Fatalf("keepalive after etcd answers again: ttl %v, %v", ttl, err)
	}
}
