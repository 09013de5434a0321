package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// diffNode is what a differential restart test drives: a secure node (in
// process, a child process, or a two-node cluster), a client of it as the
// super user admin, and how to restart it; snapshot asks it every question
// about its state, before and after.
type diffNode struct {
	t       *testing.T
	ctx     context.Context
	addr    string
	cl      *kgo.Client
	cluster bool
	advance func(time.Duration) // the node's clock, if it is a fake one
	restart func()
	metrics func() string // the node's group gauges ("" if not served)
}

// startDiffNode runs the node in process on a fake clock; restart closes
// it and starts it again.
func startDiffNode(t *testing.T, ctx context.Context) (*diffNode, *clock.Fake) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := secureConfig(t, nil)
	cfg.DataDir = t.TempDir()
	cfg.Clock = clk
	cfg.Group.ConsumerAssignmentInterval = 0 // targets at once: a member revokes
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.Rand = seeded{rand.NewChaCha8([32]byte{9})}
	cfg.Logger = slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	cfg.Listeners[0].Addr = n.Addr()
	d := &diffNode{t: t, ctx: ctx, addr: n.Addr(), advance: clk.Advance}
	d.metrics = func() string {
		var lines []string
		for _, name := range []string{"cohort_groups", "cohort_group_members", "cohort_groups_storming"} {
			if mf := scrapeMetrics(t, n.HTTPAddr())[name]; mf != nil {
				for _, m := range mf.Metric {
					var ls []string
					for _, l := range m.Label {
						ls = append(ls, l.GetName()+"="+l.GetValue())
					}
					lines = append(lines, fmt.Sprintf("%s{%s} %v", name, strings.Join(ls, ","), m.GetGauge().GetValue()))
				}
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	d.restart = func() {
		t.Helper()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		n = startLoaded(t, cfg)
	}
	d.cl = scramClient(t, d.addr, "admin", adminPassword, kgo.RequestRetries(20), kgo.RetryTimeout(10*time.Second))
	return d, clk
}

// startDiffChild runs `cohort serve` as a child process on the real
// clock; restart kills it with SIGKILL and starts it again.
func startDiffChild(t *testing.T, ctx context.Context) *diffNode {
	bin := cohortBinary(t)
	dir := t.TempDir()
	addr := freePort(t)
	t.Setenv("COHORT_BOOTSTRAP_PASSWORD", adminPassword)
	flags := []string{"--listeners", "SASL_PLAINTEXT://" + addr, "--sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256",
		"--bootstrap-user", "admin", "--super-users", "User:admin", "--consumer-assignment-interval", "0"}
	child := startChildOn(t, bin, dir, flags...)
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	d := &diffNode{t: t, ctx: ctx, addr: addr, advance: func(time.Duration) {}, metrics: func() string { return "" }}
	d.restart = func() {
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		child = startChildOn(t, bin, dir, flags...)
	}
	d.cl = scramClient(t, d.addr, "admin", adminPassword, kgo.RequestRetries(20), kgo.RetryTimeout(10*time.Second))
	return d
}

func (d *diffNode) do(req kmsg.Request) kmsg.Response {
	d.t.Helper()
	var resp kmsg.Response
	if err := testwait.Err(20*time.Second, func() (err error) {
		resp, err = d.send(d.cl, req)
		return err
	}); err != nil {
		d.t.Fatalf("%T: no answer: %v", req, err)
	}
	return resp
}

// send sends req at its version through cl. In cluster mode (one
// coordinator partition) a group request goes to the coordinator, found
// with FindCoordinator, and an answer NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS is an error, to send again.
func (d *diffNode) send(cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	p := &pinned{req, req.GetVersion()}
	if !d.cluster {
		return cl.Request(d.ctx, p)
	}
	switch req.(type) {
	case *kmsg.MetadataRequest, *kmsg.CreateTopicsRequest, *kmsg.DescribeConfigsRequest, *kmsg.IncrementalAlterConfigsRequest,
		*kmsg.CreateACLsRequest, *kmsg.DescribeACLsRequest, *kmsg.AlterUserSCRAMCredentialsRequest,
		*kmsg.DescribeUserSCRAMCredentialsRequest:
		return cl.Request(d.ctx, p)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "any" // one partition: every group's coordinator
	r, err := cl.Request(d.ctx, &pinned{fc, 3})
	if err != nil {
		return nil, err
	}
	if code := r.(*kmsg.FindCoordinatorResponse).ErrorCode; code != 0 {
		return nil, fmt.Errorf("FindCoordinator: %d", code)
	}
	resp, err := cl.Broker(int(r.(*kmsg.FindCoordinatorResponse).NodeID)).Request(d.ctx, p)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(resp)
	if m := coordinatorMoving.Find(b); m != nil {
		return nil, fmt.Errorf("%T: %s", req, m)
	}
	return resp, nil
}

// coordinatorMoving matches NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
// COORDINATOR_LOAD_IN_PROGRESS in an answer as JSON.
var coordinatorMoving = regexp.MustCompile(`"ErrorCode":1[456]\b`)

func (d *diffNode) join(g, member, instance string, protocolType string) *kmsg.JoinGroupResponse {
	d.t.Helper()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version = 5
	j.Group, j.MemberID, j.ProtocolType = g, member, protocolType
	if instance != "" {
		j.InstanceID = kmsg.StringPtr(instance)
	}
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 30000, 60000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta-" + instance)}}
	r := d.do(j).(*kmsg.JoinGroupResponse)
	if r.ErrorCode == group.ErrMemberIDRequired {
		j.MemberID = r.MemberID
		r = d.do(j).(*kmsg.JoinGroupResponse)
	}
	if r.ErrorCode != 0 {
		d.t.Fatalf("join %s: %d", g, r.ErrorCode)
	}
	return r
}

func (d *diffNode) sync(g string, jr *kmsg.JoinGroupResponse, instance string, assign map[string]string) {
	d.t.Helper()
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 3
	s.Group, s.MemberID, s.Generation = g, jr.MemberID, jr.Generation
	if instance != "" {
		s.InstanceID = kmsg.StringPtr(instance)
	}
	for m, a := range assign {
		s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	if r := d.do(s).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		d.t.Fatalf("sync %s: %d", g, r.ErrorCode)
	}
}

func (d *diffNode) commit(v int16, g, member string, gen int32, retention int64, offs ...kmsg.OffsetCommitRequestTopicPartition) {
	d.t.Helper()
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Version = v
	c.Group, c.MemberID, c.Generation, c.RetentionTimeMillis = g, member, gen, retention
	for _, o := range offs {
		c.Topics = append(c.Topics, kmsg.OffsetCommitRequestTopic{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{o}})
	}
	r := d.do(c).(*kmsg.OffsetCommitResponse)
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				d.t.Fatalf("commit %s: %d", g, p.ErrorCode)
			}
		}
	}
}

