package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/store/memstore"
)

// Principals of the authorization tests: admin is a super user and sets
// things up; alice is the principal under test, connected from aliceHost.
const (
	admin     = "User:admin"
	alice     = "User:alice"
	aliceHost = "127.0.0.1"
)

// aclAuthorizer is the server's Authorizer over security/acl's, with
// bindings a test replaces.
type aclAuthorizer struct {
	a   acl.Authorizer
	set atomic.Pointer[acl.Set]
}

func (z *aclAuthorizer) Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.a.Authorize(z.set.Load(), principal, host, op, rt, name)
}

func (z *aclAuthorizer) AuthorizedOperations(principal, host string, rt acl.ResourceType, name string) int32 {
	return z.a.AuthorizedOperations(z.set.Load(), principal, host, rt, name)
}

// recordingGroups serves the group APIs with a real coordinator and keeps
// every request that reached it.
type recordingGroups struct {
	c    *coordinator.Coordinator
	mu   sync.Mutex
	reqs []kmsg.Request
}

func (g *recordingGroups) Handle(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	return g.c.Handle(ctx, group.Client{ID: c.ID, Host: c.Host, Principal: c.Principal}, req)
}

// HandleListGroups makes recordingGroups a GroupsListing: the coordinator's
// partitions check each group with describes as they list them.
func (g *recordingGroups) HandleListGroups(ctx context.Context, c Client, req *kmsg.ListGroupsRequest, describes func(string) bool) (kmsg.Response, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	return g.c.Handle(ctx, group.Client{ID: c.ID, Host: c.Host, Principal: c.Principal, Describes: describes}, req)
}

// handleOnly is a Groups that is not a GroupsListing.
type handleOnly struct{ Groups }

func (g *recordingGroups) reset() {
	g.mu.Lock()
	g.reqs = nil
	g.mu.Unlock()
}

// mentions reports whether a request that reached the coordinator names
// name (as a string field).
func (g *recordingGroups) mentions(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.reqs {
		if strings.Contains(fmt.Sprintf("%#v", r), strconv.Quote(name)) {
			return true
		}
	}
	return false
}

func (g *recordingGroups) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reqs)
}

// authzEnv is a server (not listening) with an ACL authorizer and a real
// coordinator on an in-memory store.
type authzEnv struct {
	t      testing.TB
	srv    *Server
	authz  *aclAuthorizer
	groups *recordingGroups
	cat    *catalog.Catalog
	clk    *clock.Fake // the coordinator's
}

func newAuthzEnv(t testing.TB, opts ...serverOpt) *authzEnv {
	t.Helper()
	cat := catalog.New(catalog.Options{})
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.Topics = cat // consumer groups are assigned the server's topics, as cohort serve wires it
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	co, err := coordinator.New(coordinator.Config{
		Partitions: 4, Group: gcfg, Store: memstore.New(),
		Clock: clk, Logger: discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	co.Start()
	t.Cleanup(func() { co.Close() })
	if err := co.WaitLoaded(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	e := &authzEnv{
		t:      t,
		authz:  &aclAuthorizer{a: acl.Authorizer{SuperUsers: []string{admin}}},
		groups: &recordingGroups{c: co},
		cat:    cat,
		clk:    clk,
	}
	cfg := Config{
		Listen:   "127.0.0.1:0",
		Groups:   e.groups,
		Topology: SingleNode(Broker{NodeID: 1, Host: "127.0.0.1", Port: 9092}, "authz-cluster"),
		Catalog:  e.cat,
		Logger:   discard(),
		Security: &Security{Authorizer: e.authz},
	}
	for _, o := range opts {
		o(&cfg)
	}
	e.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.Close() })
	return e
}

// grant replaces every binding with bs.
func (e *authzEnv) grant(bs ...acl.Binding) { e.authz.set.Store(acl.NewSet(bs)) }

// as sends req from principal through the server's authorization and
// returns the response as a client decodes it (encoded at the request's
// version and read back), failing on an error.
func (e *authzEnv) as(principal string, req kmsg.Request) kmsg.Response {
	e.t.Helper()
	r := &request{key: req.Key(), version: req.GetVersion(), req: req}
	resp, err := e.srv.handle(testCtx(e.t), Client{ID: "cli", Host: aliceHost, Principal: principal}, r)
	if err != nil {
		e.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if resp.Key() != req.Key() || resp.GetVersion() != req.GetVersion() {
		e.t.Fatalf("%s v%d answered with key %d v%d", kmsg.NameForKey(req.Key()), req.GetVersion(), resp.Key(), resp.GetVersion())
	}
	decoded := req.ResponseKind()
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		e.t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return decoded
}

func binding(p string, perm acl.Permission, op acl.Operation, rt acl.ResourceType, pt acl.PatternType, name string) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: p, Host: "*", Operation: op, Permission: perm}
}

func allow(p string, op acl.Operation, rt acl.ResourceType, name string) acl.Binding {
	return binding(p, acl.PermissionAllow, op, rt, acl.PatternLiteral, name)
}

// need is one permission a request needs and the code its absence gives.
type need struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string
	code int16
}

func (n need) String() string { return fmt.Sprintf("%v %v %s", n.rt, n.op, n.name) }

func (n need) with(f func(*acl.Binding)) acl.Binding {
	b := allow(alice, n.op, n.rt, n.name)
	f(&b)
	return b
}

// grants are the ways to give alice n: each must be enough.
func (n need) grants() map[string]acl.Binding {
	g := map[string]acl.Binding{
		"literal":          n.with(func(*acl.Binding) {}),
		"prefixed":         n.with(func(b *acl.Binding) { b.PatternType, b.ResourceName = acl.PatternPrefixed, n.name[:len(n.name)-2] }),
		"wildcard name":    n.with(func(b *acl.Binding) { b.ResourceName = acl.Wildcard }),
		"any principal":    n.with(func(b *acl.Binding) { b.Principal = acl.WildcardPrincipal }),
		"operation ALL":    n.with(func(b *acl.Binding) { b.Operation = acl.OpAll }),
		"alice's host":     n.with(func(b *acl.Binding) { b.Host = aliceHost }),
		"full prefix name": n.with(func(b *acl.Binding) { b.PatternType = acl.PatternPrefixed }),
	}
	if n.op == acl.OpDescribe && n.rt != acl.ResourceCluster {
		g["implied by READ"] = n.with(func(b *acl.Binding) { b.Operation = acl.OpRead })
	}
	return g
}

// nearMisses are bindings that look like n but do not give it.
func (n need) nearMisses() map[string]acl.Binding {
	other := acl.OpDescribe
	if n.op == acl.OpDescribe {
		other = acl.OpCreate
	}
	otherType := acl.ResourceTopic
	if n.rt == acl.ResourceTopic {
		otherType = acl.ResourceGroup
	}
	return map[string]acl.Binding{
		"other operation": n.with(func(b *acl.Binding) { b.Operation = other }),
		"other name":      n.with(func(b *acl.Binding) { b.ResourceName = n.name + "x" }),
		"longer prefix":   n.with(func(b *acl.Binding) { b.PatternType, b.ResourceName = acl.PatternPrefixed, n.name+"x" }),
		"other principal": n.with(func(b *acl.Binding) { b.Principal = "User:bob" }),
		"other host":      n.with(func(b *acl.Binding) { b.Host = "127.0.0.2" }),
		"other type":      n.with(func(b *acl.Binding) { b.ResourceType = otherType }),
	}
}

// denials are DENY bindings that take n away whatever else allows it.
func (n need) denials() map[string]acl.Binding {
	deny := func(f func(*acl.Binding)) acl.Binding {
		return n.with(func(b *acl.Binding) { b.Permission = acl.PermissionDeny; f(b) })
	}
	return map[string]acl.Binding{
		"deny literal":       deny(func(*acl.Binding) {}),
		"deny prefixed":      deny(func(b *acl.Binding) { b.PatternType, b.ResourceName = acl.PatternPrefixed, n.name[:1] }),
		"deny wildcard":      deny(func(b *acl.Binding) { b.ResourceName = acl.Wildcard }),
		"deny ALL":           deny(func(b *acl.Binding) { b.Operation = acl.OpAll }),
		"deny any principal": deny(func(b *acl.Binding) { b.Principal = acl.WildcardPrincipal }),
		"deny alice's host":  deny(func(b *acl.Binding) { b.Host = aliceHost }),
	}
}

