package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idleSessionTimeout is the session timeout of the idle groups' members:
// long enough that none expires while 100k groups are formed and measured
// on a loaded machine (minutes), inside cohort's bound (Kafka's default
// group.max.session.timeout.ms, 30 minutes); kfake's bound (5 minutes) is
// raised to match.
const idleSessionTimeout = 25 * time.Minute

// formIdleGroup makes group a one-member classic group in Stable state
// through c: the KIP-394 JoinGroup round trip, the JoinGroup that elects
// the member leader, and its SyncGroup with a one-partition assignment. It
// returns the member's id and generation.
func formIdleGroup(ctx context.Context, c *rawConn, group string) (memberID string, generation int32, err error) {
	join := (&member{group: group}).joinReq()
	join.SessionTimeoutMillis = int32(idleSessionTimeout / time.Millisecond)
	if join.Version, err = c.version(join, 9); err != nil {
		return "", 0, err
	}
	var jr *kmsg.JoinGroupResponse
	for attempt := 0; ; attempt++ {
		if attempt == 3 {
			return "", 0, fmt.Errorf("%s: no JoinGroup success in %d attempts", group, attempt)
		}
		jr = kmsg.NewPtrJoinGroupResponse()
		if err := c.do(ctx, join, jr); err != nil {
			return "", 0, err
		}
		if jr.ErrorCode == kerr.MemberIDRequired.Code {
			join.MemberID = jr.MemberID
			continue
		}
		if jr.ErrorCode != 0 {
			return "", 0, fmt.Errorf("%s: JoinGroup: %w", group, kerr.ErrorForCode(jr.ErrorCode))
		}
		break
	}
	if jr.LeaderID != jr.MemberID {
		return "", 0, fmt.Errorf("%s: the only member %q is not the leader %q", group, jr.MemberID, jr.LeaderID)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, jr.MemberID, jr.Generation
	pt, pn := protocolType, protocolName
	sync.ProtocolType, sync.Protocol = &pt, &pn
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: assignmentFor(0)}}
	if sync.Version, err = c.version(sync, 5); err != nil {
		return "", 0, err
	}
	sr := kmsg.NewPtrSyncGroupResponse()
	if err := c.do(ctx, sync, sr); err != nil {
		return "", 0, err
	}
	if sr.ErrorCode != 0 || len(sr.MemberAssignment) == 0 {
		return "", 0, fmt.Errorf("%s: SyncGroup: %v, %d bytes of assignment", group, kerr.ErrorForCode(sr.ErrorCode), len(sr.MemberAssignment))
	}
	return jr.MemberID, jr.Generation, nil
}

// liveHeap is the heap in use after two collections (live objects only).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// idleGroupsHeap forms n idle one-member groups on the server at addr
// (in this process) over workers connections, closes the connections and
// returns the live heap it grew by.
func idleGroupsHeap(t *testing.T, addr, prefix string, n, workers int) (uint64, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goroutines := runtime.NumGoroutine()
	before := liveHeap()
	start := time.Now()
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-idle-%d", w), nil)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			for i := w; i < n; i += workers {
				if _, _, err := formIdleGroup(ctx, c, prefix+strconv.Itoa(i)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err := firstError(errs); err != nil {
		t.Fatal(err)
	}
	// The server's connection goroutines end once they see the closes.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines+8 && time.Now().Before(deadline); {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	after := liveHeap()
	if after < before {
		return 0, took
	}
	return after - before, took
}

// TestGroupMemory measures the live heap one idle one-member classic group
// costs: COHORT_BENCH_IDLE_GROUPS groups (100,000) are formed on kfake, on
// cohort with the in-memory store (which holds a copy of every record) and
// on cohort with the embedded disk store (COHORT_BENCH_TARGETS), each in a
// process of its own (the test binary re-executed with one target), and the
// heap after GC grown by the groups is divided by their number.
// COHORT_BENCH_PROFILE_DIR=dir writes each target's heap profile (in use,
// groups still held) to dir/<target>.heap. Only with COHORT_BENCH=1.
func TestGroupMemory(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the group memory benchmark")
	}
	n := 100_000
	if v := os.Getenv("COHORT_BENCH_IDLE_GROUPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1_000_000 {
			t.Fatalf("COHORT_BENCH_IDLE_GROUPS=%q (1 to 1,000,000)", v)
		}
	}
	const workers = 16
	repeat := 1
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		repeat, _ = strconv.Atoi(v)
	}
	tgts := []target{
		{"kfake", func(t *testing.T) (string, func()) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMaxSessionTimeout(30*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return c.ListenAddrs()[0], c.Close
		}},
		{"cohort-mem", func(t *testing.T) (string, func()) { return startCohort(t, memStore) }},
		// The embedded store keeps the records in pebble, whose memtable
		// and block cache are allocated outside the Go heap (cgo): this
		// target's figure is the group state without the in-memory
		// store's copy of the records.
		{"cohort-disk", func(t *testing.T) (string, func()) { return startCohort(t, diskStore) }},
	}
	if v := os.Getenv("COHORT_BENCH_TARGETS"); v != "" {
		tgts = slices.DeleteFunc(tgts, func(tg target) bool { return !slices.Contains(strings.Split(v, ","), tg.name) })
	}
	if len(tgts) > 1 {
		// Each target in a process of its own: the heap a stopped server
		// leaves behind (goroutines still ending, its groups) would
		// otherwise be freed during the next target's measurement.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range tgts {
			cmd := exec.Command(exe, "-test.run=^TestGroupMemory$", "-test.v", "-test.timeout=30m")
			cmd.Env = append(os.Environ(), "COHORT_BENCH_TARGETS="+tg.name)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "per group") {
					t.Log(strings.TrimSpace(line))
				}
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", tg.name, err, out)
			}
		}
		return
	}
	for rep := range max(repeat, 1) {
		for _, tg := range tgts {
			addr, stop := tg.start(t)
			grown, took := idleGroupsHeap(t, addr, fmt.Sprintf("idle-%d-", rep), n, workers)
			t.Logf("%s: %d idle groups formed in %v, live heap +%.1f MiB = %.2f KiB per group",
				tg.name, n, took.Round(time.Millisecond), float64(grown)/(1<<20), float64(grown)/float64(n)/1024)
			if dir := os.Getenv("COHORT_BENCH_PROFILE_DIR"); dir != "" {
				f, err := os.Create(filepath.Join(dir, tg.name+".heap"))
				if err != nil {
					t.Fatal(err)
				}
				runtime.GC()
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
			stop()
		}
	}
}
