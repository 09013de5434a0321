package disk

import (
	"context"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"log/slog"
	"testing"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/storetest"
)

func openT(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.Dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openT(t, Options{Dir: t.TempDir()}) })
}

func TestPersistent(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store { return openT(t, Options{Dir: dir}) }
	})
}

// discard is the logger of stores in tests.
var discard = slog.New(slog.DiscardHandler)

// TestAppendMulti checks that one AppendMulti writes every partition's
// records in order, and that a crash keeps all of its batches or none.
func TestAppendMulti(t *testing.T) {
	ctx := context.Background()
	s := openT(t, Options{Dir: t.TempDir()})
	defer s.Close()
	err := s.AppendMulti(ctx, []store.PartitionRecords{
		{Partition: 1, Records: []store.Record{rec("a", "1"), rec("a", "2")}},
		{Partition: 2, Records: []store.Record{rec("a", "x"), {Key: []byte("a")}, rec("b", "y")}},
		{Partition: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]map[string]string{1: {"a": "2"}, 2: {"b": "y"}, 3: {}} {
		got := map[string]string{}
		if err := s.Load(ctx, p, func(r store.Record) error { got[string(r.Key)] = string(r.Value); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
			t.Errorf("partition %d = %v, want %v", p, got, want)
		}
	}

	// Atomic across partitions: in crash images taken while AppendMulti
	// calls run, partitions 0 and 1 always hold the same generation.
	mem := vfs.NewCrashableMem()
	c := openT(t, Options{Dir: "/s", fs: mem})
	var images []*vfs.MemFS
	for gen := 0; gen < 200; gen++ {
		v := strings.Repeat(fmt.Sprint(gen), 50)
		done := make(chan error, 1)
		go func() {
			done <- c.AppendMulti(ctx, []store.PartitionRecords{
				{Partition: 0, Records: []store.Record{rec("gen", v)}},
				{Partition: 1, Records: []store.Record{rec("gen", v)}},
			})
		}()
		if gen%20 == 0 {
			images = append(images, mem.CrashClone(vfs.CrashCloneCfg{}))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, img := range images {
		r := openT(t, Options{Dir: "/s", fs: img})
		var g [2]string
		for p := int32(0); p < 2; p++ {
			if err := r.Load(ctx, p, func(rc store.Record) error { g[p] = string(rc.Value); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if g[0] != g[1] {
			t.Errorf("image %d: partition 0 has %.10q…, partition 1 has %.10q…", i, g[0], g[1])
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
