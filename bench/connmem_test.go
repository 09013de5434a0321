package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConnMemory measures what an idle consumer costs a server with its
// connection: COHORT_BENCH_CONNS clients (5,000) each form a one-member
// group of their own on a connection of their own, send a heartbeat and
// commit an offset, and then stay connected and quiet, as a consumer
// between heartbeats. Each server runs in a
// process of its own (COHORT_BENCH_TARGETS, cohort-mem and kfake by
// default), which reports its live heap and goroutine stacks after two
// collections before and after; the growth is divided by the connections.
// TestGroupMemory measures the groups alone (its connections are closed
// before it measures); here the connections are the point. Only with
// COHORT_BENCH=1.
func TestConnMemory(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the connection memory benchmark")
	}
	if runtime.GOOS != "linux" {
		t.Skip("runs its servers as child processes with taskset")
	}
	n := 5000
	if v := os.Getenv("COHORT_BENCH_CONNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 20000 {
			t.Fatalf("COHORT_BENCH_CONNS=%q (1 to 20,000)", v)
		}
	}
	if err := RaiseFileLimit(n + 512); err != nil {
		t.Skip(err)
	}
	repeat := 1
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		repeat, _ = strconv.Atoi(v)
	}
	children := startChildren(t, "cohort-mem", "kfake")
	var sb strings.Builder
	sb.WriteString("\n| target | series | live heap per connection | stacks per connection | together |\n|---|---:|---:|---:|---:|\n")
	for rep := range max(repeat, 1) {
		for _, c := range children {
			heap, stack := connMemory(t, c, fmt.Sprintf("conn-%d-%s-", rep, c.name), n)
			t.Logf("%s, series %d: %d idle connections, each with its group: heap +%.2f KiB, stacks +%.2f KiB per connection",
				c.name, rep, n, heap/1024, stack/1024)
			fmt.Fprintf(&sb, "| %s | %d | %.2f KiB | %.2f KiB | %.2f KiB |\n", c.name, rep, heap/1024, stack/1024, (heap+stack)/1024)
		}
	}
	t.Log(sb.String())
}

// idleConsumer forms a one-member group on c and then does what a consumer
// does between rebalances: a heartbeat and an offset commit of its
// partition.
func idleConsumer(ctx context.Context, c *rawConn, group string) error {
	id, gen, err := formIdleGroup(ctx, c, group)
	if err != nil {
		return err
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, id, gen
	if hb.Version, err = c.version(hb, 4); err != nil {
		return err
	}
	hr := kmsg.NewPtrHeartbeatResponse()
	if err := c.do(ctx, hb, hr); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		return fmt.Errorf("%s: Heartbeat: %w", group, err)
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.MemberID, oc.Generation = group, id, gen
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = benchTopic
	pp := kmsg.NewOffsetCommitRequestTopicPartition()
	pp.Offset = 42
	tp.Partitions = append(tp.Partitions, pp)
	oc.Topics = append(oc.Topics, tp)
	if oc.Version, err = c.version(oc, 8); err != nil {
		return err
	}
	or := kmsg.NewPtrOffsetCommitResponse()
	if err := c.do(ctx, oc, or); err != nil {
		return err
	}
	for _, t := range or.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s: OffsetCommit: %w", group, err)
			}
		}
	}
	return nil
}

// connMemory connects n clients to c, each an idleConsumer of its own group
// (prefix + its index) on its own connection, and returns the child's live
// heap and stack growth per connection while they stay connected.
func connMemory(t *testing.T, c *childTarget, prefix string, n int) (heap, stack float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := newClient(c.addr, "cohort-bench-conn-admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = createTopic(ctx, cl, benchTopic, 1) // kfake takes commits only for topics it has
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	h0, s0, err := c.mem(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*rawConn, n)
	defer func() {
		for _, rc := range conns {
			if rc != nil {
				rc.Close()
			}
		}
	}()
	if err := boundedEach(n, 64, func(i int) error {
		rc, err := dialRaw(ctx, c.addr, fmt.Sprintf("cohort-bench-conn-%d", i), nil)
		if err != nil {
			return err
		}
		conns[i] = rc
		return idleConsumer(ctx, rc, prefix+strconv.Itoa(i))
	}); err != nil {
		t.Fatal(err)
	}
	h1, s1, err := c.mem(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return (float64(h1) - float64(h0)) / float64(n), (float64(s1) - float64(s0)) / float64(n)
}
