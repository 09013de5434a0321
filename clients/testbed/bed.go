package testbed

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// Options configures a test bed.
type Options struct {
	// Topics to create in the data cluster: name → partitions.
	Topics map[string]int32
	// CohortAddr, if set, is an already running cohort (e.g. a child
	// process); otherwise an in-process node on the memory store is started.
	CohortAddr string
	// MinSessionTimeout for the in-process node (default 1s, so that the
	// tests may use short session timeouts).
	MinSessionTimeout time.Duration
	// Tune, if set, changes the in-process node's group settings.
	Tune func(*group.Config)
	// MirrorTopics creates Topics in cohort's catalog as well: the consumer
	// group protocol (KIP-848) assigns partitions of topics the coordinator
	// knows (topicids.go).
	MirrorTopics bool
}

// Bed is kfake + cohort + the router in front of them.
type Bed struct {
	Data   *kfake.Cluster
	Node   *node.Node // nil when Options.CohortAddr was given
	Router *Router
	admin  *kgo.Client
}

// Start starts a bed and registers its shutdown with t.Cleanup. Like every
// starter of this package it skips the test under -short (testwait.WallClock).
func Start(t testing.TB, opts Options) *Bed {
	t.Helper()
	testwait.WallClock(t, "stock Kafka clients against a node behind the router")
	data, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("testbed"))
	if err != nil {
		t.Fatal(err)
	}
	b := &Bed{Data: data}
	t.Cleanup(data.Close)
	cohortAddr := opts.CohortAddr
	if cohortAddr == "" {
		minSession := time.Second
		if opts.MinSessionTimeout > 0 {
			minSession = opts.MinSessionTimeout
		}
		n := startNode(t, node.Config{
			Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}, minSession, opts.Tune)
		b.Node, cohortAddr = n, n.Addr()
	}
	b.Router, err = NewRouter(data.ListenAddrs()[0], cohortAddr, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Router.Close)
	b.admin, err = kgo.NewClient(kgo.SeedBrokers(b.Router.Addr()), kgo.ClientID("testbed-admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.admin.Close)
	if len(opts.Topics) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		admins := []*kgo.Client{b.admin}
		if opts.MirrorTopics {
			direct, err := kgo.NewClient(kgo.SeedBrokers(cohortAddr), kgo.ClientID("testbed-admin"))
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			admins = append(admins, direct)
		}
		for _, cl := range admins {
			for name, parts := range opts.Topics {
				resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, name)
				if err != nil || resp.Err != nil {
					t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
				}
			}
		}
	}
	return b
}

// startNode starts cfg as an in-process node listening on 127.0.0.1:0, on
// the memory store, with no initial rebalance delay and minSession as the
// smallest session timeout, then tune (if not nil) on the group settings,
// and waits until it has loaded; it is closed at cleanup.
func startNode(t testing.TB, cfg node.Config, minSession time.Duration, tune func(*group.Config)) *node.Node {
	t.Helper()
	testwait.WallClock(t, "stock Kafka clients against a node")
	cfg.Listen, cfg.Store, cfg.Group = "127.0.0.1:0", memstore.New(), group.Defaults()
	cfg.Group.InitialRebalanceDelay = 0
	cfg.Group.MinSessionTimeout = minSession
	if tune != nil {
		tune(&cfg.Group)
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "cohort-testbed"
	}
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Addr is the bootstrap address for clients.
func (b *Bed) Addr() string { return b.Router.Addr() }

// Admin is a kadm client through the router.
func (b *Bed) Admin() *kadm.Client { return kadm.NewClient(b.admin) }

// Produce writes n records to topic, record i to partition i % partitions
// with value "topic/i", and waits for them to be acknowledged.
func (b *Bed) Produce(t testing.TB, topic string, partitions int32, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ClientID("testbed-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // kafkajs has no snappy
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Partition: int32(i) % partitions, Value: []byte(topic + "/" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// EndOffsets returns the log end offset of each partition of topic.
func (b *Bed) EndOffsets(t testing.TB, topic string) map[TP]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := b.Admin().ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[TP]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[TP{o.Topic, o.Partition}] = o.Offset
	})
	return out
}

// Committed returns the group's committed offsets as cohort answers them.
func (b *Bed) Committed(ctx context.Context, grp string) (map[TP]int64, error) {
	resp, err := b.Admin().FetchOffsets(ctx, grp)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	out := map[TP]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			out[TP{o.Topic, o.Partition}] = o.At
		}
	})
	return out, nil
}

