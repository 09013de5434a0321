package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestEtcdKeepAliveAuthenticatesOnce: against an etcd with authentication,
// renewing the lease does not log the node in again each time. Every new
// etcd stream costs an Authenticate (a bcrypt check of the password and a
// raft write on etcd, and a new token that etcd keeps in memory until its
// --auth-token-ttl), and a keepalive that opened a stream of its own did so
// every TTL/3 for as long as the node ran. The keepalives share one stream;
// when etcd drops the node's tokens (here: authentication turned off and on,
// as a restart of etcd does too) the next keepalive opens a new stream, logs
// in again and succeeds; a lease that is gone is still ErrLeaseNotFound.
func TestEtcdKeepAliveAuthenticatesOnce(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	const prefix, pass = "/keepalive-auth/", "ka-pass"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass})
	var logins atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Auth/Authenticate" {
			logins.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "cohort", Password: pass, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
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
	renew := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			kctx, kcancel := context.WithTimeout(ctx, 5*time.Second)
			ttl, err := ls.KeepAlive(kctx, id)
			kcancel()
			if err != nil || ttl != 10*time.Second {
				t.Fatalf("keepalive %d: ttl %v, %v", i, ttl, err)
			}
		}
	}
	before := logins.Load()
	renew(20)
	if n := logins.Load() - before; n > 1 {
		t.Fatalf("20 keepalives logged in to etcd %d times, want at most once", n)
	}

	// etcd forgets every token: the stream's is no longer valid.
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
	before = logins.Load()
	renew(5)
	if n := logins.Load() - before; n < 1 || n > 2 {
		t.Fatalf("5 keepalives after etcd dropped the tokens logged in %d times, want once (twice at most)", n)
	}

	if err := ls.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.KeepAlive(ctx, id); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("keepalive of a revoked lease: %v, want ErrLeaseNotFound", err)
	}
}
