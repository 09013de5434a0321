package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestHistoryCost measures what recording rebalance history costs the
// frequent requests, in process and without the network: two coordinators
// on the in-memory store, one with history (the default bound, 100) and one
// with history off (group.Config.HistorySize -1), each with the same groups
// of one member whose histories are full (every group rebalanced
// COHORT_BENCH_DEPTH times, default 100: the "on" coordinator holds that
// many events per group). Heartbeats, and commits of 1 and 50 partitions,
// are then sent to each coordinator in turn, in short alternating chunks
// (coordinator.Handle, one request at a time, cycling through the groups),
// series after series with the order swapped every other series. Each
// chunk is measured in process CPU time (getrusage: the caller and the
// partition's loop, GC included; only one side runs at a time), which a
// busy machine's descheduling does not inflate as it does wall time (also
// reported). The paired ratio (with / without, CPU per request) of each
// series gives a geometric mean and its 95% interval per case. Without the
// network and the load generator's own work, the figures are the
// coordinator's cost.
//
// COHORT_BENCH_PAD=1 is the control for the store's size: the coordinator
// without history gets as many extra records in its in-memory store (of a
// kind it skips on load) as the other holds events.
//
// Without COHORT_BENCH=1 it runs a quick sanity version (few groups, short
// history, two series) that checks the "on" coordinator recorded the
// history and the "off" one none.
func TestHistoryCost(t *testing.T) {
	groups, depth, series, chunk := 200, 100, 40, 3000
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		groups, depth, series, chunk = 10, 3, 2, 200
	}
	if v := os.Getenv("COHORT_BENCH_DEPTH"); v != "" {
		xs, err := ParseCounts(v)
		if err != nil || len(xs) != 1 {
			t.Fatalf("COHORT_BENCH_DEPTH=%q: want one count", v)
		}
		depth = xs[0]
	}
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		xs, err := ParseCounts(v)
		if err != nil || len(xs) != 1 || xs[0] < 1 {
			t.Fatalf("COHORT_BENCH_REPEAT=%q: want one count", v)
		}
		series = xs[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	on := newHistoryTarget(t, ctx, "history", 100, groups, depth)
	off := newHistoryTarget(t, ctx, "no history", -1, groups, depth)

	// The "on" side holds the history, the "off" side none.
	for _, h := range []*historyTarget{on, off} {
		n := h.historyLen(h.groups[0])
		want := min(depth+1, 100)
		if h.size < 0 {
			want = 0
		}
		if n != want {
			t.Fatalf("%s: group %s has %d events, want %d", h.name, h.groups[0].id, n, want)
		}
	}

	cases := []struct {
		name string
		op   func(h *historyTarget, m *benchMember) error
	}{
		{"heartbeat", (*historyTarget).heartbeat},
		{"commit, 1 partition", func(h *historyTarget, m *benchMember) error { return h.commit(m, 1) }},
		{"commit, 50 partitions", func(h *historyTarget, m *benchMember) error { return h.commit(m, 50) }},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d groups of one member, %d rebalances each before measuring; %d series of %d requests per side and case\n\n",
		groups, depth, series, chunk)
	fmt.Fprintln(&sb, "| case | series | geometric mean (with / without, CPU per request) | 95% CI | series ≥ 1 | median CPU µs per request, with / without | wall time per request: geometric mean (95% CI) |")
	fmt.Fprintln(&sb, "|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range cases {
		var ratios, wallRatios, tOn, tOff []float64
		for s := range series {
			order := []*historyTarget{on, off}
			if s%2 == 1 {
				slices.Reverse(order)
			}
			per, wall := map[*historyTarget]float64{}, map[*historyTarget]float64{}
			for _, h := range order {
				cpu0, measured := processCPU()
				start := time.Now()
				for i := range chunk {
					if err := c.op(h, &h.groups[i%len(h.groups)]); err != nil {
						t.Fatalf("%s, %s: %v", h.name, c.name, err)
					}
				}
				wall[h] = float64(time.Since(start).Nanoseconds()) / float64(chunk)
				per[h] = wall[h]
				if cpu1, _ := processCPU(); measured {
					per[h] = float64((cpu1 - cpu0).Nanoseconds()) / float64(chunk)
				}
			}
			ratios = append(ratios, per[on]/per[off])
			wallRatios = append(wallRatios, wall[on]/wall[off])
			tOn, tOff = append(tOn, per[on]), append(tOff, per[off])
		}
		g, lo, hi := geoMeanCI(ratios)
		atLeast := 0
		for _, r := range ratios {
			if r >= 1 {
				atLeast++
			}
		}
		wg, wlo, whi := geoMeanCI(wallRatios)
		fmt.Fprintf(&sb, "| %s | %d | %.3f× | %.3f–%.3f | %d of %d | %.1f / %.1f | %.3f× (%.3f–%.3f) |\n",
			c.name, series, g, lo, hi, atLeast, series, median(tOn)/1e3, median(tOff)/1e3, wg, wlo, whi)
	}
	t.Log("\n" + sb.String())
	if out := os.Getenv("COHORT_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// historyTarget is one in-process coordinator and its groups.
type historyTarget struct {
	t      *testing.T
	ctx    context.Context
	name   string
	size   int
	c      *coordinator.Coordinator
	groups []benchMember
}

// benchMember is the one member of a group.
type benchMember struct {
	id, member string
	gen        int32
}

var benchClient = group.Client{ID: "history-cost", Host: "127.0.0.1"}

func newHistoryTarget(t *testing.T, ctx context.Context, name string, size, groups, depth int) *historyTarget {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.HistorySize = size
	cfg.StormThreshold = -1 // the rebalances of the setup are no storm to report
	st := memstore.New()
	if size < 0 && os.Getenv("COHORT_BENCH_PAD") == "1" {
		// The control: the store without history holds as many records
		// as the one with it (a kind the coordinator skips on load, of
		// about an event's size), so that only history's own work differs.
		for g := range groups {
			id := fmt.Sprintf("history-cost-%d", g)
			var recs []store.Record
			for q := range min(depth+1, 100) {
				recs = append(recs, store.Record{Key: fmt.Appendf(nil, "\x7f%s-%d", id, q), Value: make([]byte, 900)})
			}
			if err := st.Append(ctx, coordinator.PartitionFor(id, 50), recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := coordinator.New(coordinator.Config{Group: cfg, Store: st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Close() })
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	h := &historyTarget{t: t, ctx: ctx, name: name, size: size, c: c}
	for g := range groups {
		m := benchMember{id: fmt.Sprintf("history-cost-%d", g)}
		for range depth + 1 { // the first join, then depth rejoins: one event each
			if err := h.rebalance(&m); err != nil {
				t.Fatalf("%s: group %s: %v", name, m.id, err)
			}
		}
		h.groups = append(h.groups, m)
	}
	return h
}

func (h *historyTarget) handle(req kmsg.Request) (kmsg.Response, error) {
	return h.c.Handle(h.ctx, benchClient, req)
}

// rebalance joins (or rejoins) the group's one member and syncs.
func (h *historyTarget) rebalance(m *benchMember) error {
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version = 9
	j.Group, j.MemberID, j.ProtocolType = m.id, m.member, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 300000, 300000 // no expiry while measuring
	// Each rejoin carries other metadata: a rebalance each time.
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: fmt.Appendf(nil, "m%d", m.gen)}}
	for range 2 {
		resp, err := h.handle(j)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.JoinGroupResponse)
		if r.ErrorCode == kerr.MemberIDRequired.Code {
			j.MemberID = r.MemberID
			continue
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("join: %w", err)
		}
		m.member, m.gen = r.MemberID, r.Generation
		break
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 5
	s.Group, s.MemberID, s.Generation = m.id, m.member, m.gen
	s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m.member, MemberAssignment: []byte("a")}}
	resp, err := h.handle(s)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.SyncGroupResponse).ErrorCode)
}

