package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// floorServer is the cheapest server the throughput cases can be run
// against: one goroutine per connection that reads a request, answers it
// and reads the next, with no coordinator behind it. Heartbeats get a
// prepared success response; OffsetCommit requests are decoded and every
// partition is answered with success, nothing is stored. It is not a
// coordinator: it measures what the load generator and the loopback
// socket cost, the floor under any server's cost per request on this
// machine.
type floorServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startFloor(t testing.TB) *floorServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &floorServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				if err := serveFloor(nc); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					t.Errorf("floor server: %v", err)
				}
			}()
		}
	}()
	return s
}

func (s *floorServer) addr() string { return s.ln.Addr().String() }

func (s *floorServer) close() {
	s.ln.Close()
	s.wg.Wait()
}

// serveFloor answers ApiVersions v0 (Heartbeat and OffsetCommit only),
// Heartbeat and OffsetCommit on nc until the client hangs up.
func serveFloor(nc net.Conn) error {
	br := bufio.NewReaderSize(nc, 16<<10)
	var (
		size [4]byte
		buf  []byte
		out  []byte
	)
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > 1<<20 {
			return fmt.Errorf("frame of %d bytes", n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		frame := buf[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return err
		}
		rd := kbin.Reader{Src: frame}
		key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
		rd.NullableString() // client id
		var resp kmsg.Response
		switch key {
		case 18:
			r := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []struct{ key, max int16 }{{8, 9}, {12, 4}} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k.key, k.max
				r.ApiKeys = append(r.ApiKeys, ak)
			}
			resp = r
		case 12:
			resp = kmsg.NewPtrHeartbeatResponse()
		case 8:
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version = version
			if req.IsFlexible() {
				kmsg.SkipTags(&rd)
			}
			if err := req.ReadFrom(rd.Src); err != nil {
				return err
			}
			r := kmsg.NewPtrOffsetCommitResponse()
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition = p.Partition
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
			resp = r
		default:
			return fmt.Errorf("floor server: key %d not served", key)
		}
		if key != 18 {
			resp.SetVersion(version)
		}
		out = appendFrame(out[:0], corr, resp)
		if _, err := nc.Write(out); err != nil {
			return err
		}
	}
}

// appendFrame frames resp (size, correlation id, header tags when
// flexible, body).
func appendFrame(dst []byte, corr int32, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, corr)
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}

// floorHeartbeats runs the heartbeat load of heartbeatCase (members
// connections, a Heartbeat at a time each) against the floor server.
func floorHeartbeats(ctx context.Context, addr string, members int, window time.Duration) (Throughput, error) {
	conns := make([]*rawConn, members)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	reqs := make([]*kmsg.HeartbeatRequest, members)
	resps := make([]*kmsg.HeartbeatResponse, members)
	for i := range conns {
		c, err := dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-%d", i), nil)
		if err != nil {
			return Throughput{}, err
		}
		conns[i] = c
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation = "floor", fmt.Sprintf("member-%d", i), 1
		if r.Version, err = c.version(r, 4); err != nil {
			return Throughput{}, err
		}
		reqs[i], resps[i] = r, kmsg.NewPtrHeartbeatResponse()
	}
	t, err := load(ctx, members, window, func(ctx context.Context, w int) (bool, error) {
		err := conns[w].do(ctx, reqs[w], resps[w])
		return err == nil && resps[w].ErrorCode == 0, err
	})
	t.Kind, t.Groups = "heartbeat", 1
	return t, err
}

// floorCommits runs the commit load of commitCase (committers connections,
// partitions offsets per request) against the floor server.
func floorCommits(ctx context.Context, addr string, committers, partitions int, window time.Duration) (Throughput, error) {
	cs := make([]*committer, committers)
	defer func() {
		for _, c := range cs {
			if c != nil && c.raw != nil {
				c.raw.Close()
			}
		}
	}()
	for i := range cs {
		raw, err := dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-committer-%d", i), nil)
		if err != nil {
			return Throughput{}, err
		}
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = fmt.Sprintf("floor-%d", i), -1
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = "floor"
		for p := range partitions {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition = int32(p)
			tp.Partitions = append(tp.Partitions, pp)
		}
		r.Topics = []kmsg.OffsetCommitRequestTopic{tp}
		cs[i] = &committer{raw: raw, req: r, group: r.Group}
		if r.Version, err = raw.version(r, 9); err != nil {
			return Throughput{}, err
		}
	}
	t, err := load(ctx, committers, window, func(ctx context.Context, w int) (bool, error) {
		return cs[w].commit(ctx)
	})
	t.Kind, t.Partitions = "commit", partitions
	return t, err
}

// namedAddr is a throughput target: a name and a bootstrap address.
type namedAddr struct{ name, addr string }

// series holds throughput results: per case (in run order), per target, one
// value per series.
type series struct {
	cases   []string
	results map[string]map[string][]float64
}

