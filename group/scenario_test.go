package group

// Scenario files: group/testdata/*.txt drive a Shard with requests written
// as text and compare what it answers and writes with the expected text in
// the file. The format is described in group/testdata/README.md. To accept
// new or changed output after reviewing the diff:
//
//	go test ./group/ -run TestScenarios -rewrite

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/internal/script"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of group/testdata/*.txt scenario files")

func TestScenarios(t *testing.T) {
	script.RunDir(t, "testdata", *rewrite, "go test ./group/ -run TestScenarios -rewrite", func(t *testing.T) func(string) []string {
		return newScenario(t).run
	})
}

// scenario is the state of one file's run: a shard on a fake clock whose
// writes complete at once into an in-memory store (unless held or failed),
// and the names the file gives to member ids.
type scenario struct {
	t     *testing.T
	cfg   Config
	cat   *catalog.Catalog
	s     *Shard
	start time.Time
	now   time.Time

	tick   Ticket
	label  map[Ticket]string // "join m1": what the reply is printed as
	alias  map[Ticket]string // the member name a join was sent for
	store  map[string][]byte
	hold   bool
	held   []Write
	fail   int16
	loaded int // reloads so far (seeds the reloaded shard's ids)
	// staleMeta: the groups whose last metadata write failed (see
	// h.staleMeta).
	staleMeta map[string]bool

	names map[string]string   // member id -> printed name
	ids   map[string][]string // member name -> its ids, latest last
	gen   map[string]int32    // member name -> generation of its last successful join
	epoch map[string]int32    // consumer member -> epoch of its last answer
	last  map[string]tpset    // consumer member -> assignment of its last answer carrying one

	out []string
}

func newScenario(t *testing.T) *scenario {
	cfg := Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.ConsumerAssignmentDelayPerMember = 0 // as in newH; config consumer-assignment-per-member= sets it
	sc := &scenario{
		t: t, cfg: cfg,
		start: time.UnixMilli(1_700_000_000_000),
		label: map[Ticket]string{}, alias: map[Ticket]string{},
		store: map[string][]byte{}, staleMeta: map[string]bool{},
		names: map[string]string{}, ids: map[string][]string{},
		gen: map[string]int32{}, epoch: map[string]int32{}, last: map[string]tpset{},
	}
	sc.now = sc.start
	return sc
}

// shard returns the shard, creating it on first use: config and topics
// commands come before it.
func (sc *scenario) shard() *Shard {
	if sc.s == nil {
		if sc.cat != nil {
			sc.cfg.Topics = sc.cat
		}
		sc.s = NewShard(sc.cfg, seededReader{rand.NewChaCha8([32]byte{1})})
	}
	return sc.s
}

func (sc *scenario) printf(format string, args ...any) {
	sc.out = append(sc.out, fmt.Sprintf(format, args...))
}

// run executes one command line and returns its output lines.
func (sc *scenario) run(line string) []string {
	sc.out = nil
	fields := strings.Fields(line)
	cmd := fields[0]
	a := script.ParseArgs(fields[1:])
	switch cmd {
	case "config":
		sc.config(a)
	case "topics":
		sc.topics(a)
	case "join":
		sc.join(a)
	case "sync":
		sc.sync(a)
	case "heartbeat":
		sc.heartbeat(a)
	case "leave":
		sc.leave(a)
	case "commit":
		sc.commit(a)
	case "fetch":
		sc.fetch(a)
	case "cgheartbeat":
		sc.cgheartbeat(a)
	case "delete-groups":
		sc.deleteGroups(a)
	case "describe":
		sc.describe(a, fields[1:])
	case "advance":
		sc.advance(a, fields[1:])
	case "reload":
		sc.reload()
	case "store":
		sc.storeMode(a)
	default:
		return []string{fmt.Sprintf("error: unknown command %q", cmd)}
	}
	if u := a.Unused(); len(u) > 0 && cmd != "describe" && cmd != "advance" {
		sc.printf("error: unknown arguments %v", u)
	}
	for _, e := range a.Errs {
		sc.printf("error: %s", e)
	}
	sc.checkInvariants()
	out := sc.out
	for i := range out {
		out[i] = sc.rename(out[i])
	}
	return out
}

// checkInvariants runs after every command: no partition of a consumer
// group is held by two members, and, with no write in flight, a shard
// reloaded from the store answers as the live one does (h.checkReload).
// A violation is printed as an error line, which fails the test.
func (sc *scenario) checkInvariants() {
	if sc.s == nil {
		return
	}
	for _, id := range sc.s.GroupIDs() {
		if d := doubleOwner(sc.s.Group(id).cg); d != "" {
			sc.printf("error: group %s: %s", id, d)
		}
	}
	hh := &h{t: sc.t, s: sc.s, store: sc.store, staleMeta: sc.staleMeta, held: sc.held}
	if d := hh.checkReload(); d != "" {
		sc.printf("error: %s", strings.ReplaceAll(d, "\n", " / "))
	}
}