func (d *diffNode) leave(g, member string) {
	d.t.Helper()
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version = 3
	lv.Group = g
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	if r := d.do(lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		d.t.Fatalf("leave %s: %+v", g, r)
	}
}

func off(p int32, o int64, epoch int32, meta string) kmsg.OffsetCommitRequestTopicPartition {
	return kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: o, LeaderEpoch: epoch, Metadata: kmsg.StringPtr(meta)}
}

// cgh sends a ConsumerGroupHeartbeat; owned is what the member reports.
func (d *diffNode) cgh(g, member string, epoch int32, instance string, topics []string, regex, assignor string, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
	d.t.Helper()
	h := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	h.Version = 1
	h.Group, h.MemberID, h.MemberEpoch = g, member, epoch
	if instance != "" {
		h.InstanceID = kmsg.StringPtr(instance)
	}
	if epoch == 0 {
		h.RebalanceTimeoutMillis = 120000
		h.SubscribedTopicNames = topics
		if regex != "" {
			h.SubscribedTopicRegex = kmsg.StringPtr(regex)
		}
		if assignor != "" {
			h.ServerAssignor = kmsg.StringPtr(assignor)
		}
	} else {
		h.RebalanceTimeoutMillis = -1
	}
	h.Topics = owned
	if epoch == 0 {
		h.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	r := d.do(h).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		d.t.Fatalf("heartbeat %s %s: %d %q", g, member, r.ErrorCode, msg)
	}
	return r
}

