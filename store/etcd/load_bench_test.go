package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestLoadTime measures how long a new owner takes to read a large
// partition from a three-member etcd cluster (the partition's share of
// failover time). Only with COHORT_BENCH=1; COHORT_BENCH_KEYS sets the
// number of records (default 100000, ~200 bytes each):
//
//	COHORT_BENCH=1 go test -run TestLoadTime -v ./store/etcd/
func TestLoadTime(t *testing.T) {
	if os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs it")
	}
	keys := 100000
	if v := os.Getenv("COHORT_BENCH_KEYS"); v != "" {
		keys, _ = strconv.Atoi(v)
	}
	ec := etcdtest.Start(t, 3)
	s, _ := etcd.New(etcd.Options{Client: ec.Client(t), Prefix: "/load/"})
	ctx := context.Background()
	val := make([]byte, 160)
	start := time.Now()
	for i := 0; i < keys; i += 1000 {
		var recs []store.Record
		for k := i; k < i+1000 && k < keys; k++ {
			recs = append(recs, store.Record{Key: []byte(fmt.Sprintf("\x02group-%05d/topic/%04d", k/100, k%100)), Value: val})
		}
		if err := s.Append(ctx, 7, recs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d records in %v", keys, time.Since(start).Round(time.Millisecond))
	for _, page := range []int64{500, 1000, 5000} {
		s, _ := etcd.New(etcd.Options{Client: ec.Client(t), Prefix: "/load/", LoadPageSize: page})
		start = time.Now()
		n := 0
		if err := s.Load(ctx, 7, func(store.Record) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != keys {
			t.Fatalf("loaded %d of %d", n, keys)
		}
		t.Logf("page %d: loaded %d records in %v", page, n, time.Since(start).Round(time.Millisecond))
	}
}
