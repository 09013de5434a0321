package node

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestOffsetsByTopicIDStockClient: franz-go, left to negotiate, commits and
// fetches offsets at v10, naming catalog topics by ID, and reads back what
// it committed; a client capped at v9 (byname, as the CLI and the console
// are) commits and sees a topic outside the catalog too, which a v10 fetch
// of all topics leaves out.
func TestOffsetsByTopicIDStockClient(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]int16{} // API name: versions answered
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startLoaded(t, Config{
		Listen:    "127.0.0.1:0",
		Store:     memstore.New(),
		Group:     cfg,
		Rand:      seeded{rand.NewChaCha8([32]byte{5})},
		Logger:    slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClusterID: "test",
		Tap: func(_ server.Client, req kmsg.Request, _ kmsg.Response) {
			if k := req.Key(); k == kmsg.OffsetCommit.Int16() || k == kmsg.OffsetFetch.Int16() {
				mu.Lock()
				name := kmsg.NameForKey(k)
				if !slices.Contains(seen[name], req.GetVersion()) {
					seen[name] = append(seen[name], req.GetVersion())
				}
				mu.Unlock()
			}
		},
	})
	t.Cleanup(func() { n.Close() })
	if _, err := n.Catalog().Create("work", 4, nil); err != nil {
		t.Fatal(err)
	}
	versions := func(api string) []int16 {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(seen[api])
		slices.Sort(out)
		seen[api] = nil
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A group consumer commits through its member (generation-checked).
	assigned := make(chan struct{}, 1)
	cl := client(t, n.Addr(), kgo.ConsumerGroup("ids"), kgo.ConsumeTopics("work"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("no assignment within 20s")
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"work": {0: {Epoch: -1, Offset: 5}, 3: {Epoch: -1, Offset: 7}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					commitErr = errors.Join(commitErr, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	if v := versions("OffsetCommit"); !slices.Equal(v, []int16{10}) {
		t.Errorf("the consumer committed with OffsetCommit %v, want v10", v)
	}
	adm := kadm.NewClient(client(t, n.Addr()))
	got, err := adm.FetchOffsets(ctx, "ids")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 5, 3: 7} {
		if o, ok := got.Lookup("work", p); !ok || o.Err != nil || o.At != want {
			t.Errorf("v10 fetch of work/%d: %+v (found %v), want %d", p, o, ok, want)
		}
	}
	if v := versions("OffsetFetch"); !slices.Contains(v, 10) {
		t.Errorf("OffsetFetch versions %v, want v10 among them", v)
	}

	// Outside the catalog: only a by-name request can commit it (kadm
	// itself commits only topics its metadata has), and only a by-name
	// fetch of all topics shows it.
	named := client(t, n.Addr(), byname.Opt())
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "ids-admin", -1
	for topic, p := range map[string]int32{"work": 1, "outside": 0} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, int64(3+6*p), -1
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	cr, err := req.RequestWith(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range cr.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("v9 commit of %s/%d: %v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	if v := versions("OffsetCommit"); !slices.Equal(v, []int16{9}) {
		t.Errorf("the by-name client committed with OffsetCommit %v, want v9", v)
	}
	all, err := kadm.NewClient(named).FetchOffsets(ctx, "ids-admin")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := all.Lookup("outside", 0); !ok || o.At != 3 {
		t.Errorf("v9 fetch of outside/0: %+v (found %v)", o, ok)
	}
	byID, err := adm.FetchOffsets(ctx, "ids-admin")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := byID.Lookup("work", 1); !ok || o.At != 9 {
		t.Errorf("v10 fetch of work/1: %+v (found %v)", o, ok)
	}
	if o, ok := byID.Lookup("outside", 0); ok {
		t.Errorf("v10 fetch of all topics shows outside/0 (%+v), which has no ID", o)
	}
}