func asOwned(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if a == nil {
		return out
	}
	for _, t := range a.Topics {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
	}
	return out
}

// snapshot is every answer a client or operator reads about the node's
// state, as text, one entry per question.
func (d *diffNode) snapshot(classic, consumer []string) map[string]string {
	d.t.Helper()
	out := map[string]string{}
	js := func(v any) string {
		b, err := json.MarshalIndent(v, "", " ")
		if err != nil {
			d.t.Fatal(err)
		}
		return string(b)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lr := d.do(lg).(*kmsg.ListGroupsResponse)
	slices.SortFunc(lr.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	lr.ThrottleMillis = 0
	out["ListGroups"] = js(lr)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = classic
	dg.IncludeAuthorizedOperations = true
	dr := d.do(dg).(*kmsg.DescribeGroupsResponse)
	for _, g := range dr.Groups {
		out["DescribeGroups "+g.Group] = js(g)
	}
	for _, g := range append(slices.Clone(classic), consumer...) {
		h := kmsg.NewPtrDescribeGroupsRequest()
		h.Version = 5
		h.Groups = []string{g}
		group.RequestHistory(h, -1)
		hr := d.do(h).(*kmsg.DescribeGroupsResponse)
		doc, _ := group.HistoryTagOf(&hr.Groups[0])
		if doc != nil && doc.Type == "consumer" && doc.Waiting != nil {
			// A consumer-protocol group's event in progress is not
			// stored: the load starts one (cause loaded) in its place
			// (docs/history.md), and the members' rebalance timeouts
			// run from the load, as in Kafka.
			doc.Waiting.Since, doc.Waiting.Cause = time.Time{}, nil
			for i := range doc.Waiting.Members {
				doc.Waiting.Members[i].Since, doc.Waiting.Members[i].Deadline = time.Time{}, nil
			}
		}
		out["History "+g] = js(doc)
	}

	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Version = 1 // with the member types
	cd.Groups = consumer
	cd.IncludeAuthorizedOperations = true
	cr := d.do(cd).(*kmsg.ConsumerGroupDescribeResponse)
	for _, g := range cr.Groups {
		slices.SortFunc(g.Members, func(a, b kmsg.ConsumerGroupDescribeResponseGroupMember) int {
			return strings.Compare(a.MemberID, b.MemberID)
		})
		out["ConsumerGroupDescribe "+g.Group] = js(g)
	}

	for _, g := range append(slices.Clone(classic), consumer...) {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 7
		f.Group = g
		f.Topics = nil // all
		fr := d.do(f).(*kmsg.OffsetFetchResponse)
		fr.ThrottleMillis = 0
		out["OffsetFetch "+g] = js(fr)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	for _, g := range append(slices.Clone(classic), consumer...) {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		dc.Resources = append(dc.Resources, r)
	}
	dc.IncludeSynonyms = true
	dcr := d.do(dc).(*kmsg.DescribeConfigsResponse)
	dcr.ThrottleMillis = 0
	out["DescribeConfigs groups"] = js(dcr)

	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version = 3
	da.ResourceType, da.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	da.Operation, da.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dar := d.do(da).(*kmsg.DescribeACLsResponse)
	dar.ThrottleMillis = 0
	out["DescribeAcls"] = js(dar)

	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	dsr := d.do(ds).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	dsr.ThrottleMillis = 0
	slices.SortFunc(dsr.Results, func(a, b kmsg.DescribeUserSCRAMCredentialsResponseResult) int { return strings.Compare(a.User, b.User) })
	out["DescribeUserScramCredentials"] = js(dsr)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mr := d.do(md).(*kmsg.MetadataResponse)
	slices.SortFunc(mr.Topics, func(a, b kmsg.MetadataResponseTopic) int { return strings.Compare(*a.Topic, *b.Topic) })
	if d.cluster {
		for i := range mr.Topics { // partition leaders move with the nodes
			for j := range mr.Topics[i].Partitions {
				p := &mr.Topics[i].Partitions[j]
				p.Leader, p.Replicas, p.ISR = 0, nil, nil
			}
		}
	}
	out["Metadata topics"] = js(mr.Topics)
	out["metrics"] = d.metrics()
	return out
}

func diffSnapshots(before, after map[string]string) []string {
	var diffs []string
	for k, b := range before {
		if a := after[k]; a != b {
			diffs = append(diffs, fmt.Sprintf("%s:\n--- before\n%s\n--- after\n%s", k, b, a))
		}
	}
	slices.Sort(diffs)
	return diffs
}

// richState builds the state the restart tests compare: topics, a SCRAM
// user, ACLs, classic groups (Empty with offsets, one of them deleted by
// OffsetDelete; Stable with a static and a dynamic member), a simple
// group's offsets (one with explicit retention), consumer groups (a member
// revoking, a static member that left with epoch -2, a server assignor, a
// regex subscription, an Empty one with offsets), a mixed group, a classic
// group upgraded by a consumer-protocol member, deleted groups of both
// kinds and group configs. It returns the classic and consumer groups to
// describe and the classic member of the mixed group.
func richState(t *testing.T, ctx context.Context, d *diffNode) (classic, consumer []string, mixed *kmsg.JoinGroupResponse) {
	adm := kadm.NewClient(d.cl)
	for _, tp := range []string{"t", "u", "orders-1", "orders-2"} {
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	createUser(ctx, t, adm, "alice", "alice-secret-1")
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Groups("e").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternPrefixed)); err != nil {
		t.Fatal(err)
	}
	// Classic group "empty": offsets with metadata and leader epochs, then
	// its member leaves.
	jr := d.join("empty", "", "", "consumer")
	jr = d.join("empty", jr.MemberID, "", "consumer")
	d.sync("empty", jr, "", map[string]string{jr.MemberID: "a"})
	d.commit(8, "empty", jr.MemberID, jr.Generation, -1, off(0, 10, 3, "meta-0"), off(1, 11, -1, ""), off(2, 12, -1, "deleted"))
	d.leave("empty", jr.MemberID)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "empty"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 2}}}}
	if r := d.do(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	// Classic group "gone" and consumer group "cggone": deleted.
	jr = d.join("gone", "", "", "consumer")
	d.sync("gone", jr, "", map[string]string{jr.MemberID: "a"})
	d.commit(8, "gone", jr.MemberID, jr.Generation, -1, off(0, 1, -1, ""))
	d.leave("gone", jr.MemberID)
	cgone := d.cgh("cggone", "member-g-00000000000", 0, "", []string{"t"}, "", "", nil)
	d.commit(9, "cggone", *cgone.MemberID, cgone.MemberEpoch, -1, off(0, 2, -1, ""))
	d.cgh("cggone", *cgone.MemberID, -1, "", nil, "", "", nil)
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version = 2
	dg.Groups = []string{"gone", "cggone"}
	for _, r := range d.do(dg).(*kmsg.DeleteGroupsResponse).Groups {
		if r.ErrorCode != 0 {
			t.Fatalf("delete %s: %d", r.Group, r.ErrorCode)
		}
	}
	// Consumer group "cgempty": its member committed and left.
	ce := d.cgh("cgempty", "member-e-00000000000", 0, "", []string{"t", "u"}, "", "", nil)
	d.commit(9, "cgempty", *ce.MemberID, ce.MemberEpoch, -1, off(1, 5, 2, "cg-meta"))
	d.cgh("cgempty", *ce.MemberID, -1, "", nil, "", "", nil)
	d.advance(time.Minute)

	// Consumer group "cgstatic": a static member left for a while (epoch
	// -2) beside a dynamic one.
	st := d.cgh("cgstatic", "member-s-00000000000", 0, "is", []string{"u"}, "", "", nil)
	st = d.cgh("cgstatic", *st.MemberID, st.MemberEpoch, "is", nil, "", "", asOwned(st.Assignment))
	d.cgh("cgstatic", "member-t-00000000000", 0, "", []string{"u"}, "", "", nil)
	d.cgh("cgstatic", *st.MemberID, -2, "is", nil, "", "", nil)
	// Classic group "stable": a static and a dynamic member. The dynamic
	// one's join parks until the static one rejoins.
	s1 := d.join("stable", "", "s1", "consumer")
	d.sync("stable", s1, "s1", map[string]string{s1.MemberID: "all"})
	dch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Version = 5
		j.Group, j.MemberID, j.ProtocolType = "stable", "", "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 30000, 60000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta-dyn")}}
		cl2 := scramClient(t, d.addr, "admin", adminPassword)
		for {
			r, err := d.send(cl2, j)
			if err != nil {
				dch <- nil
				return
			}
			jr := r.(*kmsg.JoinGroupResponse)
			if jr.ErrorCode == group.ErrMemberIDRequired {
				j.MemberID = jr.MemberID
				continue
			}
			dch <- jr
			return
		}
	}()
	testwait.For(t, 10*time.Second, "the dynamic member's join parked", func() bool {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"stable"}
		return d.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].State == "PreparingRebalance"
	})
	s1 = d.join("stable", s1.MemberID, "s1", "consumer")
	dyn := <-dch
	if dyn == nil || dyn.ErrorCode != 0 {
		t.Fatalf("dynamic join: %+v", dyn)
	}
	d.sync("stable", s1, "s1", map[string]string{s1.MemberID: "s1-part", dyn.MemberID: "dyn-part"})
	d.sync("stable", dyn, "", nil)
	d.commit(8, "stable", dyn.MemberID, dyn.Generation, -1, off(0, 100, 5, "stable-meta"))

	// Simple group: offsets only, one with an explicit retention (v2).
	d.commit(2, "simple", "", -1, 3_600_000, off(2, 22, 0, "simple-meta"))
	d.commit(8, "simple", "", -1, -1, off(3, 33, 7, ""))

	// Consumer group "cg": a (static) gets every partition, then b joins:
	// a revokes half, which it has not acknowledged yet.
	a := d.cgh("cg", "member-a-00000000000", 0, "ia", []string{"t"}, "", "uniform", nil)
	owned := asOwned(a.Assignment)
	a = d.cgh("cg", *a.MemberID, a.MemberEpoch, "ia", nil, "", "", owned)
	b := d.cgh("cg", "member-b-00000000000", 0, "", []string{"t"}, "", "uniform", nil)
	d.cgh("cg", *a.MemberID, a.MemberEpoch, "ia", nil, "", "", owned)
	_ = b
	// Consumer group "cgre": a regex subscription.
	r := d.cgh("cgre", "member-r-00000000000", 0, "", nil, "orders-.*", "range", nil)
	_ = r
	// Mixed group "mix": a consumer-protocol member and a classic one.
	mm := d.cgh("mix", "member-m-00000000000", 0, "", []string{"u"}, "", "", nil)
	d.cgh("mix", *mm.MemberID, mm.MemberEpoch, "", nil, "", "", asOwned(mm.Assignment))
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version, sub.Topics = 3, []string{"u"}
	cj := kmsg.NewPtrJoinGroupRequest()
	cj.Version = 5
	cj.Group, cj.MemberID, cj.ProtocolType = "mix", "", "consumer"
	cj.SessionTimeoutMillis, cj.RebalanceTimeoutMillis = 20000, 60000
	cj.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: sub.AppendTo(nil)}}
	cjr := d.do(cj).(*kmsg.JoinGroupResponse)
	cj.MemberID = cjr.MemberID
	cjr = d.do(cj).(*kmsg.JoinGroupResponse)
	if cjr.ErrorCode != 0 {
		t.Fatalf("classic join of mix: %d", cjr.ErrorCode)
	}
	cs := kmsg.NewPtrSyncGroupRequest()
	cs.Version = 5
	cs.Group, cs.MemberID, cs.Generation = "mix", cjr.MemberID, cjr.Generation
	cs.ProtocolType, cs.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("cooperative-sticky")
	if r := d.do(cs).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("classic sync of mix: %d", r.ErrorCode)
	}
	// Group "up": a classic consumer group, upgraded by a consumer-protocol
	// member joining it.
	uj := kmsg.NewPtrJoinGroupRequest()
	uj.Version = 5
	uj.Group, uj.ProtocolType = "up", "consumer"
	uj.SessionTimeoutMillis, uj.RebalanceTimeoutMillis = 25000, 60000
	uj.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	ujr := d.do(uj).(*kmsg.JoinGroupResponse)
	uj.MemberID = ujr.MemberID
	if ujr = d.do(uj).(*kmsg.JoinGroupResponse); ujr.ErrorCode != 0 {
		t.Fatalf("join up: %d", ujr.ErrorCode)
	}
	ua := kmsg.NewConsumerMemberAssignment()
	ua.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "u", Partitions: []int32{0, 1, 2, 3}}}
	d.sync("up", ujr, "", map[string]string{ujr.MemberID: string(ua.AppendTo(nil))})
	d.commit(8, "up", ujr.MemberID, ujr.Generation, -1, off(3, 30, 1, "up-meta"))
	d.cgh("up", "member-u-00000000000", 0, "", []string{"u"}, "", "", nil)
	setGroupConfig(ctx, t, d.cl, "cg", "consumer.session.timeout.ms", "50000")
	setGroupConfig(ctx, t, d.cl, "empty", "consumer.heartbeat.interval.ms", "6000")

	return []string{"empty", "stable", "simple", "mix", "gone", "cggone", "up"},
		[]string{"cg", "cgre", "mix", "cgempty", "cggone", "gone", "cgstatic", "up"}, cjr
}

