package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// benchNodeEnv makes the test binary a node of its own (runBenchNode) for
// BenchmarkGroupsPageSearch: the node runs in a child process so that the
// benchmark's allocations are the console's alone.
const benchNodeEnv = "COHORT_BENCH_CONSOLE_NODE"

// runBenchNode serves a node without authentication on 127.0.0.1, prints
// its address, and then answers each line "alloc" on stdin with the bytes
// the process has allocated so far and the CPU time it has used (ns); it
// stops at the end of stdin.
//
// With the variable set to "secure", its listener is SASL (SCRAM), with the
// tests' admin user as super user, as startNode's secure node.
func runBenchNode() {
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	cfg := node.Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: gcfg, ClusterID: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv(benchNodeEnv) == "secure" {
		cfg.Listen = ""
		cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
		cfg.Security = &node.SecurityConfig{Mechanisms: []string{sasl.ScramSHA512}, BootstrapUser: "admin",
			BootstrapPassword: adminPassword, SuperUsers: []string{"User:admin"}}
	}
	n, err := node.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(n.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Println(ms.TotalAlloc, processCPU().Nanoseconds())
	}
}

// benchNode is a node in a child process, seen by the console as its own
// node (proxyNode).
type benchNode struct {
	proxyNode
	stdin io.WriteCloser
	out   *bufio.Scanner
	cmd   *exec.Cmd
}

// usage is the bytes the node's process has allocated so far, and the CPU
// time it has used.
func (n *benchNode) usage(tb testing.TB) (uint64, time.Duration) {
	tb.Helper()
	if _, err := io.WriteString(n.stdin, "alloc\n"); err != nil {
		tb.Fatal(err)
	}
	if !n.out.Scan() {
		tb.Fatal("the node process stopped")
	}
	var alloc uint64
	var cpu int64
	if _, err := fmt.Sscan(n.out.Text(), &alloc, &cpu); err != nil {
		tb.Fatalf("the node's usage %q: %v", n.out.Text(), err)
	}
	return alloc, time.Duration(cpu)
}

