// Package bench measures a Kafka-protocol group coordinator at a bootstrap
// address: rebalance latency of one group, heartbeat throughput, and
// OffsetCommit throughput. It speaks raw kmsg requests through franz-go
// clients, one client (and so its own connections) per simulated member or
// committer, so any coordinator can be measured the same way: cohort, the
// franz-go kfake cluster, or a Kafka broker.
//
// Numbers depend on the machine and on the benchmark's own clients sharing
// it with the target; compare targets measured in the same run.
package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/clientconfig"
)

// Config says what to measure and how hard.
type Config struct {
	// Bootstrap is the target's host:port.
	Bootstrap string
	// Security is how every client and raw connection of the run connects:
	// TLS and SASL (zero: plaintext). Raw connections speak it too, so the
	// throughput cases measure the target's authenticated path.
	Security clientconfig.Config
	// Members are the group sizes of the rebalance measurement (10, 100,
	// 1000).
	Members []int
	// HeartbeatMembers heartbeat concurrently for Duration (200), spread
	// over each count of groups in HeartbeatGroups (1 and 10).
	HeartbeatMembers int
	HeartbeatGroups  []int
	// Committers × PartitionsPerCommit are the OffsetCommit cases: each
	// committer commits to its own group, PartitionsPerCommit partitions
	// per request, for Duration (16, 64 × 1, 50).
	Committers          []int
	PartitionsPerCommit []int
	// Duration is the measured window of each throughput case (3 s); a
	// warm-up of a tenth of it (at most 500 ms) runs first.
	Duration time.Duration
	// RoundTimeout bounds one rebalance round (60 s).
	RoundTimeout time.Duration
	// Client is what the throughput cases send with: "raw" (default), one
	// bare connection per member or committer, a request at a time, or
	// "kgo", the member's or committer's franz-go client. The rebalance
	// rounds always use one kgo client per member.
	Client string
	// Only selects one measurement: "rebalance", "heartbeat" or "commit"
	// ("" = all).
	Only string
	// Prefix starts every group name, so runs do not collide on a
	// long-running target ("cohort-bench-<unix nanos>").
	Prefix string
	// Logf reports progress (nil = quiet).
	Logf func(format string, args ...any)

	sec *security // Security made ready by Validate
}

// Defaults returns the configuration of the measurements.
func Defaults() Config {
	return Config{
		Members:             []int{10, 100, 1000},
		HeartbeatMembers:    200,
		HeartbeatGroups:     []int{1, 10},
		Committers:          []int{16, 64},
		PartitionsPerCommit: []int{1, 50},
		Duration:            3 * time.Second,
		RoundTimeout:        60 * time.Second,
	}
}

// Rebalance is the rebalance latency of one group of Members members.
type Rebalance struct {
	Members int
	// Initial: all members pending with known ids (KIP-394 round trip
	// done), each sends JoinGroup; from the last JoinGroup sent until
	// every member's SyncGroup is answered with its assignment.
	Initial     time.Duration
	InitialGens int32 // generations the group went through
	// Rejoin: one more member joins the stable group; from its JoinGroup
	// sent until all Members+1 hold assignments of one generation.
	Rejoin     time.Duration
	RejoinGens int32
}

// Throughput is one load case: requests answered without error per second
// of the measured window, and their latency.
type Throughput struct {
	Kind       string // "heartbeat" or "commit"
	Workers    int    // members heartbeating or committers
	Groups     int    // heartbeat: groups the members are spread over
	Partitions int    // commit: partitions per request
	Window     time.Duration
	OK         int64 // requests answered without error in the window
	Errors     int64 // requests answered with an error code
	// Done counts the requests answered without error in the whole run,
	// warm-up and overrun included: a quick run's check that the path
	// works at all, which must not depend on a request fitting in a short
	// window on a loaded machine (CI saw a 200 ms window where no TLS and
	// SCRAM handshake fitted).
	Done     int64
	P50, P99 time.Duration
	// CPU is the CPU time the whole process (load generator and, when
	// in-process, the server) used during the window; 0 if not measured.
	CPU time.Duration
	// ServerCPU is the CPU time of the server's own process during the
	// window, when the context carried a sampler (withServerCPU); 0
	// otherwise.
	ServerCPU time.Duration
}

// serverCPUKey carries a sampler of the server process's CPU time in a
// load's context.
type serverCPUKey struct{}