// matrix is one request's authorization matrix.
type matrix struct {
	needs []need       // in the order the server checks them
	setup func()       // before every run (as admin); may be nil
	run   func() int16 // sends the request as alice: the code that tells
	ok    int16        // the code when every need is granted
	// coordinator: the request goes to the group coordinator, which must
	// never see a refused group or topic.
	coordinator bool
}

// check runs m: missing exactly one need gives that need's code (also
// with near-miss bindings, and with a DENY over a full grant); every way
// of granting all needs gives m.ok.
func (e *authzEnv) check(t *testing.T, m matrix) {
	t.Helper()
	try := func(label string, want int16, refused *need, bs ...acl.Binding) {
		t.Helper()
		e.grant(bs...)
		if m.setup != nil {
			m.setup()
		}
		e.groups.reset()
		if got := m.run(); got != want {
			t.Errorf("%s: code %d, want %d", label, got, want)
		}
		if refused != nil && m.coordinator && refused.rt != acl.ResourceCluster && e.groups.mentions(refused.name) {
			t.Errorf("%s: the coordinator saw the refused %s", label, refused)
		}
	}
	grants := func(except int) []acl.Binding {
		var bs []acl.Binding
		for i, n := range m.needs {
			if i != except {
				bs = append(bs, n.with(func(*acl.Binding) {}))
			}
		}
		return bs
	}
	try("nothing granted", m.needs[0].code, &m.needs[0])
	for i, n := range m.needs {
		n := n
		try("without "+n.String(), n.code, &n, grants(i)...)
		for label, b := range n.nearMisses() {
			try(n.String()+", "+label, n.code, &n, append(grants(i), b)...)
		}
		for label, b := range n.denials() {
			try(n.String()+", "+label, n.code, &n, append(grants(-1), b)...)
		}
	}
	try("all granted", m.ok, nil, grants(-1)...)
	for i, n := range m.needs {
		for label, b := range n.grants() {
			try(n.String()+" granted "+label, m.ok, nil, append(grants(i), b)...)
		}
		elsewhere := n.with(func(b *acl.Binding) { b.Permission, b.Host = acl.PermissionDeny, "127.0.0.2" })
		try(n.String()+" denied on another host", m.ok, nil, append(grants(-1), elsewhere)...)
	}
}

// firstError returns the first non-zero code, or 0.
func firstError(codes ...int16) int16 {
	for _, c := range codes {
		if c != errNone {
			return c
		}
	}
	return errNone
}

// commit commits offset o of topic/partition 0 in group g, as admin, with
// a simple (memberless) commit.
func (e *authzEnv) commit(g, topic string, o int64) {
	e.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, g, -1
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, o
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, TopicID: testTopicID(topic), Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	resp := e.as(admin, req).(*kmsg.OffsetCommitResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != errNone {
		e.t.Fatalf("admin commit %s/%s: %d", g, topic, c)
	}
}

func (e *authzEnv) ensureTopic(name string, partitions int32) {
	e.t.Helper()
	if _, ok := e.cat.Lookup(name); ok {
		return
	}
	if _, err := e.cat.Create(name, partitions, nil); err != nil {
		e.t.Fatal(err)
	}
}

func versions(api int16) []int16 {
	a := lookupAPI(api)
	var vs []int16
	for v := a.Min; v <= a.Max; v++ {
		vs = append(vs, v)
	}
	return vs
}

func groupNeed(op acl.Operation, name string) need {
	return need{op, acl.ResourceGroup, name, codeGroupAuthz}
}

func topicNeed(op acl.Operation, name string) need {
	return need{op, acl.ResourceTopic, name, codeTopicAuthz}
}

func TestAuthzMatrixGroupMembership(t *testing.T) {
	e := newAuthzEnv(t)
	for _, v := range versions(keyJoinGroup) {
		t.Run(fmt.Sprintf("JoinGroup v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-join")},
				run: func() int16 {
					req := joinRequest("g-join", v)
					req.MemberID = "nobody" // no state change when allowed
					return e.as(alice, req).(*kmsg.JoinGroupResponse).ErrorCode
				},
				ok:          group.ErrUnknownMemberID,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keySyncGroup) {
		t.Run(fmt.Sprintf("SyncGroup v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-sync")},
				run: func() int16 {
					req := kmsg.NewPtrSyncGroupRequest()
					req.Version, req.Group, req.MemberID, req.Generation = v, "g-sync", "nobody", 1
					req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
					return e.as(alice, req).(*kmsg.SyncGroupResponse).ErrorCode
				},
				ok:          group.ErrUnknownMemberID,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keyHeartbeat) {
		t.Run(fmt.Sprintf("Heartbeat v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-heartbeat")},
				run: func() int16 {
					req := kmsg.NewPtrHeartbeatRequest()
					req.Version, req.Group, req.MemberID, req.Generation = v, "g-heartbeat", "nobody", 1
					return e.as(alice, req).(*kmsg.HeartbeatResponse).ErrorCode
				},
				ok:          group.ErrUnknownMemberID,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keyLeaveGroup) {
		t.Run(fmt.Sprintf("LeaveGroup v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-leave")},
				run: func() int16 {
					req := kmsg.NewPtrLeaveGroupRequest()
					req.Version, req.Group, req.MemberID = v, "g-leave", "nobody"
					if v >= 3 {
						m := kmsg.NewLeaveGroupRequestMember()
						m.MemberID = "nobody"
						req.Members = []kmsg.LeaveGroupRequestMember{m}
					}
					resp := e.as(alice, req).(*kmsg.LeaveGroupResponse)
					codes := []int16{resp.ErrorCode}
					for _, m := range resp.Members {
						codes = append(codes, m.ErrorCode)
					}
					return firstError(codes...)
				},
				ok:          group.ErrUnknownMemberID,
				coordinator: true,
			})
		})
	}
}

func joinRequest(g string, v int16) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group = v, g
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	return req
}

func TestAuthzMatrixOffsets(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("t-commit", 1) // v10 names topics by catalog ID
	e.ensureTopic("t-fetch", 1)
	// v10 names topics by ID, and a topic asked for by ID that alice may
	// not describe is answered as an unknown ID: the code of a missing
	// topic grant depends on which grant is missing, which this matrix
	// cannot say (TestOffsetCommitByTopicID, TestOffsetFetchByTopicID).
	byName := func(vs []int16) []int16 { return slices.DeleteFunc(vs, func(v int16) bool { return v >= 10 }) }
	for _, v := range byName(versions(keyOffsetCommit)) {
		t.Run(fmt.Sprintf("OffsetCommit v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-commit"), topicNeed(acl.OpRead, "t-commit")},
				run: func() int16 {
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Version, req.Group, req.Generation = v, "g-commit", -1
					p := kmsg.NewOffsetCommitRequestTopicPartition()
					p.Partition, p.Offset = 0, 10
					req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t-commit", TopicID: testTopicID("t-commit"), Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
					resp := e.as(alice, req).(*kmsg.OffsetCommitResponse)
					if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
						t.Fatalf("answer %+v", resp.Topics)
					}
					return resp.Topics[0].Partitions[0].ErrorCode
				},
				ok:          errNone,
				coordinator: true,
			})
		})
	}
	e.commit("g-fetch", "t-fetch", 5)
	for _, v := range byName(versions(keyOffsetFetch)) {
		t.Run(fmt.Sprintf("OffsetFetch v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpDescribe, "g-fetch"), topicNeed(acl.OpDescribe, "t-fetch")},
				run: func() int16 {
					resp := e.as(alice, offsetFetch(v, "g-fetch", []string{"t-fetch"})).(*kmsg.OffsetFetchResponse)
					code, offsets := fetchOutcome(resp)
					if code != errNone && len(offsets) > 0 {
						t.Errorf("v%d: error %d with offsets %v", v, code, offsets)
					}
					if code == errNone && offsets["t-fetch"] != 5 {
						t.Errorf("v%d: offsets %v, want t-fetch at 5", v, offsets)
					}
					return code
				},
				ok:          errNone,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keyOffsetDelete) {
		t.Run(fmt.Sprintf("OffsetDelete v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpDelete, "g-odel"), topicNeed(acl.OpRead, "t-odel")},
				setup: func() { e.commit("g-odel", "t-odel", 3) },
				run: func() int16 {
					req := kmsg.NewPtrOffsetDeleteRequest()
					req.Version, req.Group = v, "g-odel"
					req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t-odel", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
					resp := e.as(alice, req).(*kmsg.OffsetDeleteResponse)
					codes := []int16{resp.ErrorCode}
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							codes = append(codes, p.ErrorCode)
						}
					}
					return firstError(codes...)
				},
				ok:          errNone,
				coordinator: true,
			})
		})
	}
}