// startBenchNode starts the node process and loads groups into it: groups
// classic groups with one committed offset each, named grp-0000000 ...,
// and among them the 12 of needles, named team-needle-00 ... team-needle-11.
// A secure node is loaded by the admin user (benchAdmin).
func startBenchNode(b *testing.B, groups int, secure bool) *benchNode {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchNodeEnv+"=1")
	if secure {
		cmd.Env = append(os.Environ(), benchNodeEnv+"=secure")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	n := &benchNode{stdin: stdin, out: bufio.NewScanner(stdout), cmd: cmd}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	if !n.out.Scan() {
		b.Fatal("the node process did not start")
	}
	n.addr = n.out.Text()
	t0 := time.Now()
	const workers = 4
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range workers {
		wg.Go(func() {
			opts := []kgo.Opt{kgo.SeedBrokers(n.addr), kgo.WithLogger(nil), byname.Opt()}
			if secure {
				opts = append(opts, benchAdmin())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				failed.Store(err)
				return
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			for i := w; i < groups && failed.Load() == nil; i += workers {
				if err := benchCommit(ctx, cl, benchGroupID(i, groups), int64(i)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d groups loaded in %v", groups, time.Since(t0).Round(time.Second))
	return n
}

// benchCommit commits offset for partition 0 of topic t in group (a
// simple commit, without a generation).
func benchCommit(ctx context.Context, cl *kgo.Client, group string, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Generation = 8, -1
	req.Group = group
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	pp := kmsg.NewOffsetCommitRequestTopicPartition()
	pp.Offset = offset
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && resp.Topics[0].Partitions[0].ErrorCode != 0 {
		err = fmt.Errorf("commit %s: error code %d", req.Group, resp.Topics[0].Partitions[0].ErrorCode)
	}
	return err
}

// benchAdmin authenticates a client of a secure bench node as its admin.
func benchAdmin() kgo.Opt {
	return kgo.SASL(scram.Auth{User: "admin", Pass: adminPassword}.AsSha512Mechanism())
}

// saslBenchNode is a secure bench node, seen by the console as its own
// SASL node: the console logs in as the person using it, with SCRAM.
type saslBenchNode struct{ *benchNode }

func (n saslBenchNode) ConsoleListener() (string, bool, error) { return "SASL_PLAINTEXT", true, nil }
func (n saslBenchNode) ConsoleMechanisms() []string            { return []string{sasl.ScramSHA512} }
func (n saslBenchNode) ConsoleCredentials(string) []string     { return []string{sasl.ScramSHA512} }

// benchNeedles is how many of the benchmark's groups the search finds.
const benchNeedles = 12

// benchGroupID names the benchmark's group i of n: every n/benchNeedles-th
// is a needle.
func benchGroupID(i, n int) string {
	if step := n / benchNeedles; i%step == 0 && i/step < benchNeedles {
		return fmt.Sprintf("team-needle-%02d", i/step)
	}
	return fmt.Sprintf("grp-%07d", i)
}

// BenchmarkGroupsPageSearch measures a view of the groups page on a node
// holding many groups (100,000; COHORT_BENCH_CONSOLE_GROUPS sets another
// count): without a search, with a search that matches 12 groups, and with
// one that matches every group, and how many views a second the machine
// serves (the "parallel" ones). The node is a child process: B/op is the
// console's allocation (kgo's client included), node-B/op the node's, and
// wire-B/op the bytes between them. Skipped with -short.
//
//	go test -run '^$' -bench GroupsPageSearch -benchmem -benchtime 10x ./console/
func BenchmarkGroupsPageSearch(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 100,000 groups into a node (about a minute)")
	}
	groups := benchGroups(b)
	n := startBenchNode(b, groups, false)
	c := New(n, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.timeout = 5 * time.Minute
	srv := httptest.NewServer(c)
	defer srv.Close()
	hc := &http.Client{Timeout: 5 * time.Minute}
	view := func(query string) (int, error) { return getPage(hc, srv.URL+"/console/"+query, "", "") }
	cases := []struct {
		name, query string
		matching    int
	}{
		{"nosearch", "", groups},
		{"few", "?q=needle", benchNeedles},
		{"fewprefix", "?q=team-needle-&match=prefix", benchNeedles},
		{"everything", "?q=-", groups},
	}
	defer func(on bool) { listFilterPushdown = on }(listFilterPushdown)
	for _, tc := range cases {
		// The page says how many match: the benchmark measures the page
		// the person would see.
		want := fmt.Sprintf("%s of %s groups match", num(tc.matching), num(groups))
		if tc.matching > maxGroupRows {
			want = fmt.Sprintf("the first %s of %s matching groups", num(maxGroupRows), num(tc.matching))
		}
		// "console": the filter applied in the console to every group
		// listed, as before group.ListFilterTag (and against a node
		// without it); "node": the node filters.
		for _, mode := range []string{"console", "node"} {
			listFilterPushdown = mode == "node"
			resp, err := hc.Get(srv.URL + "/console/" + tc.query)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				// A page that fails (at 1,000,000 groups, the console's
				// ListGroups times out) is a result: said, not measured.
				b.Logf("%s, filtered by the %s: %d %.300s", tc.query, mode, resp.StatusCode, body)
				continue
			}
			if !strings.Contains(string(body), want) {
				b.Fatalf("%s, filtered by the %s: the page does not say %q", tc.query, mode, want)
			}
			b.Run(tc.name+"/"+mode, func(b *testing.B) { measureViews(b, n, func() (int, error) { return view(tc.query) }) })
			if tc.name == "nosearch" || tc.name == "few" {
				b.Run(tc.name+"-parallel/"+mode, func(b *testing.B) {
					b.SetParallelism(2) // 4 views at once on 2 cores
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := view(tc.query); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		}
	}
}

// num writes n with thousands separators, as the page does.
func num(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// benchGroups is how many groups the console benchmarks load: 100,000, or
// COHORT_BENCH_CONSOLE_GROUPS.
func benchGroups(b *testing.B) int {
	groups := 100000
	if v := os.Getenv("COHORT_BENCH_CONSOLE_GROUPS"); v != "" {
		var err error
		if groups, err = strconv.Atoi(v); err != nil || groups < benchNeedles {
			b.Fatalf("COHORT_BENCH_CONSOLE_GROUPS=%q: want a count of at least %d", v, benchNeedles)
		}
	}
	return groups
}

// getPage gets url (as user, when user is set) and returns the page's
// size, or an error naming the status and the start of the page.
func getPage(hc *http.Client, url, user, password string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %d %.300s", url, resp.StatusCode, body)
	}
	return len(body), err
}

// measureViews runs view b.N times and reports, per view, the bytes
// between the console and the node (wire-B/op), the bytes the node
// allocated (node-B/op), the CPU time the node's process and this one (the
// console, with the HTTP client) used (node-cpu-µs/op, console-cpu-µs/op),
// and the page's size (page-B).
func measureViews(b *testing.B, n *benchNode, view func() (int, error)) {
	b.ReportAllocs()
	runtime.GC()
	w0 := n.wire.Load()
	a0, nc0 := n.usage(b)
	c0 := processCPU()
	page := 0
	b.ResetTimer()
	for b.Loop() {
		var err error
		if page, err = view(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c1 := processCPU()
	a1, nc1 := n.usage(b)
	b.ReportMetric(float64(n.wire.Load()-w0)/float64(b.N), "wire-B/op")
	b.ReportMetric(float64(a1-a0)/float64(b.N), "node-B/op")
	b.ReportMetric(float64((nc1-nc0).Microseconds())/float64(b.N), "node-cpu-µs/op")
	b.ReportMetric(float64((c1-c0).Microseconds())/float64(b.N), "console-cpu-µs/op")
	b.ReportMetric(float64(page), "page-B")
}