// WaitCommitted waits until the group's committed offsets equal want (the
// log end offsets) on every partition.
func (b *Bed) WaitCommitted(ctx context.Context, grp string, want map[TP]int64) error {
	var last map[TP]int64
	err := WaitFor(ctx, "committed offsets at the log end", func() bool {
		got, err := b.Committed(ctx, grp)
		if err != nil {
			return false
		}
		last = got
		for tp, end := range want {
			if got[tp] != end {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: committed %v, want %v", err, last, want)
	}
	return nil
}

// Seen is a concurrency-safe set of processed records (by value) with a
// count of deliveries, for at-least-once checks.
type Seen struct {
	mu    sync.Mutex
	vals  map[string]int
	total int
}

// NewSeen returns an empty set.
func NewSeen() *Seen { return &Seen{vals: map[string]int{}} }

// Add records one delivery.
func (s *Seen) Add(v string) {
	s.mu.Lock()
	s.vals[v]++
	s.total++
	s.mu.Unlock()
}

// Distinct is the number of distinct values delivered.
func (s *Seen) Distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.vals)
}

// Total is the number of deliveries, duplicates included.
func (s *Seen) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Missing lists the values topic/i for i in [0, n) never delivered (at most
// 10).
func (s *Seen) Missing(topic string, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := 0; i < n && len(out) < 10; i++ {
		v := topic + "/" + strconv.Itoa(i)
		if s.vals[v] == 0 {
			out = append(out, v)
		}
	}
	return out
}

// CheckOpts relaxes Check for a client's known behaviour.
type CheckOpts struct {
	// StrayCommitsOK: the client may commit partitions it no longer owns
	// (kafka-go's Reader flushes offsets of records fetched in the previous
	// generation with the new generation's id).
	StrayCommitsOK bool
}

// Check runs the checks every group test ends with: every record processed
// at least once, every OffsetFetch answer reflected the commits acknowledged
// before it, no commit of an ended generation was acknowledged, the final
// commits are the log end, and no partition was given to two members in one
// generation. Commits that went backwards or covered partitions the member
// did not own (the clients' doing) are logged.
func (b *Bed) Check(t testing.TB, grp, topic string, n int, seen *Seen, opts ...CheckOpts) {
	var o CheckOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	t.Helper()
	if m := seen.Missing(topic, n); len(m) > 0 {
		t.Errorf("records never processed (first %d shown): %v", len(m), m)
	}
	for _, n := range b.Router.Journal.BackwardsCommits(grp, o.StrayCommitsOK) {
		t.Logf("client behaviour, not cohort's: %s", n)
	}
	if err := b.Router.Journal.CheckFetchesSeeCommits(grp); err != nil {
		t.Error(err)
	}
	if err := b.Router.Journal.CheckCommitFencing(grp); err != nil {
		t.Error(err)
	}
	if stray := b.Router.Journal.StrayCommits(grp); len(stray) > 0 {
		// Kafka's coordinator checks the generation and the member, not
		// partition ownership: these are the client's doing.
		t.Logf("client behaviour, not cohort's: %d commits of partitions the committer did not own in that generation, first %s@%d gen %d %s",
			len(stray), stray[0].TP, stray[0].Offset, stray[0].Gen, stray[0].Member)
	}
	if err := b.Router.Journal.CheckNoOverlap(grp); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends := b.EndOffsets(t, topic)
	got, err := b.Committed(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	for tp, end := range ends {
		if got[tp] != end {
			t.Errorf("%s: committed %d, log end %d", tp, got[tp], end)
		}
	}
	if t.Failed() || testing.Verbose() {
		b.Dump(t, grp)
	}
	for _, f := range b.Router.Journal.FailedCommits(grp) {
		t.Logf("refused commit %s", f)
	}
	t.Logf("group %s: %d records, %d deliveries, generations %v, %d acknowledged commits",
		grp, n, seen.Total(), b.Router.Journal.Generations(grp), len(b.Router.Journal.Commits(grp)))
}

// Dump logs the journal of a group: generations and assignments, commits,
// fetched offsets.
func (b *Bed) Dump(t testing.TB, grp string) { b.Router.Journal.Dump(t, grp) }