// offsetFetch asks group g for partition 0 of each topic (all topics when
// topics is nil), in v's shape.
func offsetFetch(v int16, g string, topics []string) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = v
	if v >= 8 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		if topics != nil {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		}
		for _, t := range topics {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t, TopicID: testTopicID(t), Partitions: []int32{0}})
		}
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		return req
	}
	req.Group = g
	if topics != nil {
		req.Topics = []kmsg.OffsetFetchRequestTopic{}
	}
	for _, t := range topics {
		req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: t, Partitions: []int32{0}})
	}
	return req
}

// fetchOutcome returns the first error of an OffsetFetch answer about one
// group (top level, group, then partitions) and every committed offset it
// reveals (offset >= 0), by topic.
func fetchOutcome(resp *kmsg.OffsetFetchResponse) (int16, map[string]int64) {
	offsets := map[string]int64{}
	codes := []int16{}
	if resp.Version >= 2 && resp.Version < 8 {
		codes = append(codes, resp.ErrorCode)
	}
	for _, g := range resp.Groups {
		codes = append(codes, g.ErrorCode)
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
				if p.Offset >= 0 {
					offsets[topicOf(t.Topic, t.TopicID)] = p.Offset
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
			if p.Offset >= 0 {
				offsets[t.Topic] = p.Offset
			}
		}
	}
	return firstError(codes...), offsets
}

func TestAuthzMatrixGroupAdmin(t *testing.T) {
	e := newAuthzEnv(t)
	e.commit("g-describe", "t-describe", 1)
	for _, v := range versions(keyDescribeGroups) {
		t.Run(fmt.Sprintf("DescribeGroups v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpDescribe, "g-describe")},
				run: func() int16 {
					req := kmsg.NewPtrDescribeGroupsRequest()
					req.Version, req.Groups = v, []string{"g-describe"}
					resp := e.as(alice, req).(*kmsg.DescribeGroupsResponse)
					if len(resp.Groups) != 1 || resp.Groups[0].Group != "g-describe" {
						t.Fatalf("groups %+v", resp.Groups)
					}
					return resp.Groups[0].ErrorCode
				},
				ok:          errNone,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keyDeleteGroups) {
		t.Run(fmt.Sprintf("DeleteGroups v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpDelete, "g-delete")},
				setup: func() { e.commit("g-delete", "t-delete", 1) },
				run: func() int16 {
					req := kmsg.NewPtrDeleteGroupsRequest()
					req.Version, req.Groups = v, []string{"g-delete"}
					resp := e.as(alice, req).(*kmsg.DeleteGroupsResponse)
					if len(resp.Groups) != 1 || resp.Groups[0].Group != "g-delete" {
						t.Fatalf("groups %+v", resp.Groups)
					}
					return resp.Groups[0].ErrorCode
				},
				ok:          errNone,
				coordinator: true,
			})
		})
	}
	for _, v := range versions(keyFindCoordinator) {
		t.Run(fmt.Sprintf("FindCoordinator v%d", v), func(t *testing.T) {
			find := func(typ int8, key string) int16 {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version, req.CoordinatorType, req.CoordinatorKey = v, typ, key
				if v >= 4 {
					req.CoordinatorKeys = []string{key}
				}
				resp := e.as(alice, req).(*kmsg.FindCoordinatorResponse)
				if v < 4 {
					if (resp.ErrorCode != errNone) != (resp.NodeID == -1 && resp.Host == "" && resp.Port == -1) {
						t.Errorf("v%d: code %d with node %d %s:%d", v, resp.ErrorCode, resp.NodeID, resp.Host, resp.Port)
					}
					return resp.ErrorCode
				}
				rc := resp.Coordinators[0]
				if (rc.ErrorCode != errNone) != (rc.NodeID == -1 && rc.Host == "" && rc.Port == -1) || rc.Key != key {
					t.Errorf("v%d: %+v", v, rc)
				}
				return rc.ErrorCode
			}
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpDescribe, "g-find")},
				run:   func() int16 { return find(coordinatorGroup, "g-find") },
				ok:    errNone,
			})
			if v >= 1 { // transaction coordinators from v1
				e.check(t, matrix{
					needs: []need{{acl.OpDescribe, acl.ResourceTransactionalID, "tx-find", codeTxnIDAuthz}},
					run:   func() int16 { return find(coordinatorTransaction, "tx-find") },
					ok:    errInvalidRequest, // cohort has no transaction coordinator
				})
			}
		})
	}
}

func TestAuthzMatrixTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("t-meta", 2)
	for _, v := range versions(keyMetadata) {
		t.Run(fmt.Sprintf("Metadata v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpDescribe, "t-meta")},
				run: func() int16 {
					req := kmsg.NewPtrMetadataRequest()
					req.Version = v
					req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t-meta")}}
					resp := e.as(alice, req).(*kmsg.MetadataResponse)
					if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "t-meta" {
						t.Fatalf("topics %+v", resp.Topics)
					}
					mt := resp.Topics[0]
					if mt.ErrorCode == codeTopicAuthz && (len(mt.Partitions) != 0 || mt.TopicID != [16]byte{}) {
						t.Errorf("v%d: refused topic reveals %d partitions, id %x", v, len(mt.Partitions), mt.TopicID)
					}
					if mt.ErrorCode == errNone && len(mt.Partitions) != 2 {
						t.Errorf("v%d: %d partitions", v, len(mt.Partitions))
					}
					return mt.ErrorCode
				},
				ok: errNone,
			})
		})
	}
	for _, v := range versions(keyCreateTopics) {
		t.Run(fmt.Sprintf("CreateTopics v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpCreate, "t-create")},
				setup: func() { e.cat.Delete("t-create") },
				run: func() int16 {
					req := createReq(false, newTopic("t-create", 3))
					req.Version = v
					resp := e.as(alice, req).(*kmsg.CreateTopicsResponse)
					_, exists := e.cat.Lookup("t-create")
					if code := resp.Topics[0].ErrorCode; exists != (code == errNone) {
						t.Errorf("v%d: code %d, topic exists: %v", v, code, exists)
					}
					return resp.Topics[0].ErrorCode
				},
				ok: errNone,
			})
		})
	}
	for _, v := range versions(keyDeleteTopics) {
		t.Run(fmt.Sprintf("DeleteTopics v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpDelete, "t-delete")},
				setup: func() { e.ensureTopic("t-delete", 1) },
				run: func() int16 {
					req := deleteTopicsReq(v, "t-delete")
					resp := e.as(alice, req).(*kmsg.DeleteTopicsResponse)
					_, exists := e.cat.Lookup("t-delete")
					if code := resp.Topics[0].ErrorCode; exists == (code == errNone) {
						t.Errorf("v%d: code %d, topic still exists: %v", v, code, exists)
					}
					return resp.Topics[0].ErrorCode
				},
				ok: errNone,
			})
		})
	}
	e.ensureTopic("t-parts", 1)
	for _, v := range versions(keyCreatePartitions) {
		t.Run(fmt.Sprintf("CreatePartitions v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpAlter, "t-parts")},
				run: func() int16 {
					req := kmsg.NewPtrCreatePartitionsRequest()
					req.Version, req.ValidateOnly = v, true
					rt := kmsg.NewCreatePartitionsRequestTopic()
					rt.Topic, rt.Count = "t-parts", 2
					req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
					return e.as(alice, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
				},
				ok: errNone,
			})
		})
	}
}

// deleteTopicsReq names topics by name in v's shape.
func deleteTopicsReq(v int16, names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = v
	for _, n := range names {
		if v >= 6 {
			req.Topics = append(req.Topics, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr(n)})
		} else {
			req.TopicNames = append(req.TopicNames, n)
		}
	}
	return req
}

