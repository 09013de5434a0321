package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// failingMem is an in-memory store that can be made to fail for good, as
// disk.Store does after a failed write or sync (Failed, Err), refusing
// appends from then on.
type failingMem struct {
	store.Store
	failed chan struct{}
	err    error
}

func (f *failingMem) Failed() <-chan struct{} { return f.failed }

func (f *failingMem) Err() error {
	select {
	case <-f.failed:
		return f.err
	default:
		return nil
	}
}

func (f *failingMem) Append(ctx context.Context, p int32, recs []store.Record) error {
	if err := f.Err(); err != nil {
		return err
	}
	return f.Store.Append(ctx, p, recs)
}

// TestStoreFailureStopsNode checks that a node whose store fails for good
// reports it through Wait (so that cohort serve exits non-zero and a
// supervisor restarts it) instead of serving on and refusing every write,
// and that a node whose store does not fail reports no such thing on Close.
func TestStoreFailureStopsNode(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelError}))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	start := func(st store.Store) *Node {
		return startLoaded(t, Config{Listen: "127.0.0.1:0", Store: st, Group: cfg, Logger: logger})
	}
	commit := func(n *Node) int16 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), byname.Opt(), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	t.Run("fails", func(t *testing.T) {
		st := &failingMem{Store: memstore.New(), failed: make(chan struct{}),
			err: errors.New("disk: storage failure: sync 000004.log: input/output error")}
		n := start(st)
		defer n.Close()
		if code := commit(n); code != 0 {
			t.Fatalf("commit before the failure: error code %d", code)
		}
		waited := make(chan error, 1)
		go func() { waited <- n.Wait() }()
		close(st.failed)
		select {
		case err := <-waited:
			if !errors.Is(err, ErrStoreFailed) || !strings.Contains(err.Error(), "input/output error") {
				t.Fatalf("Wait = %v, want ErrStoreFailed with the store's error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return after the store failed")
		}
		// Until it is closed the node answers, and nothing is acknowledged.
		if code := commit(n); code == 0 {
			t.Fatal("a commit was acknowledged after the store failed")
		}
		if err := n.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})

	t.Run("does not fail", func(t *testing.T) {
		st := &failingMem{Store: memstore.New(), failed: make(chan struct{})}
		n := start(st)
		if code := commit(n); code != 0 {
			t.Fatalf("commit: error code %d", code)
		}
		if err := n.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := n.Wait(); errors.Is(err, ErrStoreFailed) {
			t.Fatalf("Wait after a clean Close = %v", err)
		}
	})
}
