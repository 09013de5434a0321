package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/memstore"
)

// idleWindow is how long the idle consumers are watched.
const idleWindow = 3 * time.Second

// fetchWait is the consumers' MaxWaitMillis.
const fetchWait = 500 * time.Millisecond

// maxIdleFetches bounds the Fetch requests of one idle consumer (one
// fetching connection) in idleWindow: one per fetchWait, and a few more
// for the window's edges.
const maxIdleFetches = int(idleWindow/fetchWait) + 3

// startMetricsNode is startNode with a Prometheus listener, whose request
// counters the tests read.
func startMetricsNode(t *testing.T) *Node {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startLoaded(t, Config{
		Listen:        "127.0.0.1:0",
		MetricsListen: "127.0.0.1:0",
		Store:         memstore.New(),
		Group:         cfg,
		Rand:          seeded{rand.NewChaCha8([32]byte{4})},
		Logger:        slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClusterID:     "test",
	})
	t.Cleanup(func() { n.Close() })
	return n
}

// fetchRequests returns how many Fetch requests the node has answered.
func fetchRequests(t *testing.T, n *Node) int {
	t.Helper()
	resp, err := http.Get("http://" + n.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `cohort_server_requests_total{api="Fetch"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(f)
		}
	}
	t.Fatal("no Fetch request counter in the node's metrics")
	return 0
}

// warnLogger keeps franz-go's warnings and errors.
type warnLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *warnLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l *warnLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(level, " ", msg, " ", kv))
}

func (l *warnLogger) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestDataPlaneFranzGoGroup: a stock franz-go group consumer of a catalog
// topic, against the node alone, joins, is assigned every partition, polls
// nothing without errors at about one Fetch per MaxWaitMillis, and
// commits; a commit of a partition the topic lacks is refused.
func TestDataPlaneFranzGoGroup(t *testing.T) {
	testwait.WallClock(t, "franz-go consumers against a live node")
	n := startMetricsNode(t)
	if _, err := n.Catalog().Create("work", 4, nil); err != nil {
		t.Fatal(err)
	}
	logs := &warnLogger{}
	assigned := make(chan []int32, 8)
	cl := client(t, n.Addr(),
		kgo.ConsumerGroup("dp-kgo"), kgo.ConsumeTopics("work"),
		kgo.FetchMaxWait(fetchWait), kgo.WithLogger(logs),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned <- m["work"] }),
	)
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan error, 1)
	records := 0
	go func() {
		var first error
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			records += fs.NumRecords()
			fs.EachError(func(topic string, p int32, err error) {
				if first == nil && !errors.Is(err, context.Canceled) {
					first = fmt.Errorf("%s/%d: %w", topic, p, err)
				}
			})
		}
		polled <- first
	}()
	select {
	case parts := <-assigned:
		if len(parts) != 4 {
			t.Fatalf("assigned %v, want the 4 partitions", parts)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no assignment within 20s")
	}
	before := fetchRequests(t, n)
	<-time.After(idleWindow) // the consumer idles
	fetches := fetchRequests(t, n) - before
	t.Logf("%d Fetch requests in %v", fetches, idleWindow)
	if fetches < 2 || fetches > maxIdleFetches {
		t.Errorf("%d Fetch requests in %v of idling (MaxWait %v), want 2..%d", fetches, idleWindow, fetchWait, maxIdleFetches)
	}

	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	var commitErr error
	cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{"work": {0: {Epoch: 0, Offset: 0}, 3: {Epoch: 0, Offset: 0}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil {
				for _, rt := range resp.Topics {
					for _, p := range rt.Partitions {
						commitErr = errors.Join(commitErr, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	cancel()
	if err := <-polled; err != nil {
		t.Errorf("fetch error: %v", err)
	}
	if records != 0 {
		t.Errorf("%d records polled from an empty topic", records)
	}
	if l := logs.get(); len(l) > 0 {
		t.Errorf("franz-go warned: %q", l)
	}

	adm := kadm.NewClient(client(t, n.Addr()))
	got, err := adm.FetchOffsets(cctx, "dp-kgo")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("work", 3); !ok || o.Err != nil || o.At != 0 {
		t.Errorf("committed work/3: %+v (found %v)", o, ok)
	}
	bad := kadm.Offsets{}
	bad.AddOffset("work", 9, 5, 0)
	resp, err := adm.CommitOffsets(cctx, "dp-simple", bad)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup("work", 9); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("commit of work/9 (the topic has 4 partitions): %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
}

// TestDataPlaneKcat: kcat's balanced consumer (librdkafka) against the node
// alone prints its assignment and idles without an error, at about one
// Fetch per fetch.wait.max.ms.
func TestDataPlaneKcat(t *testing.T) {
	testwait.WallClock(t, "kcat against a live node")
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed; apt-get install kcat (.ci/run does this)")
		}
		t.Skip("SKIPPED: kcat is not installed; apt-get install kcat to run this test")
	}
	n := startMetricsNode(t)
	if _, err := n.Catalog().Create("jobs", 3, nil); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kcat, "-b", n.Addr(), "-G", "dp-kcat", "-X", fmt.Sprintf("fetch.wait.max.ms=%d", fetchWait.Milliseconds()), "jobs")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	var out []string
	next := func(timeout <-chan time.Time) (string, bool) {
		select {
		case l, ok := <-lines:
			if ok {
				out = append(out, l)
				t.Logf("kcat: %s", l)
			}
			return l, ok
		case <-timeout:
			return "", false
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		l, ok := next(deadline)
		if !ok {
			t.Fatalf("kcat printed no assignment within 20s: %q", out)
		}
		if strings.Contains(l, "assigned: jobs [0], jobs [1], jobs [2]") {
			break
		}
	}
	before := fetchRequests(t, n)
	window := time.After(idleWindow)
	for {
		if _, ok := next(window); !ok {
			break
		}
	}
	fetches := fetchRequests(t, n) - before
	t.Logf("%d Fetch requests in %v", fetches, idleWindow)
	if fetches < 2 || fetches > maxIdleFetches {
		t.Errorf("kcat sent %d Fetch requests in %v of idling (fetch.wait.max.ms %v), want 2..%d", fetches, idleWindow, fetchWait, maxIdleFetches)
	}
	cmd.Process.Signal(syscall.SIGINT)
	stop := time.After(15 * time.Second)
	for {
		if _, ok := next(stop); !ok {
			break
		}
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("kcat did not exit after SIGINT")
	}
	for _, l := range out {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "Failed") || strings.HasPrefix(l, "%3|") || strings.HasPrefix(l, "%4|") {
			t.Errorf("kcat reported a problem: %s", l)
		}
	}
}