// commitReq commits offset 7 of the partitions of each topic ("name:p,p").
func commitReq(v int16, g string, topics ...string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = v, g, -1
	for _, spec := range topics {
		name, parts, _ := strings.Cut(spec, ":")
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = name, testTopicID(name)
		for _, p := range strings.Split(parts, ",") {
			n, _ := strconv.Atoi(p)
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(n), 7
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// testTopicNames maps the catalog IDs of the names the tests' request
// builders used back to the names (topicOf).
var testTopicNames sync.Map

// testTopicID is catalog.TopicID(name), remembered for topicOf.
func testTopicID(name string) [16]byte {
	id := catalog.TopicID(name)
	testTopicNames.Store(id, name)
	return id
}

// topicOf names a topic of an answer: its name below v10, from v10 (where
// only the ID is sent) the name a request builder gave that ID, "?" for an
// ID none gave.
func topicOf(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if n, ok := testTopicNames.Load(id); ok {
		return n.(string)
	}
	return "?"
}

func commitCodes(resp *kmsg.OffsetCommitResponse) string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%d", topicOf(t.Topic, t.TopicID), p.Partition, p.ErrorCode))
		}
	}
	return strings.Join(out, " ")
}

// committed returns group g's committed offsets as admin sees them.
func (e *authzEnv) committed(g string) map[string]int64 {
	e.t.Helper()
	_, offsets := fetchOutcome(e.as(admin, offsetFetch(9, g, nil)).(*kmsg.OffsetFetchResponse))
	return offsets
}

func TestAuthzOffsetCommitPartialTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.grant(
		allow(alice, acl.OpRead, acl.ResourceGroup, "g"),
		allow(alice, acl.OpRead, acl.ResourceTopic, "ok-1"),
		binding(alice, acl.PermissionAllow, acl.OpRead, acl.ResourceTopic, acl.PatternPrefixed, "ok-"),
		binding(alice, acl.PermissionDeny, acl.OpRead, acl.ResourceTopic, acl.PatternLiteral, "ok-denied"),
	)
	resp := e.as(alice, commitReq(9, "g", "no-1:0,1", "ok-1:0,1", "ok-denied:0", "ok-2:3", "no-2:0")).(*kmsg.OffsetCommitResponse)
	want := "no-1/0=29 no-1/1=29 ok-1/0=0 ok-1/1=0 ok-denied/0=29 ok-2/3=0 no-2/0=29"
	if got := commitCodes(resp); got != want {
		t.Fatalf("codes %s\nwant  %s", got, want)
	}
	for _, name := range []string{"no-1", "no-2", "ok-denied"} {
		if e.groups.mentions(name) {
			t.Errorf("the coordinator saw %s", name)
		}
	}
	if got := e.committed("g"); len(got) != 2 || got["ok-1"] != 7 || got["ok-2"] != 7 {
		t.Errorf("committed %v, want ok-1 and ok-2 only", got)
	}

	// No topic left: the coordinator is not asked at all.
	e.groups.reset()
	resp = e.as(alice, commitReq(9, "g", "no-1:0", "no-2:0")).(*kmsg.OffsetCommitResponse)
	if got := commitCodes(resp); got != "no-1/0=29 no-2/0=29" || e.groups.count() != 0 {
		t.Errorf("all refused: %s, coordinator asked %d times", got, e.groups.count())
	}

	// Without the group, nothing is committed and every partition says so.
	e.groups.reset()
	resp = e.as(alice, commitReq(2, "other", "ok-1:0", "no-1:0")).(*kmsg.OffsetCommitResponse)
	if got := commitCodes(resp); got != "ok-1/0=30 no-1/0=30" || e.groups.count() != 0 {
		t.Errorf("group refused: %s, coordinator asked %d times", got, e.groups.count())
	}
}

func TestAuthzOffsetsNeverRevealed(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("t1", 1) // catalog topics: v10 names them by ID
	e.ensureTopic("t2", 1)
	e.commit("private", "t1", 11)
	e.commit("private", "t2", 12)
	e.commit("shared", "t1", 21)
	// alice may describe every topic and the group "shared", and even READ
	// "private"'s prefix - but DESCRIBE on "private" itself is denied.
	e.grant(
		allow(alice, acl.OpDescribe, acl.ResourceTopic, acl.Wildcard),
		allow(alice, acl.OpDescribe, acl.ResourceGroup, "shared"),
		binding(alice, acl.PermissionAllow, acl.OpRead, acl.ResourceGroup, acl.PatternPrefixed, "priv"),
		binding(alice, acl.PermissionDeny, acl.OpDescribe, acl.ResourceGroup, acl.PatternLiteral, "private"),
	)
	e.groups.reset()
	for _, v := range versions(keyOffsetFetch) {
		for _, topics := range [][]string{{"t1", "t2"}, nil} {
			if topics == nil && v < 2 {
				continue // all topics from v2
			}
			resp := e.as(alice, offsetFetch(v, "private", topics)).(*kmsg.OffsetFetchResponse)
			code, offsets := fetchOutcome(resp)
			if code != codeGroupAuthz || len(offsets) != 0 {
				t.Errorf("OffsetFetch v%d topics %v: code %d, offsets %v", v, topics, code, offsets)
			}
		}
		if v >= 8 { // both groups in one request
			req := offsetFetch(v, "private", nil)
			req.Groups = append(req.Groups, offsetFetch(v, "shared", nil).Groups[0])
			resp := e.as(alice, req).(*kmsg.OffsetFetchResponse)
			if len(resp.Groups) != 2 || resp.Groups[0].Group != "private" || resp.Groups[0].ErrorCode != codeGroupAuthz ||
				len(resp.Groups[0].Topics) != 0 || resp.Groups[1].ErrorCode != errNone {
				t.Fatalf("v%d: %+v", v, resp.Groups)
			}
			if _, offsets := fetchOutcome(&kmsg.OffsetFetchResponse{Version: v, Groups: resp.Groups[1:]}); len(offsets) != 1 || offsets["t1"] != 21 {
				t.Errorf("v%d: shared's offsets %v", v, offsets)
			}
		}
	}
	if e.groups.mentions("private") {
		t.Error("the coordinator was asked about private")
	}

	for _, v := range versions(keyDescribeGroups) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups, req.IncludeAuthorizedOperations = v, []string{"shared", "private"}, true
		resp := e.as(alice, req).(*kmsg.DescribeGroupsResponse)
		want := kmsg.NewDescribeGroupsResponseGroup()
		want.Group, want.ErrorCode = "private", codeGroupAuthz
		if len(resp.Groups) != 2 || resp.Groups[0].Group != "shared" || resp.Groups[0].ErrorCode != errNone {
			t.Fatalf("DescribeGroups v%d: %+v", v, resp.Groups)
		}
		if got := resp.Groups[1]; fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("DescribeGroups v%d: refused group answered %+v, want %+v", v, got, want)
		}
	}

	for _, v := range versions(keyListGroups) {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		resp := e.as(alice, req).(*kmsg.ListGroupsResponse)
		if got := listed(resp); got != "shared" {
			t.Errorf("ListGroups v%d: %s", v, got)
		}
	}
}