// withServerCPU makes load sample f (the server process's CPU time so far)
// at the edges of its measured window.
func withServerCPU(ctx context.Context, f func() (time.Duration, bool)) context.Context {
	return context.WithValue(ctx, serverCPUKey{}, f)
}

// PerSec is requests per second.
func (t Throughput) PerSec() float64 { return float64(t.OK) / t.Window.Seconds() }

// CPUPerOp is process CPU time per request answered in the window (0 if not
// measured): the load generator's share is the same for every target, so
// differences between targets are differences in server work.
func (t Throughput) CPUPerOp() time.Duration {
	if t.OK == 0 {
		return 0
	}
	return t.CPU / time.Duration(t.OK)
}

// OffsetsPerSec is partition offsets committed per second (commit cases).
func (t Throughput) OffsetsPerSec() float64 { return t.PerSec() * float64(max(t.Partitions, 1)) }

// Result is everything measured against one target.
type Result struct {
	Target    string
	Rebalance []Rebalance
	Heartbeat []Throughput
	Commit    []Throughput
}

// Validate fills unset fields from Defaults and checks the rest.
func (c *Config) Validate() error {
	d := Defaults()
	if c.Bootstrap == "" {
		return errors.New("bench: no bootstrap address")
	}
	sec, err := newSecurity(c.Security)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	c.sec = sec
	switch c.Only {
	case "", "rebalance", "heartbeat", "commit":
	default:
		return fmt.Errorf("bench: --only %q: want rebalance, heartbeat or commit", c.Only)
	}
	switch c.Client {
	case "":
		c.Client = "raw"
	case "raw", "kgo":
	default:
		return fmt.Errorf("bench: client %q: want raw or kgo", c.Client)
	}
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.RoundTimeout <= 0 {
		c.RoundTimeout = d.RoundTimeout
	}
	if c.HeartbeatMembers <= 0 {
		c.HeartbeatMembers = d.HeartbeatMembers
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("cohort-bench-%d", time.Now().UnixNano())
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	for _, xs := range [][]int{c.Members, c.HeartbeatGroups, c.Committers, c.PartitionsPerCommit} {
		for _, x := range xs {
			if x <= 0 {
				return fmt.Errorf("bench: counts must be positive, got %d", x)
			}
		}
	}
	for _, g := range c.HeartbeatGroups {
		if g > c.HeartbeatMembers {
			return fmt.Errorf("bench: %d heartbeat groups for %d members", g, c.HeartbeatMembers)
		}
	}
	return nil
}

// Case is one measurement of a run.
type Case struct {
	Kind       string // "rebalance", "heartbeat" or "commit"
	Members    int    // rebalance: group size; heartbeat: members
	Groups     int    // heartbeat
	Committers int    // commit
	Partitions int    // commit: partitions per request
}

func (c Case) String() string {
	switch c.Kind {
	case "rebalance":
		return fmt.Sprintf("rebalance N=%d", c.Members)
	case "heartbeat":
		return fmt.Sprintf("heartbeat %d members in %d group(s)", c.Members, c.Groups)
	default:
		return fmt.Sprintf("commit %d committers × %d partitions", c.Committers, c.Partitions)
	}
}

// Cases lists what cfg measures, in order.
func (cfg Config) Cases() []Case {
	var cs []Case
	want := func(s string) bool { return cfg.Only == "" || cfg.Only == s }
	if want("rebalance") {
		for _, n := range cfg.Members {
			cs = append(cs, Case{Kind: "rebalance", Members: n})
		}
	}
	if want("heartbeat") {
		for _, g := range cfg.HeartbeatGroups {
			cs = append(cs, Case{Kind: "heartbeat", Members: cfg.HeartbeatMembers, Groups: g})
		}
	}
	if want("commit") {
		for _, c := range cfg.Committers {
			for _, p := range cfg.PartitionsPerCommit {
				cs = append(cs, Case{Kind: "commit", Committers: c, Partitions: p})
			}
		}
	}
	return cs
}

// Run measures every case of cfg against the target at cfg.Bootstrap. name
// labels the result.
func Run(ctx context.Context, name string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Target: name}
	for _, c := range cfg.Cases() {
		if err := RunCase(ctx, cfg, c, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// RunCase measures one case against cfg.Bootstrap and adds it to res.
// Comparisons of several targets can run case by case, alternating the
// targets, so that a change in the machine's load (other processes) is
// spread over all of them.
func RunCase(ctx context.Context, cfg Config, c Case, res *Result) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	switch c.Kind {
	case "rebalance":
		r, err := rebalanceCase(ctx, cfg, c.Members)
		if err != nil {
			return fmt.Errorf("%s: %v: %w", res.Target, c, err)
		}
		cfg.Logf("%s: %v: initial %v (%d gens), rejoin %v (%d gens)", res.Target, c, r.Initial, r.InitialGens, r.Rejoin, r.RejoinGens)
		res.Rebalance = append(res.Rebalance, r)
	case "heartbeat":
		t, err := heartbeatCase(ctx, cfg, c.Members, c.Groups)
		if err != nil {
			return fmt.Errorf("%s: %v: %w", res.Target, c, err)
		}
		cfg.Logf("%s: %v: %.0f/s p50 %v p99 %v errors %d cpu %v/req", res.Target, c, t.PerSec(), t.P50, t.P99, t.Errors, t.CPUPerOp())
		res.Heartbeat = append(res.Heartbeat, t)
	case "commit":
		t, err := commitCase(ctx, cfg, c.Committers, c.Partitions)
		if err != nil {
			return fmt.Errorf("%s: %v: %w", res.Target, c, err)
		}
		cfg.Logf("%s: %v: %.0f req/s p50 %v p99 %v errors %d cpu %v/req", res.Target, c, t.PerSec(), t.P50, t.P99, t.Errors, t.CPUPerOp())
		res.Commit = append(res.Commit, t)
	default:
		return fmt.Errorf("bench: unknown case %q", c.Kind)
	}
	return nil
}

// rebalanceCase forms a group of n members, then adds one more.
func rebalanceCase(ctx context.Context, cfg Config, n int) (Rebalance, error) {
	group := fmt.Sprintf("%s-rebalance-%d", cfg.Prefix, n)
	ms, err := newMembers(ctx, cfg.Bootstrap, cfg.sec, group, 0, n)
	if err != nil {
		return Rebalance{}, err
	}
	defer func() { closeMembers(ms) }()
	defer func() { leaveAll(ctx, ms) }()
	r := Rebalance{Members: n}
	if r.Initial, r.InitialGens, err = formGroup(ctx, ms, cfg.RoundTimeout); err != nil {
		return r, err
	}
	// The newcomer's KIP-394 round trip happens now, untimed: it is
	// pending in the stable group, which changes nothing there.
	newcomer, err := newMember(ctx, cfg.Bootstrap, cfg.sec, group, n)
	if err != nil {
		return r, err
	}
	existing := ms
	ms = append(ms, newcomer)
	r.Rejoin, r.RejoinGens, err = rejoin(ctx, existing, newcomer, cfg.RoundTimeout)
	return r, err
}

// heartbeatCase forms groups groups of members/groups members each, then
// every member heartbeats back to back on its own connection.
func heartbeatCase(ctx context.Context, cfg Config, members, groups int) (Throughput, error) {
	var all []*member
	defer func() { closeMembers(all) }()
	var byGroup [][]*member
	defer func() {
		for _, ms := range byGroup {
			leaveAll(ctx, ms)
		}
	}()
	for g := range groups {
		n := members / groups
		if g < members%groups {
			n++
		}
		group := fmt.Sprintf("%s-heartbeat-%d-%d", cfg.Prefix, groups, g)
		ms, err := newMembers(ctx, cfg.Bootstrap, cfg.sec, group, len(all), n)
		if err != nil {
			return Throughput{}, err
		}
		all = append(all, ms...)
		byGroup = append(byGroup, ms)
		if _, _, err := formGroup(ctx, ms, cfg.RoundTimeout); err != nil {
			return Throughput{}, err
		}
	}
	op := func(ctx context.Context, w int) (bool, error) {
		code, err := all[w].heartbeat(ctx)
		return code == 0, err
	}
	if cfg.Client == "raw" {
		conns, err := dialMembers(ctx, byGroup, cfg.sec)
		defer func() {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
		}()
		if err != nil {
			return Throughput{}, err
		}
		reqs := make([]*kmsg.HeartbeatRequest, len(all))
		resps := make([]*kmsg.HeartbeatResponse, len(all))
		for i, m := range all {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID, r.Generation = m.group, m.id, m.gen
			if r.Version, err = conns[i].version(r, 4); err != nil {
				return Throughput{}, err
			}
			reqs[i], resps[i] = r, kmsg.NewPtrHeartbeatResponse()
		}
		op = func(ctx context.Context, w int) (bool, error) {
			err := conns[w].do(ctx, reqs[w], resps[w])
			return err == nil && resps[w].ErrorCode == 0, err
		}
	}
	t, err := load(ctx, len(all), cfg.Duration, op)
	t.Kind, t.Groups = "heartbeat", groups
	return t, err
}

// dialMembers opens a bare connection from every member to its group's
// coordinator.
func dialMembers(ctx context.Context, byGroup [][]*member, sec *security) ([]*rawConn, error) {
	var conns []*rawConn
	for _, ms := range byGroup {
		addr, err := coordinatorAddr(ctx, ms[0].cl, ms[0].group)
		if err != nil {
			return conns, err
		}
		for _, m := range ms {
			c, err := dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-%d", m.idx), sec)
			if err != nil {
				return conns, err
			}
			conns = append(conns, c)
		}
	}
	return conns, nil
}

// commitCase: committers committers, each with its own client and group,
// commit partitions offsets per request as simple (generation -1, no
// member) commits.
func commitCase(ctx context.Context, cfg Config, committers, partitions int) (Throughput, error) {
	topic := fmt.Sprintf("%s-commit-%d-%d", cfg.Prefix, committers, partitions)
	admin, err := newClient(cfg.Bootstrap, "cohort-bench-admin", cfg.sec)
	if err != nil {
		return Throughput{}, err
	}
	defer admin.Close()
	// Coordinators that know topics (Kafka, kfake, cohort's catalog)
	// refuse commits for unknown partitions.
	if err := createTopic(ctx, admin, topic, partitions); err != nil {
		return Throughput{}, err
	}
	defer deleteTopic(ctx, admin, topic)
	cs := make([]*committer, committers)
	errs := make([]error, committers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cl, err := newClient(cfg.Bootstrap, fmt.Sprintf("cohort-bench-committer-%d", i), cfg.sec)
			if err != nil {
				errs[i] = err
				return
			}
			c := &committer{cl: cl, group: fmt.Sprintf("%s-commit-%d-%d-%d", cfg.Prefix, committers, partitions, i)}
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation, r.MemberID = c.group, -1, ""
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = topic
			t.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, partitions)
			for p := range t.Partitions {
				t.Partitions[p] = kmsg.NewOffsetCommitRequestTopicPartition()
				t.Partitions[p].Partition = int32(p)
			}
			r.Topics = []kmsg.OffsetCommitRequestTopic{t}
			c.req = r
			cs[i] = c
			// Untimed first commit: opens the connection, finds the
			// coordinator, creates the group.
			if ok, err := c.commit(ctx); err != nil {
				errs[i] = err
			} else if !ok {
				errs[i] = fmt.Errorf("committer %d: first commit refused: %w", i, c.lastErr)
			}
		}()
	}
	wg.Wait()
	defer func() {
		var groups []string
		for _, c := range cs {
			if c != nil {
				groups = append(groups, c.group)
			}
		}
		for _, c := range cs {
			if c != nil {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				deleteGroups(dctx, c.cl, groups...)
				cancel()
				break
			}
		}
		for _, c := range cs {
			if c != nil {
				c.cl.Close()
				if c.raw != nil {
					c.raw.Close()
				}
			}
		}
	}()
	if err := firstError(errs); err != nil {
		return Throughput{}, err
	}
	if cfg.Client == "raw" {
		for i, c := range cs {
			addr, err := coordinatorAddr(ctx, c.cl, c.group)
			if err != nil {
				return Throughput{}, err
			}
			if c.raw, err = dialRaw(ctx, addr, fmt.Sprintf("cohort-bench-committer-%d", i), cfg.sec); err != nil {
				return Throughput{}, err
			}
			if c.req.Version, err = c.raw.version(c.req, 9); err != nil {
				return Throughput{}, err
			}
		}
	}
	t, err := load(ctx, committers, cfg.Duration, func(ctx context.Context, w int) (bool, error) {
		return cs[w].commit(ctx)
	})
	t.Kind, t.Partitions = "commit", partitions
	return t, err
}

