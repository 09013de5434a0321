package main

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUnreachable: only failures to connect count (a node that is down),
// also inside kadm's per-broker errors; an answer, even an error, does not.
func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dial, true},
		{errors.Join(errors.New("unable to dial"), dial), true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: dial}, {Err: dial}}}, true},
		{&kadm.ShardErrors{Errs: []kadm.ShardError{{Err: dial}, {Err: errors.New("GROUP_AUTHORIZATION_FAILED")}}}, false},
		{&net.OpError{Op: "read", Err: errors.New("reset")}, false},
		{context.DeadlineExceeded, false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestUntilReachable: an operation that cannot connect is run again until
// it can, within the context; at the context's end the connection failure
// is returned, not the context's error; any other result ends it at once.
func TestUntilReachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	v, err := untilReachable(ctx, func() (int, error) {
		if calls++; calls < 3 {
			return 0, dial
		}
		return 42, nil
	})
	if v != 42 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls", v, err, calls)
	}
	calls = 0
	answer := errors.New("GROUP_ID_NOT_FOUND")
	if _, err := untilReachable(ctx, func() (int, error) { calls++; return 0, answer }); err != answer || calls != 1 {
		t.Fatalf("an answer was retried: %v, %d calls", err, calls)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	if _, err := untilReachable(short, func() (int, error) { return 0, dial }); err != dial {
		t.Fatalf("at the deadline: %v, want the dial error", err)
	}
}

// TestDescribeWaitsForTheCoordinator: a group's coordinator that refuses
// connections for a while (a node that died, until its partitions move) is
// asked again until it answers, within --timeout.
func TestDescribeWaitsForTheCoordinator(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	commit(t, n.Addr(), "orders", "events", map[int32]int64{0: 5})
	var dials, refused atomic.Int32
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			// The first connection (the seed broker's) works; the next
			// three dials, the coordinator's, are refused.
			if i := dials.Add(1); i >= 2 && i <= 4 {
				refused.Add(1)
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := describeGroups(ctx, cl, []string{"orders"})
	if err != nil || len(gs) != 1 || gs[0].Group != "orders" {
		t.Fatalf("describe: %v %+v", err, gs)
	}
	if refused.Load() < 3 {
		t.Fatalf("the coordinator was refused %d times: the test did not exercise the retry", refused.Load())
	}
}