func (h *historyTarget) heartbeat(m *benchMember) error {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = m.id, m.member, m.gen
	resp, err := h.handle(req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.HeartbeatResponse).ErrorCode)
}

func (h *historyTarget) commit(m *benchMember, partitions int) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = m.id, m.member, m.gen
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	for p := range int32(partitions) {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, int64(m.gen)
		tp.Partitions = append(tp.Partitions, pp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{tp}
	resp, err := h.handle(req)
	if err != nil {
		return err
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
		}
	}
	return nil
}

// historyLen is how many events the coordinator returns for m's group
// (DescribeGroups v5 with tag 10001).
func (h *historyTarget) historyLen(m benchMember) int {
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 5
	d.Groups = []string{m.id}
	group.RequestHistory(d, -1)
	// The events are written after the sync answers: wait (bounded) for
	// the last one to be durable.
	want := -1
	var n int
	for i := 0; i < 200; i++ {
		resp, err := h.handle(d)
		if err != nil {
			h.t.Fatal(err)
		}
		n = 0
		if doc, ok := group.HistoryTagOf(&resp.(*kmsg.DescribeGroupsResponse).Groups[0]); ok {
			n = len(doc.History)
		}
		if n == want {
			return n
		}
		want = n
		time.Sleep(5 * time.Millisecond) // polling: the last write lands on the partition's loop
	}
	return n
}
