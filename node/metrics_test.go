package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/buildinfo"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// scrape is one read of a node's /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t testing.TB, addr string) scrape {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

func httpGet(t testing.TB, addr, path string) (int, string) {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// labelValue names the first series with one of values as a label value
// ("family{label=value}"), or "" if none has.
func (s scrape) labelValue(values ...string) string {
	for name, mf := range s {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if slices.Contains(values, l.GetValue()) {
					return name + "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
			}
		}
	}
	return ""
}

// value sums the series of name whose labels include labels (k, v pairs):
// counter and gauge values, histogram sample counts. -1 if the family is
// missing.
func (s scrape) value(name string, labels ...string) float64 {
	mf, ok := s[name]
	if !ok {
		return -1
	}
	sum := 0.0
	for _, m := range mf.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// waitMetric polls /metrics (bounded) until ok holds for the value of
// name{labels}; it fails the test with the last value otherwise.
func waitMetric(t *testing.T, addr string, within time.Duration, ok func(float64) bool, name string, labels ...string) float64 {
	t.Helper()
	var v float64
	if !testwait.Until(within, func() bool {
		v = scrapeMetrics(t, addr).value(name, labels...)
		return ok(v)
	}) {
		t.Fatalf("%s%v stayed at %v for %v", name, labels, v, within)
	}
	return v
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func above(base float64) func(float64) bool {
	return func(v float64) bool { return v > base }
}
func atLeast(want float64) func(float64) bool {
	return func(v float64) bool { return v >= want }
}

// metricsNode starts a node with an HTTP listener.
func metricsNode(t *testing.T, st store.Store) *Node {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	n := startLoaded(t, Config{
		Listen:     "127.0.0.1:0",
		HTTPListen: "127.0.0.1:0",
		Store:      st,
		Group:      cfg,
		Rand:       seeded{rand.NewChaCha8([32]byte{7})},
		Logger:     slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClusterID:  "test",
	})
	t.Cleanup(func() { n.Close() })
	return n
}

// churnConsumer is a franz-go classic group member polling in the
// background.
type churnConsumer struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startChurnConsumer(t *testing.T, addr, groupID, topic string) *churnConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &churnConsumer{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	return c
}

// leave stops polling and closes the client, which leaves the group.
func (c *churnConsumer) leave() {
	c.stop()
	<-c.done
	c.cl.Close()
}

// TestMetricsChurn scrapes /metrics of a live node while franz-go classic
// consumers join and leave a group, and checks that every family moves as
// the scenario dictates: requests and their latency count up, the groups
// and members gauges follow the group, offsets committed count exactly the
// committed partitions, rebalances show as REBALANCE_IN_PROGRESS heartbeat
// errors, connections are counted on their listener, and the store's
// appends are timed.
func TestMetricsChurn(t *testing.T) {
	n := metricsNode(t, memstore.New())
	addr := n.HTTPAddr()
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, addr, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, addr, "/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
	base := scrapeMetrics(t, addr)
	for _, name := range []string{"cohort_groups", "cohort_group_members", "cohort_server_requests_total",
		"cohort_coordinator_partitions_owned", "cohort_coordinator_partitions_loading"} {
		if base.value(name) < 0 {
			t.Errorf("no %s before any client", name)
		}
	}
	if v := base.value("cohort_coordinator_partitions_owned"); v != 50 {
		t.Errorf("partitions owned %v, want 50", v)
	}
	if v := base.value("cohort_coordinator_partitions_loading"); v != 0 {
		t.Errorf("partitions loading %v, want 0", v)
	}
	if v := base.value("cohort_groups"); v != 0 {
		t.Errorf("groups %v before any client, want 0", v)
	}

	// Three members join.
	var cs []*churnConsumer
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			c.leave()
		}
	}()
	for range 3 {
		mu.Lock()
		cs = append(cs, startChurnConsumer(t, n.Addr(), "churn", "events"))
		mu.Unlock()
	}
	waitMetric(t, addr, 30*time.Second, eq(3), "cohort_group_members", "type", "classic")
	waitMetric(t, addr, 30*time.Second, eq(1), "cohort_groups", "type", "classic", "state", "Stable")
	s := scrapeMetrics(t, addr)
	if v := s.value("cohort_server_connections", "listener", "PLAINTEXT"); v < 3 {
		t.Errorf("connections on PLAINTEXT %v with three clients", v)
	}
	// /metrics may be open to anyone who reaches the HTTP port: it names
	// no group or topic (docs/security.md), only counts them.
	if where := s.labelValue("churn", "events"); where != "" {
		t.Errorf("/metrics names a group or topic: %s", where)
	}
	// A request is counted after its response is written, and a
	// follower's SyncGroup may come after the leader's made the group
	// Stable: the counts reach three each soon after, not necessarily by
	// the time of the scrape above.
	for _, api := range []string{"JoinGroup", "SyncGroup", "FindCoordinator"} {
		b := max(base.value("cohort_server_requests_total", "api", api), 0)
		waitMetric(t, addr, 10*time.Second, atLeast(b+3), "cohort_server_requests_total", "api", api)
		waitMetric(t, addr, 10*time.Second, atLeast(3), "cohort_server_request_duration_seconds", "api", api)
	}
	// The gauges agree with what the coordinator tells a client.
	adm := kadm.NewClient(client(t, n.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A member may start another rebalance between the scrape and the
	// describe (a client rejoins when its topic metadata changes): the
	// group must settle back to Stable with the same three members.
	var g kadm.DescribedGroup
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		dg, err := adm.DescribeGroups(ctx, "churn")
		if err != nil {
			t.Fatal(err)
		}
		if g = dg["churn"]; (g.State == "Stable" && len(g.Members) == 3) || time.Now().After(end) {
			break
		}
	}
	if g.State != "Stable" || len(g.Members) != 3 {
		t.Errorf("DescribeGroups: %s with %d members", g.State, len(g.Members))
	}
	hb := waitMetric(t, addr, 10*time.Second, above(base.value("cohort_server_requests_total", "api", "Heartbeat")),
		"cohort_server_request_duration_seconds", "api", "Heartbeat")

	// Offsets committed: exactly the partitions committed.
	committedBefore := s.value("cohort_offsets_committed_total")
	appendsBefore := s.value("cohort_store_append_duration_seconds")
	os := kadm.Offsets{}
	for p := range int32(4) {
		os.Add(kadm.Offset{Topic: "events", Partition: p, At: 10 + int64(p), LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, "standalone", os); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, addr, 5*time.Second, eq(committedBefore+4), "cohort_offsets_committed_total")
	waitMetric(t, addr, 5*time.Second, above(appendsBefore), "cohort_store_append_duration_seconds")

	// One member leaves: the others learn of the rebalance through their
	// heartbeats, and the group settles with two.
	rebalBefore := scrapeMetrics(t, addr).value("cohort_server_request_errors_total", "api", "Heartbeat", "error", "REBALANCE_IN_PROGRESS")
	mu.Lock()
	cs[0].leave()
	cs = cs[1:]
	mu.Unlock()
	waitMetric(t, addr, 30*time.Second, eq(2), "cohort_group_members", "type", "classic")
	waitMetric(t, addr, 30*time.Second, eq(1), "cohort_groups", "type", "classic", "state", "Stable")
	waitMetric(t, addr, 10*time.Second, above(max(rebalBefore, 0)), "cohort_server_request_errors_total",
		"api", "Heartbeat", "error", "REBALANCE_IN_PROGRESS")
	// The group reports the rebalance the leave started, with its phases.
	waitMetric(t, addr, 10*time.Second, above(0), "cohort_rebalances_total", "type", "classic", "cause", "member_left")
	waitMetric(t, addr, 10*time.Second, above(0), "cohort_rebalance_sync_duration_seconds", "type", "classic")
	if v := scrapeMetrics(t, addr).value("cohort_server_requests_total", "api", "LeaveGroup"); v < 1 {
		t.Errorf("LeaveGroup requests %v, want at least 1", v)
	}

	// A new member joins: three again.
	mu.Lock()
	cs = append(cs, startChurnConsumer(t, n.Addr(), "churn", "events"))
	mu.Unlock()
	waitMetric(t, addr, 30*time.Second, eq(3), "cohort_group_members", "type", "classic")
	waitMetric(t, addr, 30*time.Second, eq(1), "cohort_groups", "type", "classic", "state", "Stable")
	waitMetric(t, addr, 10*time.Second, above(hb), "cohort_server_request_duration_seconds", "api", "Heartbeat")

	// Everyone leaves: the group is Empty, as is the offsets-only group.
	mu.Lock()
	for _, c := range cs {
		c.leave()
	}
	cs = nil
	mu.Unlock()
	waitMetric(t, addr, 30*time.Second, eq(0), "cohort_group_members", "type", "classic")
	waitMetric(t, addr, 10*time.Second, eq(2), "cohort_groups", "type", "classic", "state", "Empty")
	if v := scrapeMetrics(t, addr).value("cohort_groups", "state", "Stable"); v != 0 {
		t.Errorf("Stable groups %v after every member left", v)
	}
}

// gatedStore holds the load of one partition until gate is closed.
type gatedStore struct {
	store.Store
	part int32
	gate chan struct{}
}

func (s gatedStore) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	if p == s.part {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Load(ctx, p, fn)
}

// TestReadyzWhileLoading: /readyz answers 503 naming the partition that is
// still loading, the loading gauge shows it, cohort_ready is 0, and all
// recover once it has loaded; /healthz answers 200 throughout.
func TestReadyzWhileLoading(t *testing.T) {
	st := gatedStore{Store: memstore.New(), part: 7, gate: make(chan struct{})}
	n, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: st, ClusterID: "test",
		Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.HTTPAddr()
	// Every partition but 7 loads; wait (bounded) until only 7 is left.
	waitMetric(t, addr, 20*time.Second, eq(1), "cohort_coordinator_partitions_loading")
	code, body := httpGet(t, addr, "/readyz")
	if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "loading 1 of 50 coordinator partitions (7)" {
		t.Errorf("/readyz while loading: %d %q", code, body)
	}
	if v := scrapeMetrics(t, addr).value("cohort_ready"); v != 0 {
		t.Errorf("cohort_ready %v while /readyz answers 503", v)
	}
	if code, _ := httpGet(t, addr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while loading: %d", code)
	}
	close(st.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	// Loaded means the loop has applied it; the handler reads the same state.
	waitMetric(t, addr, 5*time.Second, eq(0), "cohort_coordinator_partitions_loading")
	if code, body := httpGet(t, addr, "/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/readyz once loaded: %d %q", code, body)
	}
	if v := scrapeMetrics(t, addr).value("cohort_ready"); v != 1 {
		t.Errorf("cohort_ready %v while /readyz answers 200", v)
	}
	if v := scrapeMetrics(t, addr).value("cohort_store_load_duration_seconds"); v != 50 {
		t.Errorf("partition loads timed %v, want 50", v)
	}
}

// TestReadyHandler: the handler's codes and bodies.
func TestReadyHandler(t *testing.T) {
	for _, tc := range []struct {
		ok   bool
		why  string
		code int
	}{{true, "ok", 200}, {false, "no valid etcd lease", 503}} {
		srv := readyHandler(func() (bool, string) { return tc.ok, tc.why })
		rec := &recorder{header: http.Header{}}
		srv.ServeHTTP(rec, nil)
		if rec.code != tc.code || rec.body.String() != tc.why+"\n" {
			t.Errorf("ready %v: %d %q", tc.ok, rec.code, rec.body.String())
		}
	}
}

type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// TestMetricsAuthFailures: a wrong password counts one authentication
// failure on its listener and mechanism; a good one a success; the open
// connection is counted on the SASL listener.
func TestMetricsAuthFailures(t *testing.T) {
	cfg := secureConfig(t, memstore.New())
	cfg.HTTPListen = "127.0.0.1:0"
	n := startLoaded(t, cfg)
	defer n.Close()
	addr := n.HTTPAddr()
	lbl := []string{"listener", server.ProtocolSASLPlaintext, "mechanism", "SCRAM-SHA-512"}
	r := dialRaw(t, n.Addr())
	if err := r.scramLoginErr("admin", "wrong-password"); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	waitMetric(t, addr, 5*time.Second, eq(1), "cohort_server_authentications_total", append(lbl, "result", "failure")...)
	r2 := dialRaw(t, n.Addr())
	r2.scramLogin(t, "admin", adminPassword)
	waitMetric(t, addr, 5*time.Second, eq(1), "cohort_server_authentications_total", append(lbl, "result", "success")...)
	if v := scrapeMetrics(t, addr).value("cohort_server_connections", "listener", server.ProtocolSASLPlaintext); v < 1 {
		t.Errorf("connections on the SASL listener %v with one open", v)
	}
}

// TestHTTPListener: the deprecated MetricsListen still opens the listener,
// and HTTPHandlers adds handlers to its mux.
func TestHTTPListener(t *testing.T) {
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Store: memstore.New(), ClusterID: "test",
		Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		HTTPHandlers: func(mux *http.ServeMux, n *Node) {
			mux.HandleFunc("GET /console", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, n.Addr()) })
		}})
	defer n.Close()
	if n.MetricsAddr() == "" || n.MetricsAddr() != n.HTTPAddr() {
		t.Fatalf("MetricsAddr %q, HTTPAddr %q", n.MetricsAddr(), n.HTTPAddr())
	}
	if code, body := httpGet(t, n.HTTPAddr(), "/console"); code != 200 || body != n.Addr() {
		t.Errorf("/console: %d %q", code, body)
	}
	if n.HTTPMux() == nil {
		t.Error("no HTTPMux")
	}
}

// TestBuildInfo: /metrics has cohort_build_info at 1 with the build's
// version, revision and Go version, and the start line names the version.
func TestBuildInfo(t *testing.T) {
	var logs testlog.Buffer
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: memstore.New(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	defer n.Close()
	version, revision, _ := buildinfo.Info()
	s := scrapeMetrics(t, n.HTTPAddr())
	if got := s.value("cohort_build_info", "version", version, "revision", revision, "goversion", runtime.Version()); got != 1 {
		t.Errorf("cohort_build_info{version=%q,revision=%q,goversion=%q} = %v, want 1", version, revision, runtime.Version(), got)
	}
	if mf := s["cohort_build_info"]; mf == nil || len(mf.Metric) != 1 {
		t.Errorf("cohort_build_info: %v, want one series", mf)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="cohort serving"`) {
			line = l
		}
	}
	if want := fmt.Sprintf("version=%q", buildinfo.String()); !strings.Contains(line, want) && !strings.Contains(line, "version="+buildinfo.String()+" ") {
		t.Errorf("start line %q lacks %s", line, want)
	}
}