// runSeries runs the heartbeat case (members heartbeating, one group) and
// the commit cases (each count of committers, one partition per commit)
// against every target, one target after the other within each case, the
// whole sequence repeat times, so that a change in the machine's load falls
// on all targets alike. The target named "floor" is the floor server.
func runSeries(t *testing.T, tgts []namedAddr, members int, committers []int, window time.Duration, repeat int, prefix string) *series {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := &series{results: map[string]map[string][]float64{}}
	record := func(target, name string, tp Throughput) {
		if s.results[target] == nil {
			s.results[target] = map[string][]float64{}
		}
		if !slices.Contains(s.cases, name) {
			s.cases = append(s.cases, name)
		}
		if tp.OK <= 0 {
			t.Errorf("%s %s: nothing answered: %+v", target, name, tp)
		}
		s.results[target][name] = append(s.results[target][name], tp.PerSec())
	}
	config := func(tg namedAddr, rep int) Config {
		cfg := Defaults()
		cfg.Bootstrap, cfg.Duration, cfg.RoundTimeout = tg.addr, window, 30*time.Second
		cfg.Prefix = fmt.Sprintf("%s-%s-%d", prefix, tg.name, rep)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for rep := range repeat {
		for _, tg := range tgts {
			var tp Throughput
			var err error
			if tg.name == "floor" {
				tp, err = floorHeartbeats(ctx, tg.addr, members, window)
			} else {
				tp, err = heartbeatCase(ctx, config(tg, rep), members, 1)
			}
			if err != nil {
				t.Fatalf("%s: %v", tg.name, err)
			}
			record(tg.name, fmt.Sprintf("heartbeats/s, %d members", members), tp)
		}
		for _, n := range committers {
			for _, tg := range tgts {
				var tp Throughput
				var err error
				if tg.name == "floor" {
					tp, err = floorCommits(ctx, tg.addr, n, 1, window)
				} else {
					tp, err = commitCase(ctx, config(tg, rep), n, 1)
				}
				if err != nil {
					t.Fatalf("%s: %v", tg.name, err)
				}
				record(tg.name, fmt.Sprintf("commits/s, %d committers × 1 partition", n), tp)
			}
		}
	}
	return s
}

// table renders the medians with every target's ratio to kfake, and to the
// floor server when there is one.
func (s *series) table(tgts []namedAddr) string {
	var others []string
	hasFloor := false
	for _, tg := range tgts {
		if tg.name == "floor" {
			hasFloor = true
		}
		if tg.name != "kfake" {
			others = append(others, tg.name)
		}
	}
	var sb strings.Builder
	sb.WriteString("| measurement |")
	cols := 0
	for _, tg := range tgts {
		sb.WriteString(" " + tg.name + " |")
		cols++
	}
	for _, o := range others {
		sb.WriteString(" " + o + " / kfake |")
		cols++
		if hasFloor && o != "floor" {
			sb.WriteString(" " + o + " / floor |")
			cols++
		}
	}
	sb.WriteString("\n|---|" + strings.Repeat("---:|", cols) + "\n")
	for _, name := range s.cases {
		med := map[string]float64{}
		for _, tg := range tgts {
			med[tg.name] = median(s.results[tg.name][name])
		}
		fmt.Fprintf(&sb, "| %s |", name)
		for _, tg := range tgts {
			fmt.Fprintf(&sb, " %s |", count(med[tg.name]))
		}
		for _, o := range others {
			fmt.Fprintf(&sb, " %.2f× |", med[o]/med["kfake"])
			if hasFloor && o != "floor" {
				fmt.Fprintf(&sb, " %.2f× |", med[o]/med["floor"])
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// benchCommitters is the committer counts of the floor and isolated
// benchmarks: COHORT_BENCH_COMMITTERS, or def.
func benchCommitters(t *testing.T, def []int) []int {
	v := os.Getenv("COHORT_BENCH_COMMITTERS")
	if v == "" {
		return def
	}
	xs, err := ParseCounts(v)
	if err != nil {
		t.Fatal(err)
	}
	return xs
}

// TestFloor measures, in one run, the heartbeat and commit loads against
// the floor server (no coordinator behind the socket), against kfake and
// against cohort. floor / kfake bounds what any server can reach against
// kfake in this benchmark on this machine: a coordinator cannot cost less
// than nothing. With COHORT_BENCH=1 it runs the sizes (three
// interleaved series, 1 s windows, medians) and logs the table; otherwise
// a short sanity run checks that every target answers.
func TestFloor(t *testing.T) {
	testwait.WallClock(t, "benchmark: cohort and its peer measured side by side")
	full := !testing.Short() && os.Getenv("COHORT_BENCH") == "1"
	// The sanity run's window is long enough for a durable commit to
	// complete in it on a loaded machine (a CI run once saw no commit of
	// cohort-disk answered within 100 ms while other jobs shared the disk).
	window, repeat := 400*time.Millisecond, 1
	committers := []int{16}
	if full {
		window, repeat = time.Second, 3
		committers = []int{1, 16, 64, 256}
	}
	committers = benchCommitters(t, committers)
	const members = 200
	if err := RaiseFileLimit(4 * (members + 256)); err != nil {
		t.Skip(err)
	}
	floor := startFloor(t)
	defer floor.close()
	tgts := []namedAddr{{"floor", floor.addr()}}
	for _, tg := range targets {
		switch tg.name {
		case "kfake", "cohort-mem", "cohort-disk":
			addr, stop := tg.start(t)
			t.Cleanup(stop)
			tgts = append(tgts, namedAddr{tg.name, addr})
		}
	}
	s := runSeries(t, tgts, members, committers, window, repeat, "floor")
	t.Log("\n" + s.table(tgts))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	return s[len(s)/2]
}