// rename replaces the member ids the shard generated with their names;
// a generated id no request was answered with (say, one whose write
// failed) prints as PREFIX-?.
func (sc *scenario) rename(s string) string {
	for id, name := range sc.names {
		if id != name && strings.Contains(s, id) {
			s = strings.ReplaceAll(s, id, name)
		}
	}
	return unnamedID.ReplaceAllString(s, "-?")
}

// unnamedID matches the random part of a generated member id.
var unnamedID = regexp.MustCompile(`-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// bind records that the member called name has the id id.
func (sc *scenario) bind(name, id string) {
	if name == "" || id == "" {
		return
	}
	if _, ok := sc.names[id]; ok {
		return
	}
	ids := sc.ids[name]
	printed := name
	if len(ids) > 0 {
		printed = fmt.Sprintf("%s#%d", name, len(ids)+1)
	}
	sc.ids[name] = append(ids, id)
	sc.names[id] = printed
}

// memberID is the id to send for member name: its latest id, or "" if it
// has none yet. id= overrides: a printed name (m1, m1#2) or a literal id.
func (sc *scenario) memberID(a *script.Args, name string) string {
	if a.Has("id") {
		v := a.Str("id", "")
		for id, n := range sc.names {
			if n == v {
				return id
			}
		}
		return v
	}
	if ids := sc.ids[name]; len(ids) > 0 {
		return ids[len(ids)-1]
	}
	return ""
}

func (sc *scenario) config(a *script.Args) {
	if sc.s != nil {
		sc.printf("error: config must come before the first request")
		return
	}
	c := &sc.cfg
	c.InitialRebalanceDelay = a.Dur("initial-delay", c.InitialRebalanceDelay)
	c.MaxSize = int(a.Int("max-size", int64(c.MaxSize)))
	c.ConsumerMaxSize = int(a.Int("consumer-max-size", int64(c.ConsumerMaxSize)))
	c.ConsumerSessionTimeout = a.Dur("consumer-session", c.ConsumerSessionTimeout)
	c.ConsumerRebalanceHeartbeatInterval = a.Dur("consumer-rebalance-interval", c.ConsumerRebalanceHeartbeatInterval)
	c.ConsumerRebalanceHeartbeatMin = a.Dur("consumer-rebalance-min", c.ConsumerRebalanceHeartbeatMin)
	c.OffsetsRetention = a.Dur("retention", c.OffsetsRetention)
	c.ConsumerAssignmentInterval = a.Dur("consumer-assignment-interval", c.ConsumerAssignmentInterval)
	c.ConsumerAssignmentDelayPerMember = a.Dur("consumer-assignment-per-member", c.ConsumerAssignmentDelayPerMember)
	c.ConsumerMigrationPolicy = a.Str("migration", c.ConsumerMigrationPolicy)
}

// topics creates topics in the catalog consumer groups are assigned from
// (topics a=4 b=2), grows an existing one to the count given, or deletes
// them (topics delete=b,c).
func (sc *scenario) topics(a *script.Args) {
	if sc.cat == nil {
		if sc.s != nil {
			sc.printf("error: the first topics command must come before the first request")
			return
		}
		sc.cat = catalog.New(catalog.Options{})
	}
	for _, n := range a.Keys() {
		if n == "delete" {
			for _, d := range a.List("delete") {
				if err := sc.cat.Delete(d); err != nil {
					sc.printf("error: %v", err)
				}
			}
			continue
		}
		var err error
		if _, ok := sc.cat.Lookup(n); ok {
			_, err = sc.cat.AddPartitions(n, int32(a.Int(n, 1)), nil)
		} else {
			_, err = sc.cat.Create(n, int32(a.Int(n, 1)), nil)
		}
		if err != nil {
			sc.printf("error: %v", err)
		}
	}
}

// send runs one request through the shard, labelled for its reply, and
// settles the output; a request that parks prints "<label>: parked".
func (sc *scenario) send(label, name string, fn func(now time.Time, t Ticket, out *Output)) {
	sc.shard()
	sc.tick++
	t := sc.tick
	sc.label[t], sc.alias[t] = label, name
	var out Output
	fn(sc.now, t, &out)
	answered := false
	for _, r := range out.Replies {
		answered = answered || r.Ticket == t
	}
	sc.settle(&out, func(tk Ticket) { answered = answered || tk == t })
	if !answered {
		sc.printf("%s: parked", label)
	}
}

// settle prints the replies and records of out, completing writes (and
// what they release) until nothing is left. seen is told of each ticket
// answered.
func (sc *scenario) settle(out *Output, seen func(Ticket)) {
	for len(out.Replies)+len(out.Writes) > 0 {
		for _, r := range out.Replies {
			if seen != nil {
				seen(r.Ticket)
			}
			sc.reply(r)
		}
		writes := out.Writes
		out = &Output{}
		for _, w := range writes {
			sc.printWrite(w)
			if sc.hold {
				sc.printf("write %d held", w.ID)
				sc.held = append(sc.held, w)
				continue
			}
			sc.complete(w, out)
		}
	}
}

func (sc *scenario) complete(w Write, out *Output) {
	for _, r := range w.Records {
		if len(r.Key) > 0 && r.Key[0] == keyGroup {
			sc.staleMeta[string(r.Key[1:])] = sc.fail != ErrNone
		}
	}
	if sc.fail != ErrNone {
		sc.printf("write %d failed: %s", w.ID, codeName(sc.fail))
	} else {
		storeRecords(sc.store, w.Records)
	}
	sc.s.WriteDone(sc.now, w.ID, sc.fail, out)
}

// storeMode: "store hold" keeps writes in flight, "store fail=16" fails
// them with that code, "store ok" makes them succeed again, "store release"
// completes the held ones (in the current mode).
func (sc *scenario) storeMode(a *script.Args) {
	sc.shard()
	switch {
	case a.Has("hold"):
		sc.hold = true
	case a.Has("fail"):
		sc.fail = int16(a.Int("fail", 0))
	case a.Has("ok"):
		sc.fail = ErrNone
		sc.hold = false
	case a.Has("release"):
		sc.hold = false
		held := sc.held
		sc.held = nil
		var out Output
		for _, w := range held {
			if sc.fail == ErrNone {
				sc.printf("write %d done", w.ID)
			}
			sc.complete(w, &out)
		}
		sc.settle(&out, nil)
	default:
		sc.printf("error: store hold|fail=CODE|ok|release")
	}
}

func (sc *scenario) advance(a *script.Args, fields []string) {
	if len(fields) != 1 {
		sc.printf("error: advance DURATION")
		return
	}
	d, err := time.ParseDuration(fields[0])
	if err != nil {
		sc.printf("error: %v", err)
		return
	}
	a.Use(fields[0])
	s := sc.shard()
	target := sc.now.Add(d)
	for {
		at, ok := s.NextDeadline()
		if !ok || at.After(target) {
			break
		}
		if at.After(sc.now) {
			sc.now = at
		}
		var out Output
		s.Tick(sc.now, &out)
		sc.settle(&out, nil)
	}
	sc.now = target
}

// reload replaces the shard by one loaded from the store, as a node taking
// the partition over builds it. Requests still parked are lost (their
// connections were to the old node); writes in flight are dropped.
func (sc *scenario) reload() {
	sc.shard()
	sc.loaded++
	s := NewShard(sc.s.cfg, seededReader{rand.NewChaCha8([32]byte{1, byte(sc.loaded)})})
	keys := make([]string, 0, len(sc.store))
	for k := range sc.store {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := s.Load([]byte(k), sc.store[k]); err != nil {
			sc.printf("error: load: %v", err)
		}
	}
	var out Output
	s.FinishLoad(sc.now, &out)
	sc.s, sc.held, sc.hold = s, nil, false
	sc.settle(&out, nil)
	sc.printf("reloaded %d records", len(keys))
}

// ---- requests

func (sc *scenario) join(a *script.Args) {
	group := a.Str("group", "g")
	name := a.Str("member", "")
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(a.Int("v", 9))
	req.Group = group
	req.MemberID = sc.memberID(a, name)
	if a.Has("instance") {
		inst := a.Str("instance", "")
		req.InstanceID = &inst
	}
	req.SessionTimeoutMillis = int32(a.Dur("session", 10*time.Second).Milliseconds())
	req.RebalanceTimeoutMillis = int32(a.Dur("rebalance", 30*time.Second).Milliseconds())
	req.ProtocolType = a.Str("type", "consumer")
	req.Protocols = protos("range", "m")
	if ps := a.List("protocols"); ps != nil {
		req.Protocols = nil
		for _, p := range ps {
			n, m, _ := strings.Cut(p, ":")
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: n, Metadata: []byte(m)})
		}
	}
	client := Client{ID: a.Str("client", "cli"), Host: "127.0.0.1"}
	t := sc.tick + 1
	sc.send("join "+name, name, func(now time.Time, t Ticket, out *Output) { sc.s.JoinGroup(now, t, client, req, out) })
	// Before v4 a new member gets its id only in the (parked) answer:
	// name it now, from the shard's member parked on this request.
	if g := sc.s.Group(group); g != nil {
		for _, m := range g.members {
			if m.join != nil && m.join.t == t {
				sc.bind(name, m.id)
			}
		}
	}
}

// gen is the generation to send for member name: gen= or that of its last
// successful join.
func (sc *scenario) genArg(a *script.Args, name string) int32 {
	if g, ok := sc.gen[name]; ok {
		return int32(a.Int("gen", int64(g)))
	}
	return int32(a.Int("gen", -1))
}

func (sc *scenario) sync(a *script.Args) {
	name := a.Str("member", "")
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(a.Int("v", 5))
	req.Group, req.MemberID, req.Generation = a.Str("group", "g"), sc.memberID(a, name), sc.genArg(a, name)
	if a.Has("instance") {
		inst := a.Str("instance", "")
		req.InstanceID = &inst
	}
	if req.Version >= 5 { // type=null or protocol=null sends a null field
		pt, p := a.Str("type", "consumer"), a.Str("protocol", "range")
		req.ProtocolType, req.Protocol = &pt, &p
		if pt == "null" {
			req.ProtocolType = nil
		}
		if p == "null" {
			req.Protocol = nil
		}
	}
	// assign=m1:x,m2:y gives member m1 the bytes "x".
	for _, e := range a.List("assign") {
		n, v, _ := strings.Cut(e, ":")
		id := n
		if ids := sc.ids[n]; len(ids) > 0 {
			id = ids[len(ids)-1]
		}
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(v)})
	}
	sc.send("sync "+name, name, func(now time.Time, t Ticket, out *Output) { sc.s.SyncGroup(now, t, req, out) })
}

func (sc *scenario) heartbeat(a *script.Args) {
	name := a.Str("member", "")
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = a.Str("group", "g"), sc.memberID(a, name), sc.genArg(a, name)
	if a.Has("instance") {
		inst := a.Str("instance", "")
		req.InstanceID = &inst
	}
	sc.send("heartbeat "+name, name, func(now time.Time, t Ticket, out *Output) { sc.s.Heartbeat(now, t, req, out) })
}

// leave sends a LeaveGroup v5 for members=m1,/b,m2/a (member[/instance])
// or, with v=1..2, a single member=m1.
func (sc *scenario) leave(a *script.Args) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = int16(a.Int("v", 5))
	req.Group = a.Str("group", "g")
	label := "leave"
	if req.Version < 3 {
		name := a.Str("member", "")
		req.MemberID = sc.memberID(a, name)
		label += " " + name
	}
	for _, e := range a.List("members") {
		n, inst, static := strings.Cut(e, "/")
		m := kmsg.NewLeaveGroupRequestMember()
		if ids := sc.ids[n]; len(ids) > 0 {
			m.MemberID = ids[len(ids)-1]
		} else {
			m.MemberID = n
		}
		if static {
			m.InstanceID = &inst
		}
		req.Members = append(req.Members, m)
	}
	sc.send(label, "", func(now time.Time, t Ticket, out *Output) { sc.s.LeaveGroup(now, t, req, out) })
}

// commit sends an OffsetCommit: offsets=t/0=5,t/1=7; member= and gen= (the
// member's last generation by default; -1 without a member).
func (sc *scenario) commit(a *script.Args) {
	name := a.Str("member", "")
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(a.Int("v", 9))
	req.Group, req.MemberID = a.Str("group", "g"), sc.memberID(a, name)
	req.Generation = sc.genArg(a, name)
	if e, ok := sc.epoch[name]; ok && !a.Has("gen") {
		req.Generation = e
	}
	if a.Has("instance") {
		inst := a.Str("instance", "")
		req.InstanceID = &inst
	}
	var meta *string
	if a.Has("meta") {
		m := a.Str("meta", "")
		meta = &m
	}
	for _, e := range a.List("offsets") {
		tp, off, _ := strings.Cut(e, "=")
		topic, ps, _ := strings.Cut(tp, "/")
		p, _ := strconv.Atoi(ps)
		o, _ := strconv.ParseInt(off, 10, 64)
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == topic })
		if i < 0 {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = int32(p), o, meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	label := "commit"
	if name != "" {
		label += " " + name
	}
	sc.send(label, name, func(now time.Time, t Ticket, out *Output) { sc.s.OffsetCommit(now, t, req, out) })
}

// fetch asks OffsetFetch v8 for a group's offsets (through the API table,
// as the coordinator serves it): all of them, or topics=t/0,t/1; stable sets
// RequireStable.
func (sc *scenario) fetch(a *script.Args) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = a.Str("group", "g")
	if tps := a.List("topics"); tps != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, e := range tps {
			topic, ps, _ := strings.Cut(e, "/")
			p, _ := strconv.Atoi(ps)
			i := slices.IndexFunc(rg.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return t.Topic == topic })
			if i < 0 {
				rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic})
				i = len(rg.Topics) - 1
			}
			rg.Topics[i].Partitions = append(rg.Topics[i].Partitions, int32(p))
		}
	}
	req.RequireStable = a.Has("stable")
	req.Groups = append(req.Groups, rg)
	sc.send("fetch "+rg.Group, "", func(now time.Time, t Ticket, out *Output) {
		LookupAPI(req.Key()).Serve(sc.s, now, t, Client{}, req, out)
	})
}

func (sc *scenario) deleteGroups(a *script.Args) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version = 2
	req.Groups = a.List("groups")
	sc.send("delete-groups", "", func(now time.Time, t Ticket, out *Output) { sc.s.DeleteGroups(now, t, req, out) })
}

// cgheartbeat sends a ConsumerGroupHeartbeat (v1; v=0 for version 0).
// Absent fields are sent as null (unchanged): subscribe=a,b (subscribe=[]
// is the empty list), owned=a/0,1;b/0 or owned=[] or owned=last (what the
// member's last answer assigned it). epoch defaults to the member's epoch
// from its last answer (0 before any); rebalance defaults to 60s on a join
// (epoch 0) and to -1 (unchanged) otherwise.
func (sc *scenario) cgheartbeat(a *script.Args) {
	name := a.Str("member", "")
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(a.Int("v", 1))
	req.Group = a.Str("group", "cg")
	req.MemberID = name
	if a.Has("id") {
		req.MemberID = a.Str("id", "")
	}
	req.MemberEpoch = int32(a.Int("epoch", int64(sc.epoch[name])))
	opt := func(k string) *string {
		if !a.Has(k) {
			return nil
		}
		v := a.Str(k, "")
		return &v
	}
	req.InstanceID, req.RackID, req.SubscribedTopicRegex, req.ServerAssignor = opt("instance"), opt("rack"), opt("regex"), opt("assignor")
	req.SubscribedTopicNames = a.List("subscribe")
	switch {
	case a.Str("rebalance", "") == "-1":
		req.RebalanceTimeoutMillis = -1
	case a.Has("rebalance"):
		req.RebalanceTimeoutMillis = int32(a.Dur("rebalance", 0).Milliseconds())
	case req.MemberEpoch == 0:
		req.RebalanceTimeoutMillis = 60000
	default:
		req.RebalanceTimeoutMillis = -1
	}
	if a.Has("owned") {
		v := a.Str("owned", "")
		var owned tpset
		if v == "last" {
			owned = sc.last[name].clone()
			if owned == nil {
				owned = tpset{}
			}
		} else {
			var err error
			if owned, err = parseTPSet(v); err != nil {
				sc.printf("error: owned=%s: %v", v, err)
			}
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range owned.topics() {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = catalog.TopicID(t), owned[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	client := Client{ID: "client-" + name, Host: "127.0.0.1"}
	sc.send("cgheartbeat "+name, name, func(now time.Time, t Ticket, out *Output) {
		sc.s.ConsumerGroupHeartbeat(now, t, client, req, out)
	})
}

// parseTPSet reads "a/0,1;b/2" ("[]" or "" is the empty set).
func parseTPSet(v string) (tpset, error) {
	s := tpset{}
	if v == "" || v == "[]" {
		return s, nil
	}
	for _, part := range strings.Split(v, ";") {
		topic, ps, ok := strings.Cut(part, "/")
		if !ok {
			return nil, fmt.Errorf("%q: want topic/p,p", part)
		}
		for _, p := range strings.Split(ps, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, err
			}
			s.add(topic, int32(n))
		}
	}
	return s, nil
}

// fmtTPSet prints a set as parseTPSet reads it; at, when set, adds
// "@epoch" to the partitions given at an epoch other than epoch.
func fmtTPSet(s tpset, at map[topicPartition]int32, epoch int32) string {
	if len(s) == 0 {
		return "[]"
	}
	var parts []string
	for _, t := range s.topics() {
		if len(s[t]) == 0 {
			continue
		}
		ps := make([]string, len(s[t]))
		for i, p := range s[t] {
			ps[i] = strconv.Itoa(int(p))
			if e, ok := at[topicPartition{t, p}]; ok && at != nil && e != epoch {
				ps[i] += "@" + strconv.Itoa(int(e))
			}
		}
		parts = append(parts, t+"/"+strings.Join(ps, ","))
	}
	if len(parts) == 0 {
		return "[]"
	}
	return strings.Join(parts, ";")
}

// ---- printing

func codeName(c int16) string {
	if c == 0 {
		return "ok"
	}
	if e := kerr.ErrorForCode(c); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return fmt.Sprintf("error(%d)", c)
}

// bytesText prints opaque bytes (metadata, assignments) as text when they
// are printable without spaces, else quoted.
func bytesText(b []byte) string {
	if len(b) == 0 {
		return `""`
	}
	for _, c := range b {
		if c <= ' ' || c > '~' || c == '"' {
			return strconv.Quote(string(b))
		}
	}
	return string(b)
}

func (sc *scenario) topicName(id [16]byte) string {
	if tp, ok := sc.shard().cfg.Topics.LookupID(id); ok {
		return tp.Name
	}
	return fmt.Sprintf("%x", id)
}

func (sc *scenario) reply(r Reply) {
	label := sc.label[r.Ticket]
	name := sc.alias[r.Ticket]
	var b strings.Builder
	b.WriteString(label + ": ")
	switch resp := r.Resp.(type) {
	case *kmsg.JoinGroupResponse:
		if resp.ErrorCode == 0 || resp.ErrorCode == ErrMemberIDRequired {
			sc.bind(name, resp.MemberID)
		}
		b.WriteString(codeName(resp.ErrorCode))
		if resp.ErrorCode == 0 {
			sc.gen[name] = resp.Generation
			fmt.Fprintf(&b, " gen=%d", resp.Generation)
		}
		ptype := resp.ProtocolType
		if resp.Version < 7 {
			ptype = nil // not in the answer before v7
		}
		b.WriteString(protocolText(ptype, resp.Protocol))
		if resp.ErrorCode == 0 {
			fmt.Fprintf(&b, " leader=%s", resp.LeaderID)
		}
		if resp.SkipAssignment {
			b.WriteString(" skip-assignment")
		}
		if resp.MemberID != "" {
			fmt.Fprintf(&b, " member=%s", resp.MemberID)
		}
		if len(resp.Members) > 0 {
			var ms []string
			for _, m := range resp.Members {
				s := m.MemberID
				if m.InstanceID != nil {
					s += "/" + *m.InstanceID
				}
				ms = append(ms, s)
			}
			fmt.Fprintf(&b, " members=%s", strings.Join(ms, ","))
		}
	case *kmsg.SyncGroupResponse:
		b.WriteString(codeName(resp.ErrorCode))
		if resp.Version >= 5 { // not in the answer before v5
			b.WriteString(protocolText(resp.ProtocolType, resp.Protocol))
		}
		if resp.ErrorCode == 0 {
			fmt.Fprintf(&b, " assignment=%s", bytesText(resp.MemberAssignment))
		}
	case *kmsg.HeartbeatResponse:
		b.WriteString(codeName(resp.ErrorCode))
	case *kmsg.LeaveGroupResponse:
		b.WriteString(codeName(resp.ErrorCode))
		for _, m := range resp.Members {
			id := m.MemberID
			if m.InstanceID != nil {
				id += "/" + *m.InstanceID
			}
			fmt.Fprintf(&b, " %s=%s", id, codeName(m.ErrorCode))
		}
	case *kmsg.OffsetCommitResponse:
		var ps []string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, codeName(p.ErrorCode)))
			}
		}
		b.WriteString(strings.Join(ps, " "))
	case *kmsg.OffsetFetchResponse:
		for _, g := range resp.Groups {
			b.WriteString(codeName(g.ErrorCode))
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(&b, " %s/%d=%d", t.Topic, p.Partition, p.Offset)
					if p.Metadata != nil && *p.Metadata != "" {
						fmt.Fprintf(&b, "(meta=%s)", bytesText([]byte(*p.Metadata)))
					}
					if p.ErrorCode != 0 {
						fmt.Fprintf(&b, "(%s)", codeName(p.ErrorCode))
					}
				}
			}
		}
	case *kmsg.DeleteGroupsResponse:
		var gs []string
		for _, g := range resp.Groups {
			gs = append(gs, g.Group+"="+codeName(g.ErrorCode))
		}
		b.WriteString(strings.Join(gs, " "))
	case *kmsg.ConsumerGroupHeartbeatResponse:
		b.WriteString(codeName(resp.ErrorCode))
		if resp.ErrorCode != 0 {
			if resp.ErrorMessage != nil {
				fmt.Fprintf(&b, " (%s)", *resp.ErrorMessage)
			}
			break
		}
		if resp.MemberID != nil && *resp.MemberID != name {
			sc.bind(name, *resp.MemberID)
			fmt.Fprintf(&b, " member=%s", *resp.MemberID)
		}
		sc.epoch[name] = resp.MemberEpoch
		fmt.Fprintf(&b, " epoch=%d interval=%s", resp.MemberEpoch, time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond)
		if resp.Assignment != nil {
			s := tpset{}
			for _, t := range resp.Assignment.Topics {
				for _, p := range t.Partitions {
					s.add(sc.topicName(t.TopicID), p)
				}
			}
			sc.last[name] = s
			fmt.Fprintf(&b, " assignment=%s", fmtTPSet(s, nil, 0))
		}
	default:
		fmt.Fprintf(&b, "%T", resp)
	}
	sc.out = append(sc.out, b.String())
}

// protocolText prints a JoinGroup or SyncGroup answer's protocol type and
// name as " protocol=TYPE/NAME", " protocol=NAME" when the type is null (or
// not in the version), nothing when both are null.
func protocolText(ptype, name *string) string {
	switch {
	case ptype == nil && name == nil:
		return ""
	case ptype == nil:
		return " protocol=" + bytesText([]byte(*name))
	case name == nil:
		return " protocol=" + bytesText([]byte(*ptype)) + "/null"
	}
	return " protocol=" + bytesText([]byte(*ptype)) + "/" + bytesText([]byte(*name))
}

// since prints a time as the duration since the scenario started.
func (sc *scenario) since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(sc.start).String()
}

func (sc *scenario) sinceMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return sc.since(time.UnixMilli(ms))
}

// printWrite prints each record of w on a line starting with "rec".
// Records of a kind this printer does not know print their kind and key.
func (sc *scenario) printWrite(w Write) {
	for _, raw := range w.Records {
		r, ok, err := decode(raw.Key, raw.Value)
		switch {
		case err != nil:
			sc.printf("rec undecodable kind=0x%02x key=%q: %v", raw.Key[0], raw.Key[1:], err)
			continue
		case !ok:
			sc.printf("rec kind=0x%02x key=%q value=%dB", raw.Key[0], raw.Key[1:], len(raw.Value))
			continue
		}
		sc.printRec(&r, raw)
	}
}

func (sc *scenario) printRec(r *rec, raw Record) {
	del := ""
	if r.del {
		del = " deleted"
	}
	member := ""
	if r.c != nil {
		member = " " + r.c.member
	}
	switch r.kind {
	case keyGroup:
		if r.del {
			sc.printf("rec group %s deleted", r.group)
			return
		}
		img := r.img
		sc.printf("rec group %s gen=%d type=%s protocol=%s leader=%s members=%d", r.group, img.generation,
			img.protocolType, img.protocol, img.leader, len(img.members))
		for _, m := range img.members {
			inst := ""
			if m.instanceID != "" {
				inst = " instance=" + m.instanceID
			}
			sc.printf("rec   member %s%s session=%s rebalance=%s meta=%s assignment=%s", m.id, inst, m.session,
				m.rebalance, bytesText(m.metadata), bytesText(m.assignment))
		}
	case keyOffset:
		if r.del {
			sc.printf("rec offset %s %s/%d deleted", r.group, r.tp.topic, r.tp.partition)
			return
		}
		o := r.off
		sc.printf("rec offset %s %s/%d offset=%d epoch=%d meta=%s commit=%s expire=%s", r.group, r.tp.topic,
			r.tp.partition, o.offset, o.leaderEpoch, bytesText([]byte(o.metadata)), sc.sinceMs(o.commitMs), sc.sinceMs(o.expireMs))
	case keyCGroup:
		if r.del {
			sc.printf("rec cgroup %s deleted", r.group)
			return
		}
		sc.printf("rec cgroup %s epoch=%d hash=%016x", r.group, r.c.epoch, r.c.hash)
	case keyCTMeta:
		if r.del {
			sc.printf("rec ctarget-epoch %s deleted", r.group)
			return
		}
		sc.printf("rec ctarget-epoch %s %d", r.group, r.c.assignEpoch)
	case keyCMember:
		if r.del {
			sc.printf("rec cmember %s%s deleted", r.group, member)
			return
		}
		m := r.c.meta
		var b strings.Builder
		fmt.Fprintf(&b, "rec cmember %s%s", r.group, member)
		for _, kv := range [][2]string{{"instance", m.instanceID}, {"rack", m.rack}, {"regex", m.regex}, {"assignor", m.assignor}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
			}
		}
		fmt.Fprintf(&b, " subscribe=%s rebalance=%s client=%s", strings.Join(m.names, ","), m.rebalanceTimeout, m.clientID)
		if m.classic != nil {
			var ps []string
			for _, p := range m.classic.protocols {
				ps = append(ps, p.Name)
			}
			fmt.Fprintf(&b, " classic(session=%s protocols=%s)", m.classic.session, strings.Join(ps, ","))
		}
		sc.out = append(sc.out, b.String())
	case keyCTarget:
		if r.del {
			sc.printf("rec ctarget %s%s deleted", r.group, member)
			return
		}
		sc.printf("rec ctarget %s%s %s", r.group, member, fmtTPSet(r.c.target, nil, 0))
	case keyCCurrent:
		if r.del {
			sc.printf("rec ccurrent %s%s deleted", r.group, member)
			return
		}
		c := r.c.cur
		sc.printf("rec ccurrent %s%s epoch=%d prev=%d state=%s assigned=%s pending=%s", r.group, member, c.epoch,
			c.prevEpoch, c.state, fmtTPSet(c.assigned, c.assignedAt, c.epoch), fmtTPSet(c.pending, c.assignedAt, c.epoch))
	case keyHistory:
		ev, err := r.event()
		if err != nil {
			sc.printf("rec history %s #%d: %v", r.group, r.seq, err)
			return
		}
		if r.del || ev == nil {
			sc.printf("rec history %s #%d deleted", r.group, r.seq)
			return
		}
		cause := fmt.Sprint(ev.Cause.Kind)
		if ev.Cause.MemberID != "" {
			cause += "(" + ev.Cause.MemberID + ")"
		}
		line := fmt.Sprintf("rec history %s #%d gen=%d->%d outcome=%s cause=%s join=%s sync=%s", r.group, r.seq,
			ev.FromGeneration, ev.Generation, ev.Outcome, cause,
			time.Duration(ev.JoinMs)*time.Millisecond, time.Duration(ev.SyncMs)*time.Millisecond)
		if len(ev.MoreCauses) > 0 {
			line += fmt.Sprintf(" more-causes=%d", len(ev.MoreCauses))
		}
		if len(ev.Evicted) > 0 {
			line += " evicted=" + strings.Join(ev.Evicted, ",")
		}
		if len(ev.WaitedFor) > 0 {
			// Each wait as member(phase time[ evicted]), in the
			// event's order (slowest first).
			ws := make([]string, len(ev.WaitedFor))
			for i, w := range ev.WaitedFor {
				ws[i] = fmt.Sprintf("%s(%s %s", w.MemberID, w.Phase, time.Duration(w.WaitedMs)*time.Millisecond)
				if w.Evicted {
					ws[i] += " evicted"
				}
				ws[i] += ")"
			}
			line += " waited=" + strings.Join(ws, ",")
		}
		sc.out = append(sc.out, line)
	default:
		sc.printf("rec kind=0x%02x group=%s%s key=%q%s", r.kind, r.group, member, raw.Key[1:], del)
	}
}

// describe prints the shard's view of groups (all of them without an
// argument): state, generation or epoch, members and what they hold.
func (sc *scenario) describe(a *script.Args, fields []string) {
	s := sc.shard()
	ids := fields
	a.Use(fields...)
	if len(ids) == 0 {
		ids = s.GroupIDs()
		if len(ids) == 0 {
			sc.printf("no groups")
		}
	}
	for _, id := range ids {
		g := s.Group(id)
		if g == nil {
			sc.printf("%s: none", id)
			continue
		}
		if cg := g.cg; cg != nil {
			sc.describeConsumer(g, cg)
			continue
		}
		line := fmt.Sprintf("%s: %s gen=%d", id, g.State(), g.Generation())
		if g.protocolType != "" {
			line += " type=" + g.protocolType
		}
		if g.protocol != "" {
			line += " protocol=" + g.protocol
		}
		if g.leader != "" {
			line += " leader=" + g.leader
		}
		if n := g.NumPending(); n > 0 {
			line += fmt.Sprintf(" pending=%d", n)
		}
		if n := g.NumOffsets(); n > 0 {
			line += fmt.Sprintf(" offsets=%d", n)
		}
		sc.printf("%s", line)
		for _, m := range g.members {
			line := "  member " + m.id
			if m.instanceID != "" {
				line += " instance=" + m.instanceID
			}
			switch {
			case m.join != nil:
				line += " joining"
			case m.sync != nil:
				line += " syncing"
			}
			if m.isNew {
				line += " new"
			}
			line += fmt.Sprintf(" session=%s rebalance=%s", m.sessionTimeout, m.rebalanceTimeout)
			if len(m.assignment) > 0 {
				line += " assignment=" + bytesText(m.assignment)
			}
			sc.printf("%s", line)
		}
	}
}

func (sc *scenario) describeConsumer(g *Group, cg *consumerGroup) {
	line := fmt.Sprintf("%s: consumer %s epoch=%d assignment-epoch=%d", g.id, cg.state(), cg.epoch, cg.assignEpoch)
	if len(g.members) > 0 {
		line += fmt.Sprintf(" classic-members=%d", len(g.members))
	}
	if n := g.NumOffsets(); n > 0 {
		line += fmt.Sprintf(" offsets=%d", n)
	}
	sc.printf("%s", line)
	for _, id := range cg.ids {
		m := cg.members[id]
		line := fmt.Sprintf("  member %s epoch=%d state=%s", id, m.epoch, m.state)
		if m.instanceID != "" {
			line += " instance=" + m.instanceID
		}
		if m.classic != nil {
			line += " classic"
		}
		line += " assigned=" + fmtTPSet(m.assigned, nil, 0)
		if len(m.pending) > 0 {
			line += " revoking=" + fmtTPSet(m.pending, nil, 0)
		}
		line += " target=" + fmtTPSet(cg.target[id], nil, 0)
		sc.printf("%s", line)
	}
}