// checkSame fails t for every answer that differs between before and
// after.
func checkSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	for _, diff := range diffSnapshots(before, after) {
		t.Error(diff)
	}
}

// TestRestartAnswersTheSame builds a node with a rich state and restarts
// it on its disk store: every answer about that state is the same; the
// timers of what was loaded run from the load (sessions) or from when they
// started before it (retention).
func TestRestartAnswersTheSame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, clk := startDiffNode(t, ctx)
	classic, consumer, cjr := richState(t, ctx, d)
	before := d.snapshot(classic, consumer)
	d.restart()
	checkSame(t, before, d.snapshot(classic, consumer))
	// The classic member of mix carries on in its generation.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation = "mix", cjr.MemberID, cjr.Generation
	if r := d.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Errorf("mix's classic member's heartbeat after the restart: %d", r.ErrorCode)
	}

	// cgstatic's static member comes back under a new member id: it takes
	// the place of the one that left (epoch -2), with its partitions.
	partitions := func(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) string {
		if a == nil {
			return "none"
		}
		var ps []int32
		for _, tp := range a.Topics {
			ps = append(ps, tp.Partitions...)
		}
		slices.Sort(ps)
		return fmt.Sprint(ps)
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{"cgstatic"}
	var want string
	for _, m := range d.do(cd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].Members {
		if m.MemberID == "member-s-00000000000" {
			var ps []int32
			for _, tp := range m.TargetAssignment.TopicPartitions {
				ps = append(ps, tp.Partitions...)
			}
			slices.Sort(ps)
			want = fmt.Sprint(ps)
		}
	}
	back := d.cgh("cgstatic", "member-s2-0000000000", 0, "is", []string{"u"}, "", "", nil)
	if got := partitions(back.Assignment); got != want {
		t.Errorf("cgstatic's static member back after the restart: partitions %s, want %s", got, want)
	}
	if ms := d.do(cd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].Members; len(ms) != 2 {
		t.Errorf("cgstatic after the static member came back: %d members, want 2", len(ms))
	}

	// The timers after the load: cg's members get the group's session
	// timeout (50 s) from the load, not the node's (45 s).
	members := func(g string) int {
		cd := kmsg.NewPtrConsumerGroupDescribeRequest()
		cd.Groups = []string{g}
		return len(d.do(cd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].Members)
	}
	clk.Advance(46 * time.Second)
	if n := members("cg"); n != 2 {
		t.Fatalf("cg has %d members 46 s after the load, want 2 (session 50 s)", n)
	}
	clk.Advance(5 * time.Second)
	testwait.For(t, 10*time.Second, "cg's silent members expired", func() bool { return members("cg") == 0 })

	// Retention: "empty" emptied at t0; its offsets go 7 days after that,
	// not 7 days after a load. simple's p2 had 1 h of explicit retention.
	offsets := func(g string) []int32 {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 7
		f.Group = g
		var ps []int32
		for _, tp := range d.do(f).(*kmsg.OffsetFetchResponse).Topics {
			for _, p := range tp.Partitions {
				ps = append(ps, p.Partition)
			}
		}
		slices.Sort(ps)
		return ps
	}
	clk.Advance(2 * time.Hour)
	testwait.For(t, 10*time.Second, "simple's p2 expired", func() bool { return fmt.Sprint(offsets("simple")) == "[3]" })
	t0 := time.UnixMilli(1_700_000_000_000)
	clk.Advance(t0.Add(7*24*time.Hour - 15*time.Minute).Sub(clk.Now()))
	d.restart()
	if got := fmt.Sprint(offsets("empty")); got != "[0 1]" {
		t.Fatalf("empty's offsets 15 min before retention: %s", got)
	}
	clk.Advance(30 * time.Minute)
	testwait.For(t, 10*time.Second, "empty's offsets expired", func() bool { return len(offsets("empty")) == 0 })
}