func listed(resp *kmsg.ListGroupsResponse) string {
	var names []string
	for _, g := range resp.Groups {
		names = append(names, g.Group)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func TestAuthzOffsetFetchTopics(t *testing.T) {
	e := newAuthzEnv(t)
	for _, topic := range []string{"pub-a", "pub-b", "hidden"} {
		e.ensureTopic(topic, 1)
		e.commit("g", topic, 5)
	}
	e.grant(
		allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"),
		binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceTopic, acl.PatternPrefixed, "pub-"),
	)
	e.groups.reset()
	for _, v := range versions(keyOffsetFetch) {
		// Listed: the hidden topic is refused in place, with no offset.
		resp := e.as(alice, offsetFetch(v, "g", []string{"hidden", "pub-a", "missing"})).(*kmsg.OffsetFetchResponse)
		got := fetchSummary(resp)
		want := "hidden/0=-1:29 pub-a/0=5:0 missing/0=-1:29"
		if v >= 10 {
			// By ID: outside the catalog "missing" has none, and a topic
			// alice may not describe is answered as an unknown ID too
			// (security.md, "Topic IDs").
			want = "hidden/0=-1:100 pub-a/0=5:0 missing/0=-1:100"
		}
		if got != want {
			t.Errorf("v%d listed: %s, want %s", v, got, want)
		}
		if v < 2 {
			continue
		}
		// All topics: the hidden topic is left out.
		resp = e.as(alice, offsetFetch(v, "g", nil)).(*kmsg.OffsetFetchResponse)
		if got, want := fetchSummary(resp), "pub-a/0=5:0 pub-b/0=5:0"; got != want {
			t.Errorf("v%d all: %s, want %s", v, got, want)
		}
	}
	if e.groups.mentions("hidden") {
		t.Error("the coordinator was asked about the hidden topic")
	}
	// Only refused topics listed: the coordinator still answers for the
	// group, with an explicit (empty) list, never "all topics".
	resp := e.as(alice, offsetFetch(7, "g", []string{"hidden"})).(*kmsg.OffsetFetchResponse)
	if got := fetchSummary(resp); got != "hidden/0=-1:29" {
		t.Errorf("only hidden: %s", got)
	}
}

// fetchSummary lists topic/partition=offset:code of a one-group answer.
func fetchSummary(resp *kmsg.OffsetFetchResponse) string {
	var out []string
	add := func(topic string, p int32, o int64, code int16) {
		out = append(out, fmt.Sprintf("%s/%d=%d:%d", topic, p, o, code))
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition, p.Offset, p.ErrorCode)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(topicOf(t.Topic, t.TopicID), p.Partition, p.Offset, p.ErrorCode)
			}
		}
	}
	return strings.Join(out, " ")
}

func TestAuthzListGroups(t *testing.T) {
	e := newAuthzEnv(t)
	for _, g := range []string{"app-1", "app-2", "other"} {
		e.commit(g, "t", 1)
	}
	req := kmsg.NewPtrListGroupsRequest()
	for _, tc := range []struct {
		name string
		acls []acl.Binding
		want string
	}{
		{"nothing", nil, ""},
		{"prefixed describe", []acl.Binding{binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceGroup, acl.PatternPrefixed, "app-")}, "app-1,app-2"},
		{"read implies describe", []acl.Binding{allow(alice, acl.OpRead, acl.ResourceGroup, "other")}, "other"},
		{"deny over allow", []acl.Binding{
			allow(alice, acl.OpDescribe, acl.ResourceGroup, acl.Wildcard),
			binding(alice, acl.PermissionDeny, acl.OpDescribe, acl.ResourceGroup, acl.PatternLiteral, "app-2"),
		}, "app-1,other"},
		// CLUSTER DESCRIBE lists every group, even one denied by name
		// (Kafka's rule).
		{"cluster describe", []acl.Binding{
			allow(alice, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName),
			binding(alice, acl.PermissionDeny, acl.OpDescribe, acl.ResourceGroup, acl.PatternLiteral, "app-2"),
		}, "app-1,app-2,other"},
	} {
		e.grant(tc.acls...)
		if got := listed(e.as(alice, req).(*kmsg.ListGroupsResponse)); got != tc.want {
			t.Errorf("%s: listed %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAuthzListGroupsFilter: cohort's ListGroups filter (group.ListFilterTag)
// applies to the groups the principal may describe, after the ACLs: a group
// it may not describe is neither answered nor counted, whatever the filter,
// and its protocol type is not named.
func TestAuthzListGroupsFilter(t *testing.T) {
	e := newAuthzEnv(t)
	for _, g := range []string{"app-1", "app-2", "app-3", "other-app"} {
		e.commit(g, "t", 1)
	}
	e.grant(binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceGroup, acl.PatternPrefixed, "app-"))
	for _, tc := range []struct {
		f                group.ListFilter
		want             string
		listed, matching int32
	}{
		{group.ListFilter{ID: "app", Limit: -1}, "app-1,app-2,app-3", 3, 3}, // not other-app
		{group.ListFilter{ID: "other", Limit: -1}, "", 3, 0},
		{group.ListFilter{ID: "app-", Prefix: true, Limit: 2}, "app-1,app-2", 3, 3},
		{group.ListFilter{ID: "2", Limit: 1000}, "app-2", 3, 1},
	} {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		group.RequestListFilter(req, tc.f)
		resp := e.as(alice, req).(*kmsg.ListGroupsResponse)
		s, ok := group.ListSummaryOf(resp)
		if got := listed(resp); got != tc.want || !ok || s.Listed != tc.listed || s.Matching != tc.matching {
			t.Errorf("%+v: answered %q with %+v (ok %v), want %q, %d listed, %d matching", tc.f, got, s, ok, tc.want, tc.listed, tc.matching)
		}
	}
	// With CLUSTER DESCRIBE every group may be described, and the
	// coordinator's partitions filter as they list.
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName))
	for _, tc := range []struct {
		f                string
		want             string
		listed, matching int32
	}{
		{"app", "app-1,app-2,app-3,other-app", 4, 4},
		{"app-", "app-1,app-2", 4, 3}, // prefix, limit 2
		{"nothing", "", 4, 0},
	} {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 5
		f := group.ListFilter{ID: tc.f, Limit: -1}
		if tc.f == "app-" {
			f.Prefix, f.Limit = true, 2
		}
		group.RequestListFilter(req, f)
		resp := e.as(alice, req).(*kmsg.ListGroupsResponse)
		s, ok := group.ListSummaryOf(resp)
		if got := listed(resp); got != tc.want || !ok || s.Listed != tc.listed || s.Matching != tc.matching || len(s.ProtocolTypes) != 0 {
			t.Errorf("cluster describe, %+v: answered %q with %+v (ok %v), want %q, %d listed, %d matching", f, got, s, ok, tc.want, tc.listed, tc.matching)
		}
	}
	e.grant(binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceGroup, acl.PatternPrefixed, "app-"))
	// Without the tag (every stock client), or before v3, the answer is
	// the one it always was: every group it may describe, no summary.
	for _, v := range []int16{2, 5} {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		if v < 3 {
			group.RequestListFilter(req, group.ListFilter{ID: "1", Limit: -1}) // not sent before v3
		}
		resp := e.as(alice, req).(*kmsg.ListGroupsResponse)
		if _, ok := group.ListSummaryOf(resp); ok || listed(resp) != "app-1,app-2,app-3" {
			t.Errorf("v%d without the filter: %q", v, listed(resp))
		}
	}
}

func TestAuthzDescribeGroupsOperations(t *testing.T) {
	e := newAuthzEnv(t)
	e.commit("ops", "t", 1)
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "ops"), allow(alice, acl.OpDescribe, acl.ResourceGroup, "gone"))
	wantOps := e.authz.AuthorizedOperations(alice, aliceHost, acl.ResourceGroup, "ops")
	if wantOps&(1<<acl.OpRead) == 0 || wantOps&(1<<acl.OpDescribe) == 0 || wantOps&(1<<acl.OpDelete) != 0 {
		t.Fatalf("the authorizer's operations %b do not fit the grants", wantOps)
	}
	for _, v := range versions(keyDescribeGroups) {
		for _, include := range []bool{false, true} {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version, req.Groups, req.IncludeAuthorizedOperations = v, []string{"ops", "gone"}, include
			resp := e.as(alice, req).(*kmsg.DescribeGroupsResponse)
			want := opsOmitted
			if include && v >= 3 {
				want = wantOps
			}
			if got := resp.Groups[0].AuthorizedOperations; v >= 3 && got != want {
				t.Errorf("v%d include=%v: operations %d, want %d", v, include, got, want)
			}
			// A group that does not exist has no operations to report
			// when it is an error (v6 GROUP_ID_NOT_FOUND).
			if g := resp.Groups[1]; v >= 6 && (g.ErrorCode != group.ErrGroupIDNotFound || g.AuthorizedOperations != opsOmitted) {
				t.Errorf("v%d include=%v: missing group %+v", v, include, g)
			}
		}
	}
}

