package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newRawMembers dials n members of group, each on its own bare connection
// to addr (the group's coordinator), a bounded number at a time, and runs
// each one's KIP-394 JoinGroup round trip: they are then pending with
// known ids, as newMembers leaves kgo members. poll is how often a synced
// member heartbeats to learn of a later generation.
func newRawMembers(ctx context.Context, addr, group string, n int, poll time.Duration) ([]*member, error) {
	ms := make([]*member, n)
	err := boundedEach(n, 64, func(i int) error {
		c, err := dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-%d", i), nil)
		if err != nil {
			return err
		}
		m := &member{idx: i, group: group, raw: c, poll: poll}
		ms[i] = m
		resp, err := request(ctx, m, m.joinReq(), kmsg.NewPtrJoinGroupResponse)
		if err != nil {
			return fmt.Errorf("member %d: first JoinGroup: %w", i, err)
		}
		if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
			return fmt.Errorf("member %d: first JoinGroup answered %v, want MEMBER_ID_REQUIRED with an id", i, kerr.ErrorForCode(resp.ErrorCode))
		}
		m.id = resp.MemberID
		return nil
	})
	return ms, err
}

// leaveRaw takes every member with an id out of the group with one batched
// LeaveGroup (v3+) on the first member's connection, then closes every
// connection. Best effort, bounded by its own timeout.
func leaveRaw(ms []*member) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first *member
	l := kmsg.NewPtrLeaveGroupRequest()
	for _, m := range ms {
		if m == nil || m.raw == nil {
			continue
		}
		if first == nil {
			first, l.Group = m, m.group
		}
		if m.id != "" {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.id
			l.Members = append(l.Members, lm)
		}
	}
	if first != nil && len(l.Members) > 0 {
		request(ctx, first, l, kmsg.NewPtrLeaveGroupResponse)
	}
	for _, m := range ms {
		if m != nil && m.raw != nil {
			m.raw.Close()
		}
	}
}

// TestBigRebalance measures the first rebalance of one classic group of N
// members, each on its own connection (a bare connection per member, so
// that 10,000 fit in this process's file descriptors), from the last
// member's JoinGroup to every member holding its assignment, as formGroup
// measures it for the kgo members of TestCompare. Each server runs in its
// own process (cohort-mem and kfake, COHORT_BENCH_TARGETS), so each
// process holds one end of each connection. Sizes COHORT_BENCH_MEMBERS
// (1000,10000), COHORT_BENCH_REPEAT interleaved series (5), medians. A
// synced member heartbeats every max(10 ms, N × 20 µs) to learn of a later
// generation (10,000 members: every 200 ms, 50k requests/s in all, less
// than 1,000 members polling every 10 ms), so that the polling does not
// swamp the server it measures. COHORT_BENCH_PROFILE_DIR=dir with
// COHORT_BENCH_WINDOW_PROFILE=1 (or =cpu) profiles each server over each
// round only (windowProfileEnv). Only with COHORT_BENCH=1.
func TestBigRebalance(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the big rebalance benchmark")
	}
	if runtime.GOOS != "linux" {
		t.Skip("runs its servers as child processes with taskset")
	}
	sizes := []int{1000, 10000}
	if v := os.Getenv("COHORT_BENCH_MEMBERS"); v != "" {
		var err error
		if sizes, err = ParseCounts(v); err != nil {
			t.Fatal(err)
		}
	}
	repeat := 5
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		var err error
		if repeat, err = strconv.Atoi(v); err != nil || repeat < 1 {
			t.Fatalf("COHORT_BENCH_REPEAT=%q", v)
		}
	}
	if err := RaiseFileLimit(slices.Max(sizes) + 512); err != nil {
		t.Skip(err)
	}
	children := startChildren(t, "cohort-mem", "kfake")
	lat := map[int]map[string][]time.Duration{}
	for rep := range repeat {
		for _, n := range sizes {
			if lat[n] == nil {
				lat[n] = map[string][]time.Duration{}
			}
			for _, c := range children {
				d, gens, cpu := bigRebalance(t, c, fmt.Sprintf("big-%d-%d-%s", rep, n, c.name), n)
				t.Logf("%s, %d members, series %d: %v (%d generations; server CPU %v)", c.name, n, rep,
					d.Round(10*time.Microsecond), gens, cpu.Round(10*time.Microsecond))
				lat[n][c.name] = append(lat[n][c.name], d)
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("\n| members |")
	for _, c := range children {
		sb.WriteString(" " + c.name + " (median) | " + c.name + " (min–max) |")
	}
	if len(children) == 2 {
		sb.WriteString(" " + children[0].name + " / " + children[1].name + " |")
	}
	sb.WriteString("\n|---:|" + strings.Repeat("---:|---|", len(children)))
	if len(children) == 2 {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	for _, n := range sizes {
		fmt.Fprintf(&sb, "| %d |", n)
		med := map[string]time.Duration{}
		for _, c := range children {
			xs := slices.Clone(lat[n][c.name])
			slices.Sort(xs)
			med[c.name] = xs[len(xs)/2]
			fmt.Fprintf(&sb, " %s | %s–%s |", ms(med[c.name]), ms(xs[0]), ms(xs[len(xs)-1]))
		}
		if len(children) == 2 {
			fmt.Fprintf(&sb, " %.2f× |", float64(med[children[0].name])/float64(med[children[1].name]))
		}
		sb.WriteString("\n")
	}
	t.Log(sb.String())
}

// bigRebalance forms group of n raw members on c and returns formGroup's
// latency and generations, and the CPU time c's process used from the
// first JoinGroup sent to the last member synced (zero where /proc has
// none).
func bigRebalance(t *testing.T, c *childTarget, group string, n int) (time.Duration, int32, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	poll := max(waitPoll, time.Duration(n)*20*time.Microsecond)
	ms, err := newRawMembers(ctx, c.addr, group, n, poll)
	defer leaveRaw(ms)
	if err != nil {
		t.Fatal(err)
	}
	cpu0, ok0 := procCPU(c.cmd.Process.Pid)
	if err := c.profile(true, group); err != nil {
		t.Fatal(err)
	}
	d, gens, err := formGroup(ctx, ms, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cpu1, ok1 := procCPU(c.cmd.Process.Pid)
	if err := c.profile(false, group); err != nil {
		t.Fatal(err)
	}
	if !ok0 || !ok1 {
		return d, gens, 0
	}
	return d, gens, cpu1 - cpu0
}