type committer struct {
	cl      *kgo.Client
	req     *kmsg.OffsetCommitRequest
	group   string
	raw     *rawConn // nil: commit through cl
	offset  int64
	lastErr error
}

// commit sends one commit of increasing offsets; true if every partition
// was accepted.
func (c *committer) commit(ctx context.Context) (bool, error) {
	c.offset++
	for i := range c.req.Topics[0].Partitions {
		c.req.Topics[0].Partitions[i].Offset = c.offset
	}
	var resp *kmsg.OffsetCommitResponse
	if c.raw != nil {
		resp = kmsg.NewPtrOffsetCommitResponse()
		if err := c.raw.do(ctx, c.req, resp); err != nil {
			return false, err
		}
	} else {
		var err error
		if resp, err = c.req.RequestWith(ctx, c.cl); err != nil {
			return false, err
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				c.lastErr = kerr.ErrorForCode(p.ErrorCode)
				return false, nil
			}
		}
	}
	return true, nil
}

// maxOpsPerWorker bounds a load loop by count as well as by time.
const maxOpsPerWorker = 1 << 20

// load runs op back to back on workers goroutines: a warm-up of a tenth of
// window (at most 500 ms), then the measured window. Only requests sent and
// answered inside the window count.
func load(ctx context.Context, workers int, window time.Duration, op func(ctx context.Context, w int) (bool, error)) (Throughput, error) {
	warm := min(window/10, 500*time.Millisecond)
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+window)
	ctx, cancel := context.WithDeadline(ctx, until.Add(30*time.Second))
	defer cancel()
	var (
		ok, bad, done atomic.Int64
		wg            sync.WaitGroup
		errs          = make([]error, workers)
		lats          = make([][]time.Duration, workers)
	)
	// The process CPU (and the server's, if sampled) used between the
	// window's start and end.
	serverCPU, _ := ctx.Value(serverCPUKey{}).(func() (time.Duration, bool))
	if serverCPU == nil {
		serverCPU = func() (time.Duration, bool) { return 0, false }
	}
	cpu := make(chan [2]time.Duration, 1)
	go func() {
		if !sleepUntil(ctx, from) {
			cpu <- [2]time.Duration{}
			return
		}
		c0, ok0 := processCPU()
		s0, sok0 := serverCPU()
		if !sleepUntil(ctx, until) {
			cpu <- [2]time.Duration{}
			return
		}
		c1, ok1 := processCPU()
		s1, sok1 := serverCPU()
		if !ok0 || !ok1 {
			c1, c0 = 0, 0
		}
		if !sok0 || !sok1 {
			s1, s0 = 0, 0
		}
		cpu <- [2]time.Duration{c1 - c0, s1 - s0}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < maxOpsPerWorker; n++ {
				t := time.Now()
				if !t.Before(until) {
					return
				}
				// Raw connections do not watch ctx: an interrupted run
				// stops here.
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				good, err := op(ctx, w)
				if err != nil {
					errs[w] = err
					return
				}
				end := time.Now()
				if good {
					done.Add(1)
				}
				if t.Before(from) || end.After(until) {
					continue
				}
				if good {
					ok.Add(1)
					lats[w] = append(lats[w], end.Sub(t))
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t := Throughput{Workers: workers, Window: window, OK: ok.Load(), Errors: bad.Load(), Done: done.Load()}
	if err := firstError(errs); err != nil {
		return t, err
	}
	c := <-cpu
	t.CPU, t.ServerCPU = c[0], c[1]
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	t.P50, t.P99 = quantile(all, 0.50), quantile(all, 0.99)
	return t, nil
}

// sleepUntil waits until t or until ctx is done; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	return sorted[min(i, len(sorted)-1)]
}

// createTopic creates topic with partitions partitions (replication 1).
func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r := kmsg.NewPtrCreateTopicsRequest()
	r.TimeoutMillis = 15000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(partitions), 1
	r.Topics = []kmsg.CreateTopicsRequestTopic{t}
	resp, err := r.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code {
			return fmt.Errorf("creating topic %s: %w", topic, kerr.ErrorForCode(t.ErrorCode))
		}
	}
	return nil
}

func deleteTopic(ctx context.Context, cl *kgo.Client, topic string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.TimeoutMillis = 5000
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = &topic
	r.Topics = []kmsg.DeleteTopicsRequestTopic{t}
	r.TopicNames = []string{topic}
	r.RequestWith(ctx, cl)
}

// boundedEach runs f(0) … f(n-1), at most limit at a time, and returns
// firstError of their errors.
func boundedEach(n, limit int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return firstError(errs)
}

// firstError returns the first error of errs, counting the others: when the
// target goes away every member fails, most often for the same reason.
func firstError(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more like it)", first, n-1)
	}
	return first
}