func TestAuthzMetadata(t *testing.T) {
	e := newAuthzEnv(t)
	for _, n := range []string{"pub-a", "pub-b", "secret"} {
		e.ensureTopic(n, 1)
	}
	e.grant(
		binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceTopic, acl.PatternPrefixed, "pub-"),
		allow(alice, acl.OpDescribe, acl.ResourceTopic, "nope"),
	)
	topicsOf := func(resp *kmsg.MetadataResponse) string {
		var out []string
		for _, t := range resp.Topics {
			name := "<nil>"
			if t.Topic != nil {
				name = *t.Topic
			}
			out = append(out, fmt.Sprintf("%s=%d/%d", name, t.ErrorCode, len(t.Partitions)))
		}
		return strings.Join(out, " ")
	}
	for _, v := range versions(keyMetadata) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0's "all topics"
		}
		if got := topicsOf(e.as(alice, req).(*kmsg.MetadataResponse)); got != "pub-a=0/1 pub-b=0/1" {
			t.Errorf("v%d all topics: %s", v, got)
		}
		req.Topics = nil
		for _, n := range []string{"secret", "pub-a", "nope", "ghost", "secret"} {
			req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
		}
		// A missing topic is UNKNOWN_TOPIC_OR_PARTITION only to whom may
		// describe it; to others it is refused like an existing one.
		if got := topicsOf(e.as(alice, req).(*kmsg.MetadataResponse)); got != "secret=29/0 pub-a=0/1 nope=3/0 ghost=29/0" {
			t.Errorf("v%d named: %s", v, got)
		}
	}

	// By topic ID (v12): a topic the principal may not describe is answered
	// as an unknown ID, the same as one that does not exist (cohort's IDs
	// are derived from names, so a refusal would confirm a guessed name).
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: catalog.TopicID("secret")}, {TopicID: catalog.TopicID("pub-b")},
		{TopicID: [16]byte{9}}, {TopicID: catalog.TopicID("nope")}}
	resp := e.as(alice, req).(*kmsg.MetadataResponse)
	if got := topicsOf(resp); got != "<nil>=100/0 pub-b=0/1 <nil>=100/0 <nil>=100/0" || resp.Topics[0].TopicID != catalog.TopicID("secret") {
		t.Errorf("by id: %s, id %x", got, resp.Topics[0].TopicID)
	}

	// Authorized operations: per topic when asked (v8+), never for a
	// refused one; the cluster's (v8-10) are 0 without CLUSTER DESCRIBE.
	e.grant(
		allow(alice, acl.OpRead, acl.ResourceTopic, "pub-a"),
		allow(alice, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName),
	)
	for _, v := range []int16{8, 10, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = v, true, true
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("pub-a")}, {Topic: kmsg.StringPtr("secret")}}
		resp := e.as(alice, req).(*kmsg.MetadataResponse)
		if got, want := resp.Topics[0].AuthorizedOperations, e.authz.AuthorizedOperations(alice, aliceHost, acl.ResourceTopic, "pub-a"); got != want || got&(1<<acl.OpRead) == 0 {
			t.Errorf("v%d: pub-a operations %b, want %b", v, got, want)
		}
		if got := resp.Topics[1].AuthorizedOperations; got != opsOmitted {
			t.Errorf("v%d: refused topic's operations %b", v, got)
		}
		if v <= 10 {
			if got, want := resp.AuthorizedOperations, e.authz.AuthorizedOperations(alice, aliceHost, acl.ResourceCluster, acl.ClusterName); got != want || got == 0 {
				t.Errorf("v%d: cluster operations %b, want %b", v, got, want)
			}
		}
	}
	e.grant()
	req = kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeClusterAuthorizedOperations = 9, true
	if got := e.as(alice, req).(*kmsg.MetadataResponse).AuthorizedOperations; got != 0 {
		t.Errorf("cluster operations without CLUSTER DESCRIBE: %b", got)
	}
	req.IncludeClusterAuthorizedOperations = false
	if got := e.as(alice, req).(*kmsg.MetadataResponse).AuthorizedOperations; got != opsOmitted {
		t.Errorf("cluster operations not asked for: %b", got)
	}
}

func TestAuthzDeleteTopicsExistence(t *testing.T) {
	e := newAuthzEnv(t)
	describe := func(n string) acl.Binding { return allow(alice, acl.OpDescribe, acl.ResourceTopic, n) }
	del := func(n string) acl.Binding { return allow(alice, acl.OpDelete, acl.ResourceTopic, n) }
	for _, tc := range []struct {
		name    string
		acls    []acl.Binding
		exists  bool
		byID    bool
		code    int16
		named   bool // the answer names the topic
		deleted bool
	}{
		{"no permission, exists", nil, true, false, codeTopicAuthz, true, false},
		{"no permission, missing", nil, false, false, codeTopicAuthz, true, false},
		{"describe, missing", []acl.Binding{describe("t")}, false, false, errUnknownTopicOrPartition, true, false},
		{"describe, exists", []acl.Binding{describe("t")}, true, false, codeTopicAuthz, true, false},
		{"delete, exists", []acl.Binding{del("t")}, true, false, errNone, true, true},
		{"delete, missing", []acl.Binding{del("t")}, false, false, errUnknownTopicOrPartition, true, false},
		{"cluster delete", []acl.Binding{allow(alice, acl.OpDelete, acl.ResourceCluster, acl.ClusterName)}, true, false, errNone, true, true},
		{"by id, no permission", nil, true, true, errUnknownTopicID, false, false}, // hiddenByID
		{"by id, describe", []acl.Binding{describe("t")}, true, true, codeTopicAuthz, true, false},
		{"by id, delete", []acl.Binding{del("t")}, true, true, errNone, true, true},
		{"by id, missing", []acl.Binding{del("t")}, false, true, errUnknownTopicID, false, false},
		{"by id, missing, no permission", nil, false, true, errUnknownTopicID, false, false},
	} {
		e.cat.Delete("t")
		if tc.exists {
			e.ensureTopic("t", 1)
		}
		e.grant(tc.acls...)
		req := deleteTopicsReq(6, "t")
		if tc.byID {
			req.Topics[0] = kmsg.DeleteTopicsRequestTopic{TopicID: catalog.TopicID("t")}
		}
		resp := e.as(alice, req).(*kmsg.DeleteTopicsResponse)
		a := resp.Topics[0]
		_, exists := e.cat.Lookup("t")
		if a.ErrorCode != tc.code || (a.Topic != nil) != tc.named || exists != (tc.exists && !tc.deleted) {
			t.Errorf("%s: code %d, name %v, topic exists %v", tc.name, a.ErrorCode, a.Topic, exists)
		}
		if !tc.byID && a.TopicID != ([16]byte{}) && !tc.deleted {
			t.Errorf("%s: a refused topic's id is revealed", tc.name)
		}
	}

	// Several topics, old and new shapes: each is decided alone, in order.
	for _, v := range []int16{0, 5, 6} {
		e.ensureTopic("mine", 1)
		e.ensureTopic("theirs", 1)
		e.grant(del("mine"))
		resp := e.as(alice, deleteTopicsReq(v, "theirs", "mine", "ghost")).(*kmsg.DeleteTopicsResponse)
		var got []string
		for _, a := range resp.Topics {
			got = append(got, fmt.Sprintf("%s=%d", *a.Topic, a.ErrorCode))
		}
		_, mine := e.cat.Lookup("mine")
		_, theirs := e.cat.Lookup("theirs")
		if strings.Join(got, " ") != "theirs=29 mine=0 ghost=29" || mine || !theirs {
			t.Errorf("v%d: %v; mine exists %v, theirs exists %v", v, got, mine, theirs)
		}
	}
}

func TestAuthzCreateTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.grant(binding(alice, acl.PermissionAllow, acl.OpCreate, acl.ResourceTopic, acl.PatternPrefixed, "mine-"))
	req := createReq(false, newTopic("theirs", 1), newTopic("mine-1", 2), newTopic("dup", 1), newTopic("dup", 1))
	req.Version = 7
	resp := e.as(alice, req).(*kmsg.CreateTopicsResponse)
	if got := createCodes(resp); got != "theirs=29,mine-1=0,dup=42,dup=42" {
		t.Fatalf("codes %s", got)
	}
	if _, ok := e.cat.Lookup("theirs"); ok {
		t.Error("a refused topic was created")
	}
	// Without DESCRIBE_CONFIGS the created topic's settings are withheld
	// (v5+).
	if a := resp.Topics[1]; a.ConfigErrorCode != codeTopicAuthz || a.NumPartitions != -1 || a.ReplicationFactor != -1 {
		t.Errorf("without DESCRIBE_CONFIGS: %+v", a)
	}
	e.grant(
		allow(alice, acl.OpCreate, acl.ResourceCluster, acl.ClusterName),
		allow(alice, acl.OpDescribeConfigs, acl.ResourceTopic, "any-2"),
	)
	req = createReq(false, newTopic("any-1", 1), newTopic("any-2", 3))
	req.Version = 7
	resp = e.as(alice, req).(*kmsg.CreateTopicsResponse)
	if got := createCodes(resp); got != "any-1=0,any-2=0" {
		t.Fatalf("with CLUSTER CREATE: %s", got)
	}
	if a := resp.Topics[1]; a.ConfigErrorCode != errNone || a.NumPartitions != 3 {
		t.Errorf("with DESCRIBE_CONFIGS: %+v", a)
	}
}

func TestAuthzCreatePartitionsDuplicates(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("a", 1)
	e.ensureTopic("b", 1)
	e.grant(allow(alice, acl.OpAlter, acl.ResourceTopic, "b"))
	req := kmsg.NewPtrCreatePartitionsRequest()
	for _, n := range []string{"a", "b", "dup", "dup"} {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = n, 2
		req.Topics = append(req.Topics, rt)
	}
	resp := e.as(alice, req).(*kmsg.CreatePartitionsResponse)
	var got []string
	for _, a := range resp.Topics {
		got = append(got, fmt.Sprintf("%s=%d", a.Topic, a.ErrorCode))
	}
	ta, _ := e.cat.Lookup("a")
	tb, _ := e.cat.Lookup("b")
	if strings.Join(got, " ") != "a=29 b=0 dup=42 dup=42" || ta.Partitions != 1 || tb.Partitions != 2 {
		t.Errorf("%v; a has %d partitions, b %d", got, ta.Partitions, tb.Partitions)
	}
}

func TestAuthzFindCoordinatorKeys(t *testing.T) {
	e := newAuthzEnv(t)
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "mine"))
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"theirs", "mine"}
	resp := e.as(alice, req).(*kmsg.FindCoordinatorResponse)
	if c := resp.Coordinators; len(c) != 2 || c[0].ErrorCode != codeGroupAuthz || c[0].NodeID != -1 || c[0].Host != "" ||
		c[1].ErrorCode != errNone || c[1].NodeID != 1 || c[1].Host != "127.0.0.1" {
		t.Errorf("%+v", c)
	}
	// Share coordinators (v6) are for brokers: CLUSTER_ACTION.
	req.Version, req.CoordinatorType = 6, coordinatorShare
	resp = e.as(alice, req).(*kmsg.FindCoordinatorResponse)
	for _, c := range resp.Coordinators {
		if c.ErrorCode != codeClusterAuthz {
			t.Errorf("share key without CLUSTER_ACTION: %+v", c)
		}
	}
	e.grant(allow(alice, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName))
	resp = e.as(alice, req).(*kmsg.FindCoordinatorResponse)
	for _, c := range resp.Coordinators {
		if c.ErrorCode != errInvalidRequest {
			t.Errorf("share key with CLUSTER_ACTION: %+v", c)
		}
	}
}

func TestAuthzErrorResponsesMatchKafka(t *testing.T) {
	e := newAuthzEnv(t)
	e.grant()
	for _, v := range versions(keyJoinGroup) {
		req := joinRequest("g", v)
		req.MemberID = "m-1"
		resp := e.as(alice, req).(*kmsg.JoinGroupResponse)
		wantProtocol := v < 7 // "" before v7, null from v7
		if resp.ErrorCode != codeGroupAuthz || resp.MemberID != "" || resp.Generation != -1 || resp.LeaderID != "" ||
			len(resp.Members) != 0 || (resp.Protocol != nil) != wantProtocol {
			t.Errorf("JoinGroup v%d: %+v", v, resp)
		}
	}
	// SyncGroup v5 without protocol type and name: Kafka answers
	// INCONSISTENT_GROUP_PROTOCOL before it authorizes.
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID = 5, "g", "m"
	if got := e.as(alice, req).(*kmsg.SyncGroupResponse).ErrorCode; got != group.ErrInconsistentProtocol {
		t.Errorf("SyncGroup v5 without protocol: %d", got)
	}
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if got := e.as(alice, req).(*kmsg.SyncGroupResponse); got.ErrorCode != codeGroupAuthz || len(got.MemberAssignment) != 0 {
		t.Errorf("SyncGroup v5: %+v", got)
	}
	// OffsetFetch v1 has no top-level error: each asked partition says it.
	resp := e.as(alice, offsetFetch(1, "g", []string{"a", "b"})).(*kmsg.OffsetFetchResponse)
	if got := fetchSummary(resp); got != "a/0=-1:30 b/0=-1:30" {
		t.Errorf("OffsetFetch v1: %s", got)
	}
	if e.groups.count() != 0 {
		t.Errorf("refused requests reached the coordinator %d times", e.groups.count())
	}
}

// TestAuthzEveryAPIHasARule: every advertised API is either checked or
// explicitly exempt; an API without a rule would close the connection.
func TestAuthzEveryAPIHasARule(t *testing.T) {
	e := newAuthzEnv(t)
	for _, api := range SupportedAPIs() {
		req := kmsg.RequestForKey(api.Key)
		req.SetVersion(api.Max)
		r := &request{key: api.Key, version: api.Max, req: req}
		if _, err := e.srv.handleAuthorized(testCtx(t), Client{Principal: alice, Host: aliceHost}, r); err != nil && strings.Contains(err.Error(), "no authorization rule") {
			t.Errorf("%s: %v", api.Name, err)
		}
	}
	r := &request{key: 99, version: 0, req: nil}
	if _, err := e.srv.handleAuthorized(testCtx(t), Client{Principal: admin}, r); err == nil {
		t.Error("an API without a rule was answered")
	}
}

// staticGroups answers every group request with a prebuilt response,
// without allocating.
type staticGroups map[int16]kmsg.Response

func (g staticGroups) Handle(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
	return g[req.Key()], nil
}

// TestAuthzHotPathAllocations: with every permission granted, Heartbeat
// and OffsetCommit allocate no more than without an authorizer.
func TestAuthzHotPathAllocations(t *testing.T) {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m", 1
	oc := commitReq(9, "g", "t1:0,1,2", "t2:0", "t3:5")
	groups := staticGroups{keyHeartbeat: group.ErrorResponse(hb, 0), keyOffsetCommit: group.ErrorResponse(oc, 0)}
	az := &aclAuthorizer{}
	az.set.Store(acl.NewSet([]acl.Binding{
		allow(alice, acl.OpRead, acl.ResourceGroup, "g"),
		binding(alice, acl.PermissionAllow, acl.OpRead, acl.ResourceTopic, acl.PatternPrefixed, "t"),
	}))
	newServer := func(sec *Security) *Server {
		s, err := New(Config{Listen: "127.0.0.1:0", Groups: groups, Topology: SingleNode(Broker{}, "c"), Logger: discard(), Security: sec})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	open, checked := newServer(nil), newServer(&Security{Authorizer: az})
	ctx := context.Background()
	c := Client{ID: "cli", Host: aliceHost, Principal: alice}
	for _, req := range []kmsg.Request{hb, oc} {
		r := &request{key: req.Key(), version: req.GetVersion(), req: req}
		allocs := func(s *Server) float64 {
			return testing.AllocsPerRun(200, func() {
				resp, err := s.handle(ctx, c, r)
				if err != nil || resp != groups[req.Key()] {
					t.Fatalf("answer %v, %v", resp, err)
				}
			})
		}
		if a, b := allocs(open), allocs(checked); b > a {
			t.Errorf("%s: %.1f allocations with the authorizer, %.1f without", kmsg.NameForKey(req.Key()), b, a)
		}
	}
}

func TestAuthzDenialsCountedAndLogged(t *testing.T) {
	reg := prometheus.NewRegistry()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newAuthzEnv(t, withRegistry(reg), func(c *Config) { c.Logger = log })
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "g"), allow(alice, acl.OpRead, acl.ResourceTopic, "ok"))

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "forbidden"
	e.as(alice, hb)
	e.as(alice, hb)
	e.as(alice, commitReq(9, "g", "ok:0", "no-1:0", "no-2:0"))
	e.as(alice, kmsg.NewPtrListGroupsRequest()) // filtering a listing is no denial

	count := func(api string) float64 {
		vec, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range vec {
			if mf.GetName() != "cohort_server_authorization_denials_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "api" && l.GetValue() == api {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	if hb, oc, lg := count("Heartbeat"), count("OffsetCommit"), count("ListGroups"); hb != 2 || oc != 2 || lg != 0 {
		t.Errorf("denials: Heartbeat %v, OffsetCommit %v, ListGroups %v", hb, oc, lg)
	}
	if n, err := testutil.GatherAndCount(reg, "cohort_server_authorization_denials_total"); err != nil || n != len(supported) {
		t.Errorf("%d series (%v), want one per API", n, err)
	}

	mu.Lock()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	mu.Unlock()
	var denials []string
	for _, l := range lines {
		if strings.Contains(l, "authorization denied") {
			denials = append(denials, l)
		}
	}
	if len(denials) != 4 {
		t.Fatalf("%d denial lines, want 4:\n%s", len(denials), strings.Join(lines, "\n"))
	}
	for _, want := range []string{"level=DEBUG", "principal=User:alice", "host=127.0.0.1", "api=Heartbeat", "resource=forbidden"} {
		if !strings.Contains(denials[0], want) {
			t.Errorf("denial line %q lacks %q", denials[0], want)
		}
	}
	if !strings.Contains(denials[3], "api=OffsetCommit") || !strings.Contains(denials[3], "resource=no-2") {
		t.Errorf("last denial line %q", denials[3])
	}
}

