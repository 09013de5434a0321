package etcd_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestHistoryGrowth measures etcd's database under steady commit traffic,
// the same 50 offsets of 20 groups overwritten round after round, with and
// without a Compactor stepping once per round (a round standing for one
// compaction interval). Only with COHORT_BENCH=1:
//
//	COHORT_BENCH=1 go test -run TestHistoryGrowth -v ./store/etcd/
func TestHistoryGrowth(t *testing.T) {
	if os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs it")
	}
	const rounds, commitsPerRound, partitions, groups = 20, 1000, 50, 20
	ctx := context.Background()
	val := []byte(`{"offset":123456789,"epoch":7,"metadata":"","ts":1733368800000}`)
	for _, compact := range []bool{false, true} {
		ec := etcdtest.Start(t, 1)
		cli := ec.Client(t)
		s, err := etcd.New(etcd.Options{Client: cli, Prefix: "/h/"})
		if err != nil {
			t.Fatal(err)
		}
		clk := clock.NewFake(time.Now())
		c := etcd.NewCompactor(cli, "/h/", time.Minute, clk)
		for r := range rounds {
			for i := range commitsPerRound {
				recs := make([]store.Record, partitions)
				for p := range recs {
					recs[p] = store.Record{Key: fmt.Appendf(nil, "\x02group-%02d/events/%04d", i%groups, p), Value: val}
				}
				if err := s.Append(ctx, 3, recs); err != nil {
					t.Fatal(err)
				}
			}
			if compact {
				if _, err := c.Step(ctx); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
			}
			if r == rounds/2-1 || r == rounds-1 {
				st, err := cli.Status(ctx, ec.Endpoints()[0])
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("compacting %v: after %d commits of %d offsets: database %.1f MiB, in use %.1f MiB",
					compact, (r+1)*commitsPerRound, partitions, float64(st.DbSize)/(1<<20), float64(st.DbSizeInUse)/(1<<20))
			}
		}
		ec.Close()
	}
}
