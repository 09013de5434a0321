package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP848Config says what the consumer-group-protocol measurements (KIP-848,
// ConsumerGroupHeartbeat v1) do.
//
// Members are simulated with raw requests, many members multiplexed on a
// few pipelined connections, each behaving as a client does: it joins with
// epoch 0 and an id of its own, adopts every assignment an answer carries
// (dropping at once what is no longer in it, taking what is new) and lists
// what it owns in its next heartbeat. The schedule, the same for every
// target: after an answer that changed the member's epoch or assignment the
// next heartbeat goes out at once; after any other answer it goes out one
// heartbeat interval (as the target answered it) later.
type KIP848Config struct {
	// Bootstrap is the target's host:port.
	Bootstrap string
	// Members are the sizes of the convergence rounds (10, 100, 1000).
	Members []int
	// Partitions of the one topic every member subscribes to (1000).
	Partitions int
	// Conns is how many connections the members of a round share (8).
	Conns int
	// HeartbeatMembers heartbeat back to back for Duration once stable
	// (200), on HeartbeatConns connections (4).
	HeartbeatMembers int
	HeartbeatConns   int
	// Duration is the measured heartbeat window (1 s), after a warm-up of
	// a tenth of it.
	Duration time.Duration
	// Timeout bounds every round (2 min).
	Timeout time.Duration
	// Prefix starts every group and topic name.
	Prefix string
	// Logf reports progress (nil = quiet).
	Logf func(format string, args ...any)
}

func (c *KIP848Config) validate() error {
	if c.Bootstrap == "" {
		return errors.New("bench: no bootstrap address")
	}
	if len(c.Members) == 0 {
		c.Members = []int{10, 100, 1000}
	}
	defInt(&c.Partitions, 1000)
	defInt(&c.Conns, 8)
	defInt(&c.HeartbeatMembers, 200)
	defInt(&c.HeartbeatConns, 4)
	if c.Duration <= 0 {
		c.Duration = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("kip848-%d", time.Now().UnixNano())
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	for _, n := range c.Members {
		if n <= 0 {
			return fmt.Errorf("bench: counts must be positive, got %d", n)
		}
	}
	return nil
}

// defInt sets *v to d when it is not positive.
func defInt(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

// Convergence is one round: Members new members join an empty group at
// once.
type Convergence struct {
	Members, Partitions int
	// Elapsed runs from the first join sent until the answer after which
	// every member owns its share (every partition owned by exactly one
	// member, each member floor or ceil of Partitions/Members) and all
	// members are at the same epoch.
	Elapsed time.Duration
	// Heartbeats answered in that time, all members together; Waits of
	// them changed nothing for a member that did not own its share yet
	// (too few partitions, mostly ones another member still had to
	// release), so that member waited a heartbeat interval before asking
	// again: the part of convergence the schedule, not the server's
	// speed, sets.
	Heartbeats, Waits int64
	// Epoch the members ended at; Interval the heartbeat interval the
	// target answered.
	Epoch    int32
	Interval time.Duration
}

// KIP848Result is everything measured against one target.
type KIP848Result struct {
	Target      string
	Convergence []Convergence
	// Heartbeat: Kind "cgheartbeat", Workers members, OK answered without
	// error in Window.
	Heartbeat Throughput
}

// RunKIP848 runs the convergence rounds, then the heartbeat load, against
// cfg.Bootstrap.
func RunKIP848(ctx context.Context, name string, cfg KIP848Config) (*KIP848Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	res := &KIP848Result{Target: name}
	for _, n := range cfg.Members {
		c, err := ConvergeKIP848(ctx, cfg, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %d members: %w", name, n, err)
		}
		cfg.Logf("%s: %d members converged in %v (%d heartbeats, epoch %d)", name, n, c.Elapsed, c.Heartbeats, c.Epoch)
		res.Convergence = append(res.Convergence, c)
	}
	hb, err := HeartbeatKIP848(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: heartbeats: %w", name, err)
	}
	cfg.Logf("%s: %s ConsumerGroupHeartbeats/s (%d members, %d connections)", name, count(hb.PerSec()), hb.Workers, cfg.HeartbeatConns)
	res.Heartbeat = hb
	return res, nil
}

// ConvergeKIP848 runs one convergence round of n members, checks the
// outcome with ConsumerGroupDescribe, and has every member leave.
func ConvergeKIP848(ctx context.Context, cfg KIP848Config, n int) (Convergence, error) {
	if err := cfg.validate(); err != nil {
		return Convergence{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	name := fmt.Sprintf("%s-n%d", cfg.Prefix, n)
	f, err := newFleet(ctx, cfg.Bootstrap, name, cfg.Partitions, n, cfg.Conns)
	if err != nil {
		return Convergence{}, err
	}
	defer f.close(ctx)
	start := time.Now()
	if err := f.run(ctx, phaseConverge); err != nil {
		return Convergence{}, err
	}
	c := Convergence{Members: n, Partitions: cfg.Partitions, Elapsed: f.track.at.Sub(start),
		Heartbeats: f.answered.Load(), Waits: f.waits.Load(), Epoch: f.members[0].epoch, Interval: f.members[0].interval}
	if err := f.describe(ctx); err != nil {
		return c, err
	}
	return c, f.run(ctx, phaseLeave)
}

// HeartbeatKIP848 forms a stable group of cfg.HeartbeatMembers, then has
// every member heartbeat back to back (a keepalive heartbeat: epoch and id
// only) and counts the answers of the window.
func HeartbeatKIP848(ctx context.Context, cfg KIP848Config) (Throughput, error) {
	if err := cfg.validate(); err != nil {
		return Throughput{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	f, err := newFleet(ctx, cfg.Bootstrap, cfg.Prefix+"-hb", cfg.Partitions, cfg.HeartbeatMembers, cfg.HeartbeatConns)
	if err != nil {
		return Throughput{}, err
	}
	defer f.close(ctx)
	if err := f.run(ctx, phaseConverge); err != nil {
		return Throughput{}, fmt.Errorf("forming the group: %w", err)
	}
	warm := min(cfg.Duration/10, 500*time.Millisecond)
	now := time.Now()
	f.from, f.until = now.Add(warm), now.Add(warm+cfg.Duration)
	// Process CPU time at the window's start and end.
	var cpu [2]atomic.Int64
	for i, at := range []time.Duration{warm, warm + cfg.Duration} {
		t := time.AfterFunc(at, func() {
			if c, ok := processCPU(); ok {
				cpu[i].Store(int64(c))
			}
		})
		defer t.Stop()
	}
	if err := f.run(ctx, phaseKeepalive); err != nil {
		return Throughput{}, err
	}
	t := Throughput{Kind: "cgheartbeat", Workers: cfg.HeartbeatMembers, Groups: 1, Window: cfg.Duration,
		OK: f.ok.Load(), Errors: f.failed.Load()}
	if c0, c1 := cpu[0].Load(), cpu[1].Load(); c0 > 0 && c1 > c0 {
		t.CPU = time.Duration(c1 - c0)
	}
	if err := f.describe(ctx); err != nil {
		return t, fmt.Errorf("after the load: %w", err)
	}
	return t, f.run(ctx, phaseLeave)
}

type phase int

const (
	phaseConverge  phase = iota // join, then heartbeat on the schedule until converged
	phaseKeepalive              // heartbeat back to back until the window ends
	phaseLeave                  // one leave heartbeat (epoch -1) each
)

// cmember is one simulated consumer-protocol member.
type cmember struct {
	id       string
	epoch    int32
	owned    []int32 // sorted; partitions of the fleet's topic
	report   bool    // the next heartbeat lists owned (changed since last sent)
	interval time.Duration
}

// fleet is the members of one group and the connections they share.
type fleet struct {
	group, topic string
	parts        int
	admin        *kgo.Client
	conns        []*pconn
	members      []*cmember
	version      int16 // of ConsumerGroupHeartbeat
	track        *tracker
	answered     atomic.Int64  // converge phase: answers
	waits        atomic.Int64  // converge phase: answers followed by an interval's wait
	ok, failed   atomic.Int64  // keepalive phase: answers in the window
	from, until  time.Time     // keepalive window
	quit         chan struct{} // closed by close: readers stop
}

// pconn is a pipelined connection: requests written in batches, responses
// read in order by a reader goroutine.
type pconn struct {
	raw     *rawConn
	frames  chan frame
	members []*cmember
	quit    chan struct{}
	batch   []byte // requests written together
}

type frame struct {
	b   []byte
	err error
}

func newFleet(ctx context.Context, bootstrap, name string, parts, n, conns int) (*fleet, error) {
	f := &fleet{group: name, topic: name, parts: parts, track: newTracker(n, parts), quit: make(chan struct{})}
	var err error
	if f.admin, err = newClient(bootstrap, "kip848-admin", nil); err != nil {
		return nil, err
	}
	if err := createTopic(ctx, f.admin, f.topic, parts); err != nil {
		f.admin.Close()
		return nil, err
	}
	coord, err := coordinatorAddr(ctx, f.admin, name)
	if err != nil {
		f.close(ctx)
		return nil, err
	}
	for range n {
		var raw [16]byte // a client-made member id (v1), as a UUID in base64
		rand.Read(raw[:])
		f.members = append(f.members, &cmember{id: base64.RawURLEncoding.EncodeToString(raw[:])})
	}
	conns = min(conns, n)
	for i := range conns {
		rc, err := dialRaw(ctx, coord, fmt.Sprintf("kip848-%d", i), nil)
		if err != nil {
			f.close(ctx)
			return nil, err
		}
		v, err := rc.version(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 1)
		if err == nil && v < 1 {
			err = errors.New("target does not serve ConsumerGroupHeartbeat v1")
		}
		if err != nil {
			rc.Close()
			f.close(ctx)
			return nil, err
		}
		f.version = v
		pc := &pconn{raw: rc, frames: make(chan frame, n/conns+2), quit: f.quit}
		for j := i; j < n; j += conns {
			pc.members = append(pc.members, f.members[j])
		}
		f.conns = append(f.conns, pc)
		go pc.read()
	}
	return f, nil
}

// read passes every response frame on until the connection fails or
// closes. The channel holds a frame per member of the connection and one
// more: a member has at most one request in flight.
func (pc *pconn) read() {
	for {
		var fr frame
		var size [4]byte
		if _, err := io.ReadFull(pc.raw.rd, size[:]); err != nil {
			fr.err = err
		} else if n := int(binary.BigEndian.Uint32(size[:])); n < 4 || n > 64<<20 {
			fr.err = fmt.Errorf("response frame of %d bytes", n)
		} else {
			fr.b = make([]byte, n)
			_, fr.err = io.ReadFull(pc.raw.rd, fr.b)
		}
		select {
		case pc.frames <- fr:
		case <-pc.quit:
			return
		}
		if fr.err != nil {
			return
		}
	}
}

func (f *fleet) close(ctx context.Context) {
	close(f.quit)
	for _, pc := range f.conns {
		pc.raw.Close()
	}
	if f.admin != nil {
		deleteTopic(ctx, f.admin, f.topic)
		f.admin.Close()
	}
}

// run drives every connection through ph and waits for all of them.
func (f *fleet) run(ctx context.Context, ph phase) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		for _, pc := range f.conns {
			pc.raw.nc.SetDeadline(dl)
		}
	}
	stop := make(chan struct{})
	switch ph {
	case phaseConverge:
		f.track.reset()
		f.answered.Store(0)
		f.waits.Store(0)
		stop = f.track.done
	case phaseKeepalive:
		f.ok.Store(0)
		f.failed.Store(0)
		t := time.AfterFunc(time.Until(f.until), func() { close(stop) })
		defer t.Stop()
	}
	errs := make([]error, len(f.conns))
	var wg sync.WaitGroup
	for i, pc := range f.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = f.drive(ctx, pc, ph, stop); errs[i] != nil {
				cancel() // the others stop too
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		if terr := f.track.failure(); terr != nil {
			return terr
		}
		return err
	}
	if ph == phaseConverge && !f.track.converged() {
		return errors.New("members stopped before converging")
	}
	return nil
}

// drive runs one connection's members through ph until stop is closed
// (converge, keepalive) or every member has had its answer (leave), then
// waits for the answers still in flight.
func (f *fleet) drive(ctx context.Context, pc *pconn, ph phase, stop <-chan struct{}) error {
	type wait struct {
		m   *cmember
		due time.Time
	}
	ready := slices.Clone(pc.members)
	var waiting []wait      // in order of due time: every member waits the same interval
	var inflight []*cmember // in the order sent
	proto := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	proto.Version = f.version
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	stopping := false
	for {
		if len(ready) > 0 && !stopping {
			// One write for the batch. AppendRequest puts the frame's
			// size at the start of the slice it is given, so each
			// request is framed on its own and then appended.
			rc := pc.raw
			batch := pc.batch[:0]
			for _, m := range ready {
				rc.corr++
				rc.wbuf = rc.f.AppendRequest(rc.wbuf[:0], f.request(m, ph), rc.corr)
				batch = append(batch, rc.wbuf...)
				inflight = append(inflight, m)
			}
			pc.batch, ready = batch, ready[:0]
			if _, err := rc.nc.Write(batch); err != nil {
				return err
			}
		}
		if len(inflight) == 0 && (stopping || len(waiting) == 0) {
			return nil
		}
		var due <-chan time.Time
		if len(waiting) > 0 && !stopping {
			timer.Reset(time.Until(waiting[0].due))
			due = timer.C
		}
		select {
		case fr := <-pc.frames:
			if fr.err != nil {
				return fr.err
			}
			m := inflight[0]
			inflight = inflight[1:]
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			if err := parseResponse(fr.b, pc.raw.corr-int32(len(inflight)), proto, resp); err != nil {
				return err
			}
			now := time.Now()
			again, err := f.answer(m, resp, ph, now)
			if err != nil {
				return err
			}
			switch {
			case ph == phaseLeave:
			case again || ph == phaseKeepalive:
				ready = append(ready, m)
			default:
				waiting = append(waiting, wait{m, now.Add(m.interval)})
			}
		case now := <-due:
			i := 0
			for i < len(waiting) && !waiting[i].due.After(now) {
				ready = append(ready, waiting[i].m)
				i++
			}
			waiting = waiting[i:]
		case <-stop:
			stopping, stop = true, nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// request is m's next heartbeat in ph.
func (f *fleet) request(m *cmember, ph phase) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = f.version
	r.Group = f.group
	r.MemberID = m.id
	r.MemberEpoch = m.epoch
	r.RebalanceTimeoutMillis = -1
	switch {
	case ph == phaseLeave:
		r.MemberEpoch = -1
	case m.epoch == 0: // join: everything
		r.RebalanceTimeoutMillis = 60000
		r.SubscribedTopicNames = []string{f.topic}
		r.ServerAssignor = kmsg.StringPtr("uniform")
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case m.report:
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID = f.track.id()
		t.Partitions = slices.Clone(m.owned)
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{t}
		m.report = false
	}
	return r
}

// answer applies resp to m and tells whether m heartbeats again at once
// (its epoch or assignment changed).
func (f *fleet) answer(m *cmember, resp *kmsg.ConsumerGroupHeartbeatResponse, ph phase, now time.Time) (bool, error) {
	switch ph {
	case phaseConverge:
		f.answered.Add(1)
	case phaseKeepalive:
		if now.Before(f.from) || !now.Before(f.until) {
			break
		}
		if resp.ErrorCode != 0 {
			f.failed.Add(1)
		} else {
			f.ok.Add(1)
		}
	}
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return false, fmt.Errorf("member %s at epoch %d: %w%s", m.id, m.epoch, kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	if ph == phaseLeave {
		return false, nil
	}
	if resp.HeartbeatIntervalMillis > 0 {
		m.interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
	}
	prevEpoch, prev := m.epoch, m.owned
	changed := resp.MemberEpoch != m.epoch
	m.epoch = resp.MemberEpoch
	if a := resp.Assignment; a != nil {
		var next []int32
		for _, t := range a.Topics {
			if len(t.Partitions) == 0 {
				continue
			}
			if err := f.track.topic(t.TopicID); err != nil {
				return false, err
			}
			next = append(next, t.Partitions...)
		}
		slices.Sort(next)
		if !slices.Equal(next, m.owned) {
			m.owned, m.report, changed = next, true, true
		}
	}
	if changed {
		if err := f.track.moved(m.id, prevEpoch, m.epoch, prev, m.owned, now); err != nil {
			return false, err
		}
	} else if ph == phaseConverge && !f.track.fits(len(m.owned)) && !f.track.converged() {
		f.waits.Add(1)
	}
	return changed, nil
}

// describe checks the group with ConsumerGroupDescribe (see
// describeConverged).
func (f *fleet) describe(ctx context.Context) error {
	views := make(map[string]memberView, len(f.members))
	topicID := f.track.id()
	for _, m := range f.members {
		v := memberView{epoch: m.epoch}
		for _, p := range m.owned {
			v.owned = append(v.owned, tpart{topicID, p})
		}
		views[m.id] = v
	}
	return describeConverged(ctx, f.admin, f.group, views)
}

// tpart is one partition of a topic named by its ID.
type tpart struct {
	topic [16]byte
	p     int32
}

func compareTpart(a, b tpart) int {
	if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.p, b.p)
}

// memberView is what a simulated member believes: its epoch and the
// partitions it owns, sorted by compareTpart.
type memberView struct {
	epoch int32
	owned []tpart
}

// describeConverged checks group with ConsumerGroupDescribe: Stable, the
// group, assignment and every member's epoch equal (and equal to the
// member's own view), exactly the members of views, and every member's
// assignment and target what the member owns.
func describeConverged(ctx context.Context, admin *kgo.Client, group string, views map[string]memberView) error {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return fmt.Errorf("ConsumerGroupDescribe: %w", err)
	}
	if len(resp.Groups) != 1 {
		return fmt.Errorf("ConsumerGroupDescribe: %d groups", len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		return fmt.Errorf("ConsumerGroupDescribe: %w", kerr.ErrorForCode(g.ErrorCode))
	}
	if g.State != "Stable" || g.Epoch != g.AssignmentEpoch || len(g.Members) != len(views) {
		return fmt.Errorf("ConsumerGroupDescribe: state %s, epoch %d, assignment epoch %d, %d members (want Stable, equal epochs, %d members)",
			g.State, g.Epoch, g.AssignmentEpoch, len(g.Members), len(views))
	}
	flat := func(a kmsg.Assignment) []tpart {
		var ps []tpart
		for _, t := range a.TopicPartitions {
			for _, p := range t.Partitions {
				ps = append(ps, tpart{t.TopicID, p})
			}
		}
		slices.SortFunc(ps, compareTpart)
		return ps
	}
	for _, dm := range g.Members {
		v, ok := views[dm.MemberID]
		switch {
		case !ok:
			return fmt.Errorf("ConsumerGroupDescribe: unknown member %s", dm.MemberID)
		case dm.MemberEpoch != g.Epoch || v.epoch != g.Epoch:
			return fmt.Errorf("ConsumerGroupDescribe: member %s at epoch %d (own view %d), group at %d", dm.MemberID, dm.MemberEpoch, v.epoch, g.Epoch)
		case !slices.Equal(flat(dm.Assignment), v.owned) || !slices.Equal(flat(dm.TargetAssignment), v.owned):
			return fmt.Errorf("ConsumerGroupDescribe: member %s assigned %v, target %v, owns %v", dm.MemberID, flat(dm.Assignment), flat(dm.TargetAssignment), v.owned)
		}
	}
	return nil
}

// tracker follows ownership across all members of a fleet and tells when
// the group has converged.
type tracker struct {
	mu       sync.Mutex
	n, parts int
	lo, hi   int      // a member's share: floor and ceil of parts/n
	owners   []int32  // members owning each partition
	holder   []string // the member that took each partition last (for errors)
	once     int      // partitions owned by exactly one member
	balanced int      // members owning lo..hi partitions
	epochs   map[int32]int
	topicID  [16]byte
	haveID   bool
	err      error
	done     chan struct{}
	closed   bool
	at       time.Time // when it converged
}

func newTracker(n, parts int) *tracker {
	t := &tracker{n: n, parts: parts, lo: parts / n, hi: (parts + n - 1) / n}
	t.owners = make([]int32, parts)
	t.holder = make([]string, parts)
	t.reset()
	return t
}

// reset starts a new phase from the current ownership: only done is new
// (ownership carries over from the previous phase).
func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epochs == nil {
		t.epochs = map[int32]int{}
		if t.lo == 0 {
			t.balanced = t.n
		}
	}
	t.done, t.closed = make(chan struct{}), false
	t.check(time.Now())
}

func (t *tracker) topic(id [16]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.haveID {
		t.topicID, t.haveID = id, true
	} else if id != t.topicID {
		t.err = errors.New("assignment names a second topic")
		return t.err
	}
	return nil
}

// id is the topic ID the assignments named (zero before the first).
func (t *tracker) id() [16]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.topicID
}

func (t *tracker) fits(k int) bool { return k >= t.lo && k <= t.hi }

// moved records one member's change from (prevEpoch, prev) to (epoch,
// next).
func (t *tracker) moved(member string, prevEpoch, epoch int32, prev, next []int32, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if prevEpoch > 0 {
		if t.epochs[prevEpoch]--; t.epochs[prevEpoch] == 0 {
			delete(t.epochs, prevEpoch)
		}
	}
	if epoch > 0 {
		t.epochs[epoch]++
	}
	if t.fits(len(prev)) {
		t.balanced--
	}
	if t.fits(len(next)) {
		t.balanced++
	}
	for _, p := range prev {
		if t.owners[p] == 1 {
			t.once--
		}
		t.owners[p]--
		if t.owners[p] == 1 {
			t.once++
		}
	}
	for _, p := range next {
		if p < 0 || int(p) >= t.parts {
			t.err = fmt.Errorf("assigned partition %d of a %d-partition topic", p, t.parts)
			return t.err
		}
		if t.owners[p] == 1 {
			t.once--
		}
		t.owners[p]++
		switch t.owners[p] {
		case 1:
			t.once++
		case 2:
			// A member drops a revoked partition before its next
			// heartbeat goes out, and a target may hand the partition on
			// only after that heartbeat: two owners is a server error.
			t.err = fmt.Errorf("partition %d assigned to a second member: %s (epoch %d) while %s still owns it", p, member, epoch, t.holder[p])
			return t.err
		}
		t.holder[p] = member
	}
	t.check(now)
	return nil
}

func (t *tracker) check(now time.Time) {
	if t.closed || t.once != t.parts || t.balanced != t.n || len(t.epochs) != 1 {
		return
	}
	for _, c := range t.epochs {
		if c != t.n {
			return
		}
	}
	t.closed, t.at = true, now
	close(t.done)
}

func (t *tracker) converged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *tracker) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