// TestAuthzDenialLoggedAsJSON: with --log-format json the denial line names
// the operation and resource type, as the text format does (it gave their
// codes).
func TestAuthzDenialLoggedAsJSON(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newAuthzEnv(t, func(c *Config) { c.Logger = log })
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "forbidden"
	e.as(alice, hb)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if line["msg"] != "authorization denied" {
			continue
		}
		if line["operation"] != "READ" || line["resource_type"] != "GROUP" || line["resource"] != "forbidden" {
			t.Fatalf("denial line %q", l)
		}
		return
	}
	t.Fatalf("no denial line in %q", out)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A DeleteGroups naming a group twice is answered once for it, as Kafka
// deletes each group once (here refused: one GROUP_AUTHORIZATION_FAILED).
func TestDeleteGroupsNamedTwiceAnsweredOnce(t *testing.T) {
	e := newAuthzEnv(t)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"g", "g", "h"}
	resp := e.as(alice, req).(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].Group != "h" {
		t.Fatalf("answers %+v; want one for g, one for h", resp.Groups)
	}
}

// TestAuthzListGroupsFilterRandom: a principal that may describe some
// groups gets, for a ListGroups carrying group.ListFilterTag, the answer
// FilterList makes of the list it gets without the tag: the same groups,
// in the same order under a limit, and the same counts. That holds when
// the coordinator checks each group as it lists them (GroupsListing: the
// tag reaches it) and when it cannot (the tag is taken off).
func TestAuthzListGroupsFilterRandom(t *testing.T) {
	for _, listing := range []bool{true, false} {
		var opts []serverOpt
		if !listing {
			opts = append(opts, func(c *Config) { c.Groups = handleOnly{c.Groups} })
		}
		e := newAuthzEnv(t, opts...)
		rng := rand.New(rand.NewPCG(16, 10005))
		pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
		seen := map[string]bool{}
		for range 80 {
			b := make([]byte, 1+rng.IntN(4))
			for i := range b {
				b[i] = "ab-"[rng.IntN(3)]
			}
			if id := string(b); !seen[id] {
				seen[id] = true
				e.commit(id, "t", 1)
			}
		}
		for round := range 30 {
			var bs []acl.Binding
			for range 1 + rng.IntN(3) {
				bs = append(bs, binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceGroup,
					[]acl.PatternType{acl.PatternPrefixed, acl.PatternLiteral}[rng.IntN(2)], pick("a", "b", "a-", "ab", "-")))
			}
			if rng.IntN(3) == 0 {
				bs = append(bs, binding(alice, acl.PermissionDeny, acl.OpDescribe, acl.ResourceGroup, acl.PatternPrefixed, pick("aa", "b-")))
			}
			e.grant(bs...)
			f := group.ListFilter{
				ID:     pick("", "a", "b", "-", "ab", "zz"),
				Prefix: rng.IntN(2) == 0,
				Limit:  []int32{-1, 0, 1, 3, 10, 1000}[rng.IntN(6)],
			}
			plain := kmsg.NewPtrListGroupsRequest()
			plain.Version = 5
			want := e.as(alice, plain).(*kmsg.ListGroupsResponse)
			group.FilterList(want, f)
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = 5
			group.RequestListFilter(req, f)
			e.groups.reset()
			got := e.as(alice, req).(*kmsg.ListGroupsResponse)
			ws, _ := group.ListSummaryOf(want)
			gs, ok := group.ListSummaryOf(got)
			gs.Partitions, gs.ByPartition = 0, nil // the coordinator's counts per partition, which FilterList cannot know
			wantIDs, gotIDs := fmt.Sprint(want.Groups), fmt.Sprint(got.Groups)
			if f.Limit < 0 {
				wantIDs, gotIDs = listed(want), listed(got)
			}
			if gotIDs != wantIDs || !ok || fmt.Sprint(gs) != fmt.Sprint(ws) {
				t.Fatalf("listing %v, round %d, %+v, ACLs %v:\nanswered   %s %+v\nFilterList %s %+v", listing, round, f, bs, gotIDs, gs, wantIDs, ws)
			}
			// Where the coordinator checks the groups, the filter
			// reaches it; otherwise it is taken off.
			e.groups.mu.Lock()
			_, tagged := group.ListFilterRequested(e.groups.reqs[0].(*kmsg.ListGroupsRequest))
			e.groups.mu.Unlock()
			if tagged != listing {
				t.Fatalf("listing %v: the coordinator got the filter: %v", listing, tagged)
			}
		}
	}
}

// BenchmarkAuthzListGroupsFilter: a ListGroups carrying group.ListFilterTag
// from a principal that may describe half of 20,000 groups (a prefixed
// ACL), answered by a coordinator that checks each group as it lists them
// ("listing") and by one that cannot, where the server takes the tag off
// and filters what the ACL check kept ("after"). Cases: no search with a
// limit of 1,000 (the console's unfiltered groups page) and a search
// matching 10 groups.
func BenchmarkAuthzListGroupsFilter(b *testing.B) {
	const groups = 20_000
	for _, tc := range []struct {
		name string
		f    group.ListFilter
	}{
		{"nosearch", group.ListFilter{Limit: 1000}},
		{"few", group.ListFilter{ID: "needle", Limit: 1000}},
	} {
		for _, mode := range []string{"after", "listing"} {
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				var opts []serverOpt
				if mode == "after" {
					opts = append(opts, func(c *Config) { c.Groups = handleOnly{c.Groups} })
				}
				e := newAuthzEnv(b, opts...)
				for i := range groups {
					id := fmt.Sprintf("team-%05d", i)
					if i%2 == 1 {
						id = fmt.Sprintf("other-%05d", i)
					}
					if i%1000 == 0 {
						id = fmt.Sprintf("team-needle-%05d", i)
					}
					e.commit(id, "t", 1)
				}
				e.grant(binding(alice, acl.PermissionAllow, acl.OpDescribe, acl.ResourceGroup, acl.PatternPrefixed, "team-"))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					e.groups.reset()
					req := kmsg.NewPtrListGroupsRequest() // the server takes the tag off in "after"
					req.Version = 5
					group.RequestListFilter(req, tc.f)
					resp := e.as(alice, req).(*kmsg.ListGroupsResponse)
					if s, ok := group.ListSummaryOf(resp); !ok || s.Listed != groups/2 {
						b.Fatalf("answered %+v (ok %v), want %d listed", s, ok, groups/2)
					}
				}
			})
		}
	}
}
