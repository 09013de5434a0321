package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestPartitionCountIsFixedForAStore: a group lives in partition
// hash(group) mod the partition count, so a node started on a data
// directory with another --partitions would find none of its groups. The
// count is recorded at the first start; a start with another count is
// refused, names the right one, and leaves the data alone.
func TestPartitionCountIsFixedForAStore(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "data")
	start := func(parts int) (*Node, error) {
		return Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: parts, Logger: quiet})
	}
	n, err := start(0) // the default, 50
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(client(t, n.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "events", Partition: 0, At: 42, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "try-group", offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	n.Close()

	for _, parts := range []int{10, 51} {
		if n, err := start(parts); err == nil {
			n.Close()
			t.Fatalf("a start with --partitions %d on a store of 50 succeeded", parts)
		} else if msg := err.Error(); !strings.Contains(msg, "--partitions 50") || !strings.Contains(msg, dir) || strings.Contains(msg, "\n") {
			t.Errorf("refusal: %q; want one line naming --partitions 50 and %s", msg, dir)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the data directory after the refused starts: %v", err)
	}
	n, err = start(50)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	adm = kadm.NewClient(client(t, n.Addr()))
	got, err := adm.FetchOffsets(ctx, "try-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("events", 0); !ok || o.At != 42 {
		t.Fatalf("offset after the refused starts: %+v (%v)", o, ok)
	}
}

// TestPartitionCountRecordedInAnOlderStore: a store written before the
// count was recorded gets the count of its first start now, and keeps it.
func TestPartitionCountRecordedInAnOlderStore(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	st, err := disk.Open(disk.Options{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(context.Background(), 3, []store.Record{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for i, tc := range []struct {
		parts int
		ok    bool
	}{{7, true}, {0, false}, {7, true}} {
		n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir, Partitions: tc.parts, Logger: quiet})
		if err == nil {
			n.Close()
		}
		if (err == nil) != tc.ok {
			t.Fatalf("start %d with --partitions %d: %v, want ok=%v", i, tc.parts, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--partitions 7") {
			t.Errorf("refusal %q does not name --partitions 7", err)
		}
	}
}

// TestClusterPartitionCountIsShared: nodes sharing an etcd prefix share the
// partition count; a node started with another one is refused.
func TestClusterPartitionCountIsShared(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(id int32, parts int) (*Node, error) {
		return Start(Config{Listen: "127.0.0.1:0", NodeID: id, ClusterID: "test", Partitions: parts, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/parts/", LeaseTTL: testLeaseTTL}})
	}
	n1, err := start(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	if n2, err := start(2, 8); err == nil {
		n2.Close()
		t.Fatal("a node with 8 partitions joined a cluster of 4")
	} else if !strings.Contains(err.Error(), "--partitions 4") || !strings.Contains(err.Error(), `"/parts/"`) {
		t.Errorf("refusal %q", err)
	}
	n2, err := start(2, 4)
	if err != nil {
		t.Fatal(err)
	}
	n2.Close()

	// Two nodes starting at once on a new prefix with different counts:
	// one records its count, the other is refused.
	prefix := func(id int32, parts int) (*Node, error) {
		return Start(Config{Listen: "127.0.0.1:0", NodeID: id, ClusterID: "test", Partitions: parts, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/race/", LeaseTTL: testLeaseTTL}})
	}
	type started struct {
		n   *Node
		err error
	}
	got := make(chan started, 2)
	for i, parts := range []int{3, 5} {
		go func() {
			n, err := prefix(int32(10+i), parts)
			got <- started{n, err}
		}()
	}
	refused := 0
	for range 2 {
		s := <-got
		if s.err != nil {
			refused++
			if !strings.Contains(s.err.Error(), "--partitions") {
				t.Errorf("refusal %q", s.err)
			}
			continue
		}
		defer s.n.Close()
	}
	if refused != 1 {
		t.Fatalf("%d of the two nodes with different counts were refused, want 1", refused)
	}
}

// TestPartitionsBoundedInConfig: a node refuses more coordinator partitions
// than cohort serve --partitions accepts, the bound store copy applies to the
// count a store records, so that an embedding program cannot write a store
// that cohort store copy then refuses as damaged.
func TestPartitionsBoundedInConfig(t *testing.T) {
	err := CheckConfig(Config{Listen: "127.0.0.1:0", Partitions: MaxPartitionCount + 1})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), strconv.Itoa(MaxPartitionCount)) {
		t.Fatalf("Partitions %d: err %v, want a ConfigError naming the bound %d", MaxPartitionCount+1, err, MaxPartitionCount)
	}
	if err := CheckConfig(Config{Listen: "127.0.0.1:0", Partitions: MaxPartitionCount}); err != nil {
		t.Fatalf("Partitions %d refused: %v", MaxPartitionCount, err)
	}
}
