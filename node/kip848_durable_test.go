package node

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
)

// restartCase848 runs the KIP-848 durability scenario against the node at
// addr: three franz-go consumers (kgo.ServerSideBalancer) share a six
// partition catalog topic and commit; restart takes the node down and
// brings it back on the same store and address. Then:
//   - the group as loaded is the group before: same group and assignment
//     epochs, same members with the same member epochs, assignments and
//     targets (ConsumerGroupDescribe, before any member heartbeats again);
//   - the consumers carry on as the same members: Kafka's coordinator keeps
//     a member that heartbeats again within its session (45 s) across a
//     coordinator change, with its epoch, so no consumer has a partition
//     revoked or lost, each keeps its member id and epoch, and the group is
//     the same after they have heartbeated again;
//   - the committed offsets are there, and the members' commits (fenced by
//     member epoch) are still accepted.
//
// hb is the group's consumer heartbeat interval; the waits scale with it.
func restartCase848(t *testing.T, addr string, hb time.Duration, restart func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seeds := []string{addr}
	admin := client(t, addr, kgo.RetryTimeout(20*time.Second), kgo.DialTimeout(time.Second))
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 6, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	g := start848(t, ctx, seeds, "g848-durable", "work", "a", "b", "c")
	before := g.settle(seeds, 6, 8*hb+10*time.Second)
	restart()
	g.checkUnchanged(seeds, before, 4*hb+15*time.Second)
}

// TestKIP848GroupSurvivesSIGKILL: restartCase848 where the node is a
// `cohort serve` child process on a disk store, killed with SIGKILL and
// started again on its data directory (with a 250 ms consumer heartbeat
// interval, so that the test takes seconds).
func TestKIP848GroupSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin := cohortBinary(t)
	dir := t.TempDir()
	addr := freePort(t)
	const interval = 250 * time.Millisecond
	flags := []string{"--consumer-heartbeat-interval", interval.String()}
	child := startChild(t, bin, dir, addr, flags...)
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	restartCase848(t, addr, interval, func() {
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		child = startChild(t, bin, dir, addr, flags...)
	})
}

// TestKIP848GroupSurvivesRestart: restartCase848 with an in-process node on
// a disk store, closed (node.Close) and started again on the same directory
// and address.
func TestKIP848GroupSurvivesRestart(t *testing.T) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond
	ncfg := Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Group: cfg, ClusterID: "test",
		Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	n := startLoaded(t, ncfg)
	t.Cleanup(func() { n.Close() })
	ncfg.Listen = n.Addr()
	restartCase848(t, n.Addr(), cfg.ConsumerHeartbeatInterval, func() {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = startLoaded(t, ncfg)
	})
}