// TestCrashAnswersTheSame: TestRestartAnswersTheSame's comparison with a
// `cohort serve` child process killed with SIGKILL.
func TestCrashAnswersTheSame(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := startDiffChild(t, ctx)
	classic, consumer, _ := richState(t, ctx, d)
	before := d.snapshot(classic, consumer)
	d.restart()
	checkSame(t, before, d.snapshot(classic, consumer))
}

// startDiffCluster runs two secure cluster-mode nodes on one etcd with one
// coordinator partition, each through its own cuttable proxy; restart takes
// down the node that holds it (take gets the nodes, their proxies, a
// function that ends node i's lease (expireLease) and the holder's index),
// and the other loads it from etcd.
func startDiffCluster(t *testing.T, ctx context.Context, take func(ns []*Node, pxs []*cutproxy.Proxy, expire func(i int), holder int)) *diffNode {
	ec := etcdtest.Start(t, 1)
	ns := make([]*Node, 2)
	pxs := make([]*cutproxy.Proxy, 2)
	clks := []*leaseClock{{}, {}}
	var addrs []string
	for i := range ns {
		pxs[i] = cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
		cfg := secureConfig(t, nil)
		cfg.NodeID = int32(i + 1)
		cfg.Partitions = 1
		cfg.Group.ConsumerAssignmentInterval = 0
		cfg.Cluster = &ClusterConfig{Endpoints: []string{"http://" + pxs[i].Addr()}, Prefix: "/diff/", LeaseTTL: testLeaseTTL, clock: clks[i]}
		n, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		ns[i] = n
		addrs = append(addrs, n.Addr())
	}
	waitClusterSettled(t, 20*time.Second, ns...)
	holder := int(ns[1].Cluster().Owner(0)) - 1
	d := &diffNode{t: t, ctx: ctx, addr: ns[holder].Addr(), cluster: true, advance: func(time.Duration) {},
		metrics: func() string { return "" }}
	d.restart = func() {
		t.Helper()
		take(ns, pxs, func(i int) { expireLease(t, ec, "/diff/", ns[i].cfg.NodeID, clks[i], testLeaseTTL, ns[i]) }, holder)
		other := ns[1-holder]
		testwait.For(t, 20*time.Second, "the partition with the other node", func() bool {
			return other.Cluster().Owner(0) == other.cfg.NodeID
		})
		waitClusterSettled(t, 20*time.Second, other)
		if err := other.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d.cl = scramClient(t, addrs[0], "admin", adminPassword, kgo.SeedBrokers(addrs...), kgo.RequestRetries(20),
		kgo.RetryTimeout(10*time.Second), kgo.DialTimeout(time.Second))
	return d
}

// TestFailoverAnswersTheSame: TestRestartAnswersTheSame's comparison in
// cluster mode, where the coordinator partition moves to the other node
// as its holder stops.
func TestFailoverAnswersTheSame(t *testing.T) {
	failoverAnswersTheSame(t, func(ns []*Node, _ []*cutproxy.Proxy, _ func(int), holder int) {
		if err := ns[holder].Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeaseLossAnswersTheSame: TestFailoverAnswersTheSame where the holder
// loses etcd (its lease expires while its process runs on, as at a crash
// or a partition of the network) instead of stopping. The lease runs out
// when the test says (expireLease), not after a wall-clock TTL.
func TestLeaseLossAnswersTheSame(t *testing.T) {
	failoverAnswersTheSame(t, func(_ []*Node, pxs []*cutproxy.Proxy, expire func(int), holder int) {
		pxs[holder].Cut()
		expire(holder)
	})
}

// failoverAnswersTheSame builds the rich state on a two-node cluster, has
// stop end the partition holder's service, and compares the answers of the
// node that takes the partition over with those from before.
func failoverAnswersTheSame(t *testing.T, stop func(ns []*Node, pxs []*cutproxy.Proxy, expire func(int), holder int)) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := startDiffCluster(t, ctx, stop)
	classic, consumer, _ := richState(t, ctx, d)
	before := d.snapshot(classic, consumer)
	d.restart()
	checkSame(t, before, d.snapshot(classic, consumer))
}

// TestRestartMidRebalance: a classic group whose rebalance was under way
// (every member joined generation 2, no SyncGroup yet) comes back as its
// store has it, as Kafka's coordinator loads it: Stable in generation 1,
// with generation 1's members and assignments. Generation 2 is gone: its
// members' heartbeats in it are refused (ILLEGAL_GENERATION), the member
// that only joined in it is unknown, and generation 1's member carries on.
func TestRestartMidRebalance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, _ := startDiffNode(t, ctx)
	a := d.join("rb", "", "", "consumer")
	d.sync("rb", a, "", map[string]string{a.MemberID: "gen1-a"})
	bch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Version = 5
		j.Group, j.ProtocolType = "rb", "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 30000, 60000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta-b")}}
		cl2 := scramClient(t, d.addr, "admin", adminPassword)
		for {
			r, err := d.send(cl2, j)
			if err != nil {
				bch <- nil
				return
			}
			if jr := r.(*kmsg.JoinGroupResponse); jr.ErrorCode == group.ErrMemberIDRequired {
				j.MemberID = jr.MemberID
				continue
			}
			bch <- r.(*kmsg.JoinGroupResponse)
			return
		}
	}()
	describe := func() kmsg.DescribeGroupsResponseGroup {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = 5
		dg.Groups = []string{"rb"}
		return d.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]
	}
	testwait.For(t, 10*time.Second, "b's join parked", func() bool { return describe().State == "PreparingRebalance" })
	a2 := d.join("rb", a.MemberID, "", "consumer")
	b := <-bch
	if b == nil || b.ErrorCode != 0 || a2.Generation != 2 || b.Generation != 2 {
		t.Fatalf("setup: %+v %+v", a2, b)
	}
	if st := describe().State; st != "CompletingRebalance" {
		t.Fatalf("before the restart: %s", st)
	}
	d.restart()
	g := describe()
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != a.MemberID || string(g.Members[0].MemberAssignment) != "gen1-a" {
		t.Fatalf("after the restart: %+v", g)
	}
	hb := func(member string, gen int32) int16 {
		h := kmsg.NewPtrHeartbeatRequest()
		h.Version = 3
		h.Group, h.MemberID, h.Generation = "rb", member, gen
		return d.do(h).(*kmsg.HeartbeatResponse).ErrorCode
	}
	if code := hb(a.MemberID, 2); code != group.ErrIllegalGeneration {
		t.Errorf("a's heartbeat in generation 2: %d, want ILLEGAL_GENERATION", code)
	}
	if code := hb(b.MemberID, 2); code != group.ErrUnknownMemberID {
		t.Errorf("b's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
	if code := hb(a.MemberID, 1); code != 0 {
		t.Errorf("a's heartbeat in generation 1: %d", code)
	}
}
