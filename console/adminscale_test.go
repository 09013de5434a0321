package console

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

func scaleEnv(k string, d int) int {
	if v := os.Getenv("COHORT_BENCH_ADMIN_" + k); v != "" {
		var n int
		fmt.Sscan(v, &n)
		return n
	}
	return d
}

// TestAdminPathsAtScale measures the admin requests, the console's group
// list and /metrics on a node holding many groups, topics and ACLs (the
// figures of docs/benchmarks.md, "Admin paths at scale"): per request its
// time, answer size, bytes allocated by the process, and the slowest
// heartbeat of a classic member on the same coordinator partition as
// classic-000000 while it ran, the CPU time the process used meanwhile
// (with the wall time it tells the work from the waits for a core of a
// busy machine), and the collector's cycles that ended during it with their
// CPU time. It runs only with COHORT_BENCH_ADMIN_SCALE=1. Other variables,
// each named COHORT_BENCH_ADMIN_ and then: CLASSIC, BIG (classic groups
// with 300 offsets, the others 10), CG (one-member consumer groups), TOPICS
// and ACLS size the state; WAIT keeps the node up afterwards (for the CLI),
// DELETE=1 adds a DeleteGroups of a fifth of the classic groups, NOACL=1
// leaves ACLs off, PROF/MPROF name a request to profile.
//
//	COHORT_BENCH_ADMIN_SCALE=1 go test -p 1 -v -run TestAdminPathsAtScale -timeout 30m ./console/
func TestAdminPathsAtScale(t *testing.T) {
	if os.Getenv("COHORT_BENCH_ADMIN_SCALE") == "" {
		t.Skip("COHORT_BENCH_ADMIN_SCALE=1 runs it (minutes, ~1 GB)")
	}
	nClassic := scaleEnv("CLASSIC", 90000)
	nBig := scaleEnv("BIG", 1000)
	nCG := scaleEnv("CG", 10000)
	nTopics := scaleEnv("TOPICS", 10000)
	nACL := scaleEnv("ACLS", 10000)
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.ConsumerSessionTimeout = 10 * time.Minute
	gcfg.MaxSessionTimeout = 10 * time.Minute
	cfg := node.Config{
		Listen: "127.0.0.1:0", Store: memstore.New(), Group: gcfg,
		HTTPListen: "127.0.0.1:0", ClusterID: "scale", HTTPHandlers: Register,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Security: &node.SecurityConfig{Authorizer: true, SuperUsers: []string{"User:ANONYMOUS"}},
	}
	if os.Getenv("COHORT_BENCH_ADMIN_NOACL") != "" {
		cfg.Security = nil
	}
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	n.WaitLoaded(ctx)
	addr := n.Addr()
	t.Logf("kafka %s, http %s", addr, n.HTTPAddr())
	newCl := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt(), kgo.BrokerMaxReadBytes(1<<30), kgo.RequestTimeoutOverhead(5*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newCl()
	t0 := time.Now()
	// topics
	for i := 0; i < nTopics; i += 1000 {
		req := kmsg.NewPtrCreateTopicsRequest()
		for j := i; j < i+1000 && j < nTopics; j++ {
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = fmt.Sprintf("topic-%05d", j), 10, 1
			req.Topics = append(req.Topics, tp)
		}
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("topics %v", time.Since(t0))
	// ACLs
	t0 = time.Now()
	for i := 0; i < nACL; i += 1000 {
		req := kmsg.NewPtrCreateACLsRequest()
		for j := i; j < i+1000 && j < nACL; j++ {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType = kmsg.ACLResourceTypeTopic
			if j%2 == 1 {
				c.ResourceType = kmsg.ACLResourceTypeGroup
			}
			c.ResourceName = fmt.Sprintf("res-%05d", j)
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
			c.Principal = fmt.Sprintf("User:u%d", j%100)
			c.Host = "*"
			c.Operation = kmsg.ACLOperationRead
			c.PermissionType = kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) > 0 && resp.Results[0].ErrorCode != 0 {
			t.Fatalf("acl %d", resp.Results[0].ErrorCode)
		}
	}
	t.Logf("acls %v", time.Since(t0))
	// classic groups through admin commits
	t0 = time.Now()
	// spread runs do(c, i) for i in [0, n) over 8 clients, each taking every
	// 8th index; a worker stops at the first do that returns false.
	spread := func(n int, do func(c *kgo.Client, i int) bool) {
		const workers = 8
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				c := newCl()
				defer c.Close()
				for i := w; i < n; i += workers {
					if !do(c, i) {
						return
					}
				}
			}(w)
		}
		wg.Wait()
	}
	spread(nClassic, func(c *kgo.Client, gi int) bool {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group = fmt.Sprintf("classic-%06d", gi)
		req.Generation = -1
		nt, np := 5, 2
		if gi < nBig {
			nt, np = 30, 10
		}
		for ti := 0; ti < nt; ti++ {
			tp := kmsg.NewOffsetCommitRequestTopic()
			tp.Topic = fmt.Sprintf("topic-%05d", (gi+ti*37)%nTopics)
			for p := 0; p < np; p++ {
				pp := kmsg.NewOffsetCommitRequestTopicPartition()
				pp.Partition, pp.Offset = int32(p), int64(gi)
				tp.Partitions = append(tp.Partitions, pp)
			}
			req.Topics = append(req.Topics, tp)
		}
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Error(err)
			return false
		}
		if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
			t.Errorf("commit %s: %d", req.Group, e)
			return false
		}
		return true
	})
	t.Logf("classic %v", time.Since(t0))
	t0 = time.Now()
	spread(nCG, func(c *kgo.Client, gi int) bool {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group = fmt.Sprintf("cg-%06d", gi)
		req.MemberEpoch = 0
		req.MemberID = fmt.Sprintf("m%022d", gi)
		req.RebalanceTimeoutMillis = 60000
		req.SubscribedTopicNames = []string{fmt.Sprintf("topic-%05d", gi%nTopics)}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, c)
		if err != nil || resp.ErrorCode != 0 {
			t.Error(err, resp)
			return false
		}
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version = 9
		oc.Group = req.Group
		oc.MemberID = req.MemberID
		if resp.MemberID != nil {
			oc.MemberID = *resp.MemberID
		}
		oc.Generation = resp.MemberEpoch
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = req.SubscribedTopicNames[0]
		for p := 0; p < 10; p++ {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition, pp.Offset = int32(p), 5
			tp.Partitions = append(tp.Partitions, pp)
		}
		oc.Topics = append(oc.Topics, tp)
		oc.RequestWith(ctx, c)
		return true
	})
	t.Logf("cg %v", time.Since(t0))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap after load: %d MiB", ms.HeapAlloc>>20)

	// heartbeat probe: a classic stable group on partition of "classic-000000"
	probeGroup := ""
	target := coordinatorPartition("classic-000000")
	for i := 0; ; i++ {
		g := fmt.Sprintf("probe-%d", i)
		if coordinatorPartition(g) == target {
			probeGroup = g
			break
		}
	}
	pc := newCl()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.ProtocolType, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = probeGroup, "consumer", 600000, 60000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	jr, _ := j.RequestWith(ctx, pc)
	if jr.ErrorCode == 79 {
		j.MemberID = jr.MemberID
		jr, _ = j.RequestWith(ctx, pc)
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.MemberID, sg.Generation = probeGroup, jr.MemberID, jr.Generation
	sg.RequestWith(ctx, pc)
	probe := func(stop, started chan struct{}) (maxLat time.Duration, cnt int) {
		for {
			if cnt == 1 {
				close(started)
			}
			select {
			case <-stop:
				return
			default:
			}
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = probeGroup, jr.MemberID, jr.Generation
			s := time.Now()
			hb.RequestWith(ctx, pc)
			if d := time.Since(s); d > maxLat {
				maxLat = d
			}
			cnt++
		}
	}
	measure := func(name string, fn func() int) {
		stop := make(chan struct{})
		var maxLat time.Duration
		var cnt int
		done, started := make(chan struct{}), make(chan struct{})
		go func() { maxLat, cnt = probe(stop, started); close(done) }()
		<-started
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		cpu0, gc0 := processCPU(), gcCPU()
		var pf *os.File
		if os.Getenv("COHORT_BENCH_ADMIN_MPROF") == name {
			f, _ := os.Create("allocs0.prof")
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if os.Getenv("COHORT_BENCH_ADMIN_PROF") == name {
			pf, _ = os.Create("cpu.prof")
			pprof.StartCPUProfile(pf)
		}
		s := time.Now()
		size := fn()
		d := time.Since(s)
		if pf != nil {
			pprof.StopCPUProfile()
			pf.Close()
		}
		if os.Getenv("COHORT_BENCH_ADMIN_MPROF") == name {
			f, _ := os.Create("allocs.prof")
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		runtime.ReadMemStats(&b)
		cpu, gc := processCPU()-cpu0, gcCPU()-gc0
		close(stop)
		<-done
		t.Logf("%-40s %10v  size=%10d  alloc=%6d MiB  hb max=%v (n=%d)  cpu=%v gc cycles=%d gc cpu=%v",
			name, d.Round(time.Millisecond), size, (b.TotalAlloc-a.TotalAlloc)>>20, maxLat.Round(time.Millisecond), cnt,
			cpu.Round(time.Millisecond), b.NumGC-a.NumGC, gc.Round(time.Millisecond))
	}
	var allGroups []string
	measure("ListGroups", func() int {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range resp.Groups {
			allGroups = append(allGroups, g.Group)
		}
		sort.Strings(allGroups)
		return len(resp.AppendTo(nil))
	})
	t.Logf("groups %v", len(allGroups))
	allGroups = allGroups[:min(len(allGroups), 100000)]
	measure("ListGroups raw", func() int {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		return len(raw(t, addr, req))
	})
	measure("ListGroups state=Stable type=consumer", func() int {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		req.StatesFilter = []string{"Stable"}
		req.TypesFilter = []string{"consumer"}
		return len(raw(t, addr, req))
	})
	measure("DescribeGroups all", func() int {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = 5
		req.Groups = allGroups
		return len(raw(t, addr, req))
	})
	measure("ConsumerGroupDescribe all", func() int {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = allGroups
		return len(raw(t, addr, req))
	})
	measure("OffsetFetch v9 all groups all topics", func() int {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		for _, g := range allGroups {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			req.Groups = append(req.Groups, rg)
		}
		return len(raw(t, addr, req))
	})
	measure("OffsetFetch v7 big group all", func() int {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group = "classic-000000"
		return len(raw(t, addr, req))
	})
	measure("Metadata all topics", func() int {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		return len(raw(t, addr, req))
	})
	measure("DescribeAcls any", func() int {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		return len(raw(t, addr, req))
	})
	measure("DescribeAcls principal u7", func() int {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		p := "User:u7"
		req.Principal = &p
		return len(raw(t, addr, req))
	})
	measure("ListOffsets all", func() int {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 4
		req.ReplicaID = -1
		for i := 0; i < nTopics; i++ {
			tp := kmsg.NewListOffsetsRequestTopic()
			tp.Topic = fmt.Sprintf("topic-%05d", i)
			for p := 0; p < 10; p++ {
				pp := kmsg.NewListOffsetsRequestTopicPartition()
				pp.Partition, pp.Timestamp = int32(p), -1
				tp.Partitions = append(tp.Partitions, pp)
			}
			req.Topics = append(req.Topics, tp)
		}
		return len(raw(t, addr, req))
	})
	// The console's searches: one group of all, the classic groups (cut
	// to the page's 1,000), a few consumer groups.
	one := fmt.Sprintf("classic-%06d", nClassic/2)
	for _, path := range []string{"/metrics", "/console/", "/console/?page=2", "/console/?q=" + one,
		"/console/?q=classic-&match=prefix", "/console/?ptype=consumer&q=cg-00001"} {
		measure("GET "+path, func() int {
			r, err := http.Get("http://" + n.HTTPAddr() + path)
			if err != nil {
				return -1
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != 200 {
				t.Errorf("%s: %d %s", path, r.StatusCode, b[:min(len(b), 300)])
			}
			if got := shownGroups(string(b)); strings.Contains(path, one) && (len(got) != 1 || got[0] != one) {
				t.Errorf("%s shows %v, want %s only", path, got, one)
			}
			if c := regexp.MustCompile(`id="count">([^<]*)`).FindSubmatch(b); c != nil {
				t.Logf("%s: %s", path, c[1])
			}
			return len(b)
		})
	}
	if os.Getenv("COHORT_BENCH_ADMIN_DELETE") != "" {
		measure("DeleteGroups", func() int {
			req := kmsg.NewPtrDeleteGroupsRequest()
			for i := nClassic / 2; i < nClassic*7/10; i++ {
				req.Groups = append(req.Groups, fmt.Sprintf("classic-%06d", i))
			}
			return len(raw(t, addr, req))
		})
	}
	if w := os.Getenv("COHORT_BENCH_ADMIN_WAIT"); w != "" {
		t.Logf("waiting %v", w)
		d, _ := time.ParseDuration(w)
		time.Sleep(d)
	}
}

// gcCPU is the runtime's estimate of the CPU time the collector has used
// (its mark workers, assists and pauses), as of its last cycle.
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}

// rawConn is the connection of raw; corr its last correlation id.
var (
	rawConn net.Conn
	corr    int32
)

// raw sends req on one connection to addr and returns the answer's bytes,
// undecoded: the client's share of the allocations is the answer alone.
func raw(t *testing.T, addr string, req kmsg.Request) []byte {
	if rawConn == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); rawConn = nil })
		rawConn = c
	}
	corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	b := f.AppendRequest(nil, req, corr)
	if _, err := rawConn.Write(b); err != nil {
		t.Fatal(err)
	}
	var sz [4]byte
	if _, err := io.ReadFull(rawConn, sz[:]); err != nil {
		t.Fatal(err)
	}
	n := binary.BigEndian.Uint32(sz[:])
	body := make([]byte, n)
	if _, err := io.ReadFull(rawConn, body); err != nil {
		t.Fatal(err)
	}
	return body
}

// coordinatorPartition is coordinator.PartitionFor over 50 partitions for
// ASCII ids.
func coordinatorPartition(id string) int32 {
	var h int32
	for _, r := range id {
		h = 31*h + int32(r)
	}
	if h == -2147483648 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % 50
}
