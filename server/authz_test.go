package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	return g.c.Handle(ctx, group.Client{ID: c.ID, Host: c.Host}, req)
}

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
}

func newAuthzEnv(t testing.TB, opts ...serverOpt) *authzEnv {
	t.Helper()
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	co, err := coordinator.New(coordinator.Config{
		Partitions: 4, Group: gcfg, Store: memstore.New(),
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), Logger: discard(),
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
		cat:    catalog.New(catalog.Options{}),
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
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
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
	for _, v := range versions(keyOffsetCommit) {
		t.Run(fmt.Sprintf("OffsetCommit v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{groupNeed(acl.OpRead, "g-commit"), topicNeed(acl.OpRead, "t-commit")},
				run: func() int16 {
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Version, req.Group, req.Generation = v, "g-commit", -1
					p := kmsg.NewOffsetCommitRequestTopicPartition()
					p.Partition, p.Offset = 0, 10
					req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t-commit", Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
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
	for _, v := range versions(keyOffsetFetch) {
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
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t, Partitions: []int32{0}})
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
					offsets[t.Topic] = p.Offset
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
					ok:    errCoordinatorNotAvailable, // cohort has no transaction coordinator
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
