package console

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
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

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// benchNodeEnv makes the test binary a node of its own (runBenchNode) for
// BenchmarkGroupsPageSearch: the node runs in a child process so that the
// benchmark's allocations are the console's alone.
const benchNodeEnv = "COHORT_BENCH_CONSOLE_NODE"

// runBenchNode serves a node without authentication on 127.0.0.1, prints
// its address, and then answers each line "alloc" on stdin with the bytes
// the process has allocated so far; it stops at the end of stdin.
func runBenchNode() {
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: gcfg, ClusterID: "bench",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		fmt.Println(ms.TotalAlloc)
	}
}

// proxyNode is a Kafka server at addr (a node in another process, or
// kfake) seen by the console as its own node without authentication:
// every connection the console opens to it is relayed over TCP, and its
// bytes, both ways, are counted in wire.
type proxyNode struct {
	addr string
	wire atomic.Int64
}

func (n *proxyNode) ConsoleListener() (string, bool, error) { return "PLAINTEXT", false, nil }
func (n *proxyNode) ConsolePeerTLS() *tls.Config            { return nil }
func (n *proxyNode) SelfAddrs() []string                    { return []string{n.addr} }
func (n *proxyNode) FailedAuthDelay() time.Duration         { return 0 }
func (n *proxyNode) ConsoleMechanisms() []string            { return nil }
func (n *proxyNode) ConsoleCredentials(string) []string     { return nil }

func (n *proxyNode) ServeInternal(nc net.Conn) error {
	tc, err := net.Dial("tcp", n.addr)
	if err != nil {
		return err
	}
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			k, err := src.Read(buf)
			n.wire.Add(int64(k))
			if k > 0 {
				if _, werr := dst.Write(buf[:k]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pump(tc, nc)
	go pump(nc, tc)
	return nil
}

// benchNode is a node in a child process, seen by the console as its own
// node (proxyNode).
type benchNode struct {
	proxyNode
	stdin io.WriteCloser
	out   *bufio.Scanner
	cmd   *exec.Cmd
}

// allocated is the bytes the node's process has allocated so far.
func (n *benchNode) allocated(tb testing.TB) uint64 {
	tb.Helper()
	if _, err := io.WriteString(n.stdin, "alloc\n"); err != nil {
		tb.Fatal(err)
	}
	if !n.out.Scan() {
		tb.Fatal("the node process stopped")
	}
	v, err := strconv.ParseUint(n.out.Text(), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// startBenchNode starts the node process and loads groups into it: groups
// classic groups with one committed offset each, named grp-0000000 ...,
// and among them the 12 of needles, named team-needle-00 ... team-needle-11.
func startBenchNode(b *testing.B, groups int) *benchNode {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchNodeEnv+"=1")
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
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.WithLogger(nil), byname.Opt())
			if err != nil {
				failed.Store(err)
				return
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			for i := w; i < groups && failed.Load() == nil; i += workers {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version, req.Generation = 8, -1
				req.Group = benchGroupID(i, groups)
				tp := kmsg.NewOffsetCommitRequestTopic()
				tp.Topic = "t"
				pp := kmsg.NewOffsetCommitRequestTopicPartition()
				pp.Offset = int64(i)
				tp.Partitions = append(tp.Partitions, pp)
				req.Topics = append(req.Topics, tp)
				resp, err := req.RequestWith(ctx, cl)
				if err == nil && resp.Topics[0].Partitions[0].ErrorCode != 0 {
					err = fmt.Errorf("commit %s: error code %d", req.Group, resp.Topics[0].Partitions[0].ErrorCode)
				}
				if err != nil {
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
	groups := 100000
	if v := os.Getenv("COHORT_BENCH_CONSOLE_GROUPS"); v != "" {
		var err error
		if groups, err = strconv.Atoi(v); err != nil || groups < benchNeedles {
			b.Fatalf("COHORT_BENCH_CONSOLE_GROUPS=%q: want a count of at least %d", v, benchNeedles)
		}
	}
	n := startBenchNode(b, groups)
	c := New(n, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.timeout = 5 * time.Minute
	srv := httptest.NewServer(c)
	defer srv.Close()
	hc := &http.Client{Timeout: 5 * time.Minute}
	view := func(b *testing.B, query string) int {
		resp, err := hc.Get(srv.URL + "/console/" + query)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %v %.300s", query, resp.StatusCode, err, body)
		}
		return len(body)
	}
	cases := []struct {
		name, query string
		matching    int
	}{
		{"nosearch", "", groups},
		{"few", "?q=needle", benchNeedles},
		{"fewprefix", "?q=team-needle-&match=prefix", benchNeedles},
		{"everything", "?q=-", groups},
	}
	for _, tc := range cases {
		// The page says how many match: the benchmark measures the page
		// the person would see.
		want := fmt.Sprintf("%s of %s groups match", num(tc.matching), num(groups))
		if tc.matching > maxGroupRows {
			want = fmt.Sprintf("the first %s of %s matching groups", num(maxGroupRows), num(tc.matching))
		}
		// The console filters the list of every group (the only mode
		// so far).
		for _, mode := range []string{"console"} {
			resp, err := hc.Get(srv.URL + "/console/" + tc.query)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), want) {
				b.Fatalf("%s, filtered by the %s: the page does not say %q", tc.query, mode, want)
			}
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				b.ReportAllocs()
				runtime.GC()
				w0, a0 := n.wire.Load(), n.allocated(b)
				page := 0
				b.ResetTimer()
				for b.Loop() {
					page = view(b, tc.query)
				}
				b.StopTimer()
				b.ReportMetric(float64(n.wire.Load()-w0)/float64(b.N), "wire-B/op")
				b.ReportMetric(float64(n.allocated(b)-a0)/float64(b.N), "node-B/op")
				b.ReportMetric(float64(page), "page-B")
			})
			if tc.name == "nosearch" || tc.name == "few" {
				b.Run(tc.name+"-parallel/"+mode, func(b *testing.B) {
					b.SetParallelism(2) // 4 views at once on 2 cores
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							view(b, tc.query)
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
