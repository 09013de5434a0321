package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestLowerEtcdLimits runs the store with its default limits (128
// operations, 1 MiB a transaction) on an etcd started with lower ones
// (--max-txn-ops 32, --max-request-bytes 256 KiB). Every batch was refused
// whole and retried for ever (an OffsetCommit of 50 partitions answered
// COORDINATOR_NOT_AVAILABLE each time); the store now learns the lower
// limits from etcd's refusals, writes the batch in smaller transactions and
// says so once in its log. A single record over etcd's limit still fails,
// with an error naming etcd's setting. (etcd refuses a request over its
// limit itself, and one over the limit and 512 KiB more already in its gRPC
// server: 8 records of 100 KiB meet the second, then the first.)
func TestLowerEtcdLimits(t *testing.T) {
	ec := etcdtest.StartWith(t, 1, func(c *embed.Config) {
		c.MaxTxnOps = 32
		c.MaxRequestBytes = 256 << 10
	})
	var logs bytes.Buffer
	s, err := etcd.New(etcd.Options{Client: ec.Client(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]int{}
	var firstLogs string
	for round := 0; round < 2; round++ {
		var recs []store.Record
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf("offset-%d", i)
			recs = append(recs, store.Record{Key: []byte(k), Value: []byte(fmt.Sprint(round))})
			want[k] = 1
		}
		if err := s.Append(ctx, 1, recs); err != nil {
			t.Fatalf("round %d: 100 small records on etcd with --max-txn-ops 32: %v", round, err)
		}
		recs = nil
		for i := 0; i < 8; i++ {
			k := fmt.Sprintf("group-%d", i)
			recs = append(recs, store.Record{Key: []byte(k), Value: bytes.Repeat([]byte{'x'}, 100<<10)})
			want[k] = 100 << 10
		}
		if err := s.Append(ctx, 1, recs); err != nil {
			t.Fatalf("round %d: 8 records of 100 KiB on etcd with --max-request-bytes 256 KiB: %v", round, err)
		}
		if round == 0 {
			firstLogs = logs.String()
		}
	}
	got := map[string]int{}
	if err := s.Load(ctx, 1, func(r store.Record) error { got[string(r.Key)] = len(r.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("loaded %d records, want %d: %v", len(got), len(want), got)
	}
	for _, w := range []string{"--max-txn-ops", "--max-request-bytes"} {
		if !strings.Contains(firstLogs, w+" is lower") {
			t.Errorf("the log does not say that etcd's %s is lower than assumed:\n%s", w, firstLogs)
		}
	}
	if logs.String() != firstLogs {
		t.Errorf("the second round, within the limits learnt, logged:\n%s", strings.TrimPrefix(logs.String(), firstLogs))
	}
	err = s.Append(ctx, 1, []store.Record{{Key: []byte("huge"), Value: make([]byte, 300<<10)}})
	if !errors.Is(err, rpctypes.ErrRequestTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Errorf("a record of 300 KiB on etcd with --max-request-bytes 256 KiB: %v, want etcd's refusal naming --max-request-bytes", err)
	}
}
