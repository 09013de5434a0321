package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store"
)

// TestAppendFailureLogBounded: a store refusing every write (etcd out of
// space refuses each at once, until an operator disarms its alarm) fails
// each retry of each client's commit. Each failure was a warning, thousands
// a second under load; now the first is, then one a minute, saying how many
// failed unlogged since. Both paths: one writer per partition (cluster
// mode) and the committer's rounds (the embedded store).
func TestAppendFailureLogBounded(t *testing.T) {
	for _, multi := range []bool{false, true} {
		name := "writer"
		if multi {
			name = "committer"
		}
		t.Run(name, func(t *testing.T) {
			st := newGateStore()
			var logs testlog.Buffer
			clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
			var s store.Store = appendOnly{st}
			if multi {
				s = st
			}
			c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: s, Clock: clk,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			c.Start()
			defer c.Close()
			c.WaitLoaded(context.Background())
			e := &env{t: t, c: c, st: st, clk: clk}
			st.FailWith(errors.New("etcdserver: mvcc: database space exceeded"))
			commit := func() {
				t.Helper()
				r := e.do(commitRequest("g", "", -1, "t", 1)).(*kmsg.OffsetCommitResponse)
				if code := r.Topics[0].Partitions[0].ErrorCode; code != group.ErrCoordinatorNotAvailable {
					t.Fatalf("commit on a failing store: error %d, want COORDINATOR_NOT_AVAILABLE", code)
				}
			}
			for i := 0; i < 50; i++ {
				commit()
			}
			if n := strings.Count(logs.String(), "append failed"); n != 1 {
				t.Fatalf("50 failed commits logged %d warnings, want 1:\n%s", n, logs.String())
			}
			clk.Advance(time.Minute)
			commit()
			if l := logs.String(); strings.Count(l, "append failed") != 2 || !strings.Contains(l, "failed_unlogged=49") {
				t.Fatalf("a minute later, want a second warning counting the 49 unlogged:\n%s", l)
			}
		})
	}
}
