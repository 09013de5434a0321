package acl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// allow and deny make bindings tersely: principal, host, operation,
// resource type, pattern type, name.
func allow(p, h string, op Operation, rt ResourceType, pt PatternType, name string) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: p, Host: h, Operation: op, Permission: PermissionAllow}
}

func deny(p, h string, op Operation, rt ResourceType, pt PatternType, name string) Binding {
	b := allow(p, h, op, rt, pt, name)
	b.Permission = PermissionDeny
	return b
}

const (
	alice = "User:alice"
	bob   = "User:bob"
	ip1   = "10.0.0.1"
	ip2   = "10.0.0.2"
)

func TestAuthorize(t *testing.T) {
	lit, pre := PatternLiteral, PatternPrefixed
	topic := ResourceTopic
	type req struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}
	tests := []struct {
		name     string
		authz    Authorizer
		bindings []Binding
		reqs     []req
	}{
		{
			name: "no bindings denies by default",
			reqs: []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
		{
			name:  "no bindings, allow everyone if no ACL found",
			authz: Authorizer{AllowEveryoneIfNoACLFound: true},
			reqs:  []req{{alice, ip1, OpRead, topic, "orders", true}, {alice, ip1, OpAlter, ResourceCluster, ClusterName, true}},
		},
		{
			name:     "allow-everyone ignores bindings of other resources",
			authz:    Authorizer{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(bob, "*", OpRead, topic, lit, "payments"), allow(bob, "*", OpRead, ResourceGroup, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", true}},
		},
		{
			name:  "allow-everyone does not apply once any binding covers the resource",
			authz: Authorizer{AllowEveryoneIfNoACLFound: true},
			// A binding for another principal, host and operation still
			// counts as an ACL of the resource.
			bindings: []Binding{allow(bob, ip2, OpWrite, topic, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}, {alice, ip1, OpRead, topic, "other", true}},
		},
		{
			name:     "allow-everyone does not apply under a covering wildcard or prefix",
			authz:    Authorizer{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{allow(bob, "*", OpRead, topic, lit, "*"), allow(bob, "*", OpRead, ResourceGroup, pre, "app-")},
			reqs: []req{
				{alice, ip1, OpRead, topic, "anything", false},
				{alice, ip1, OpRead, ResourceGroup, "app-1", false},
				{alice, ip1, OpRead, ResourceGroup, "ap", true},
			},
		},
		{
			name:     "literal allow",
			bindings: []Binding{allow(alice, "*", OpRead, topic, lit, "orders")},
			reqs: []req{
				{alice, ip1, OpRead, topic, "orders", true},
				{alice, ip1, OpWrite, topic, "orders", false},
				{bob, ip1, OpRead, topic, "orders", false},
				{alice, ip1, OpRead, topic, "orders2", false}, // literal is not a prefix
				{alice, ip1, OpRead, topic, "order", false},
				{alice, ip1, OpRead, ResourceGroup, "orders", false}, // other type
			},
		},
		{
			name:     "deny wins over allow",
			bindings: []Binding{allow(alice, "*", OpRead, topic, lit, "orders"), deny(alice, "*", OpRead, topic, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
		{
			name: "deny wins from any pattern",
			bindings: []Binding{
				allow(alice, "*", OpAll, topic, lit, "orders"),
				deny(WildcardPrincipal, "*", OpWrite, topic, lit, "*"),
				deny(alice, ip2, OpRead, topic, pre, "ord"),
			},
			reqs: []req{
				{alice, ip1, OpWrite, topic, "orders", false},
				{alice, ip2, OpRead, topic, "orders", false},
				{alice, ip1, OpRead, topic, "orders", true},
			},
		},
		{
			name:     "wildcard principal",
			bindings: []Binding{allow(WildcardPrincipal, "*", OpRead, topic, lit, "orders")},
			reqs: []req{
				{alice, ip1, OpRead, topic, "orders", true},
				{"Group:ops", ip1, OpRead, topic, "orders", true}, // User:* covers every type, as in Kafka
			},
		},
		{
			name:     "wildcard of another principal type is not a wildcard",
			bindings: []Binding{allow("Group:*", "*", OpRead, topic, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}, {"Group:*", ip1, OpRead, topic, "orders", true}},
		},
		{
			name:     "host",
			bindings: []Binding{allow(alice, ip1, OpRead, topic, lit, "orders"), allow(alice, "::1", OpWrite, topic, lit, "orders")},
			reqs: []req{
				{alice, ip1, OpRead, topic, "orders", true},
				{alice, ip2, OpRead, topic, "orders", false},
				{alice, "::ffff:10.0.0.1", OpRead, topic, "orders", true}, // same address
				{alice, "0:0:0:0:0:0:0:1", OpWrite, topic, "orders", true},
				{alice, "::2", OpWrite, topic, "orders", false},
				{alice, "not-an-ip", OpWrite, topic, "orders", false},
			},
		},
		{
			name:     "wildcard resource",
			bindings: []Binding{allow(alice, "*", OpRead, topic, lit, "*")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", true}, {alice, ip1, OpRead, topic, "*", true}, {alice, ip1, OpRead, ResourceGroup, "g", false}},
		},
		{
			name:     "prefixed is not a wildcard when literal",
			bindings: []Binding{allow(alice, "*", OpRead, topic, pre, "*")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}, {alice, ip1, OpRead, topic, "*x", true}},
		},
		{
			name:     "prefixed",
			bindings: []Binding{allow(alice, "*", OpRead, topic, pre, "ord"), allow(alice, "*", OpWrite, topic, pre, "orders.")},
			reqs: []req{
				{alice, ip1, OpRead, topic, "ord", true},
				{alice, ip1, OpRead, topic, "orders.eu", true},
				{alice, ip1, OpRead, topic, "or", false},
				{alice, ip1, OpWrite, topic, "orders.eu", true},
				{alice, ip1, OpWrite, topic, "orders", false},
				{alice, ip1, OpRead, topic, "xord", false},
			},
		},
		{
			name:     "literal name that is a prefix does not apply",
			bindings: []Binding{allow(alice, "*", OpRead, topic, lit, "ord")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
		{
			name:     "ALL allows every operation",
			bindings: []Binding{allow(alice, "*", OpAll, topic, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", true}, {alice, ip1, OpAlterConfigs, topic, "orders", true}},
		},
		{
			name:     "ALL denies every operation",
			bindings: []Binding{allow(alice, "*", OpRead, topic, lit, "orders"), deny(alice, "*", OpAll, topic, pre, "o")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
		{
			name: "implied DESCRIBE and DESCRIBE_CONFIGS",
			bindings: []Binding{
				allow(alice, "*", OpRead, topic, lit, "r"), allow(alice, "*", OpWrite, topic, lit, "w"),
				allow(alice, "*", OpDelete, topic, lit, "d"), allow(alice, "*", OpAlter, topic, lit, "a"),
				allow(alice, "*", OpCreate, topic, lit, "c"), allow(alice, "*", OpAlterConfigs, topic, lit, "ac"),
			},
			reqs: []req{
				{alice, ip1, OpDescribe, topic, "r", true}, {alice, ip1, OpDescribe, topic, "w", true},
				{alice, ip1, OpDescribe, topic, "d", true}, {alice, ip1, OpDescribe, topic, "a", true},
				{alice, ip1, OpDescribe, topic, "c", false}, // CREATE implies nothing
				{alice, ip1, OpDescribeConfigs, topic, "ac", true},
				{alice, ip1, OpDescribe, topic, "ac", false},
				{alice, ip1, OpDescribeConfigs, topic, "a", false}, // ALTER does not imply DESCRIBE_CONFIGS
				{alice, ip1, OpRead, topic, "w", false},            // no other implication
			},
		},
		{
			name: "a DENY of an implying operation does not deny the implied one",
			bindings: []Binding{
				allow(alice, "*", OpDescribe, topic, lit, "orders"), deny(alice, "*", OpRead, topic, lit, "orders"),
				allow(alice, "*", OpDescribeConfigs, topic, lit, "orders"), deny(alice, "*", OpAlterConfigs, topic, lit, "orders"),
			},
			reqs: []req{
				{alice, ip1, OpDescribe, topic, "orders", true},
				{alice, ip1, OpRead, topic, "orders", false},
				{alice, ip1, OpDescribeConfigs, topic, "orders", true},
			},
		},
		{
			name:     "super users bypass denies",
			authz:    Authorizer{SuperUsers: []string{"User:admin"}},
			bindings: []Binding{deny(WildcardPrincipal, "*", OpAll, ResourceCluster, lit, ClusterName)},
			reqs: []req{
				{"User:admin", ip1, OpAlter, ResourceCluster, ClusterName, true},
				{"User:admin", ip1, OpRead, topic, "unlisted", true},
				{alice, ip1, OpAlter, ResourceCluster, ClusterName, false},
			},
		},
		{
			name:     "a super user named User:* is not a wildcard",
			authz:    Authorizer{SuperUsers: []string{WildcardPrincipal}},
			bindings: []Binding{allow(bob, "*", OpRead, topic, lit, "orders")},
			reqs:     []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
		{
			name: "bindings that fail Validate never apply",
			bindings: []Binding{
				allow(alice, "*", OpRead, ResourceAny, lit, "orders"),
				allow(alice, "*", OpRead, topic, PatternMatch, "orders"),
				allow(alice, "*", OpRead, topic, PatternAny, "orders"),
			},
			reqs: []req{{alice, ip1, OpRead, topic, "orders", false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSet(tt.bindings)
			for _, r := range tt.reqs {
				if got := tt.authz.Authorize(s, r.principal, r.host, r.op, r.rt, r.name); got != r.want {
					t.Errorf("Authorize(%s from %s, %s %s %q) = %v, want %v", r.principal, r.host, r.op, r.rt, r.name, got, r.want)
				}
			}
		})
	}
}

func TestAuthorizeNilAuthorizerAndSet(t *testing.T) {
	var a *Authorizer
	if a.Authorize(nil, alice, ip1, OpRead, ResourceTopic, "t") {
		t.Error("nil authorizer allowed a request on an empty set")
	}
	if !(&Authorizer{AllowEveryoneIfNoACLFound: true}).Authorize(nil, alice, ip1, OpRead, ResourceTopic, "t") {
		t.Error("nil set with allow-everyone denied")
	}
	s := NewSet([]Binding{allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "t")})
	if !a.Authorize(s, alice, ip1, OpRead, ResourceTopic, "t") {
		t.Error("nil authorizer denied an allowed request")
	}
	if a.Authorize(s, alice, ip1, OpRead, ResourceType(99), "t") || a.Authorize(s, alice, ip1, OpRead, ResourceType(-1), "t") {
		t.Error("out-of-range resource type allowed")
	}
}

func TestAuthorizedOperations(t *testing.T) {
	bits := func(ops ...Operation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << op
		}
		return b
	}
	s := NewSet([]Binding{
		allow(alice, "*", OpWrite, ResourceTopic, PatternLiteral, "orders"),
		allow(alice, "*", OpAlterConfigs, ResourceTopic, PatternPrefixed, "ord"),
		deny(alice, "*", OpDelete, ResourceTopic, PatternLiteral, "*"),
		allow(alice, "*", OpAll, ResourceGroup, PatternLiteral, "g"),
		deny(alice, "*", OpRead, ResourceGroup, PatternLiteral, "g"),
		allow(alice, "*", OpAll, ResourceCluster, PatternLiteral, ClusterName),
	})
	var a Authorizer
	tests := []struct {
		rt   ResourceType
		name string
		want int32
	}{
		{ResourceTopic, "orders", bits(OpWrite, OpDescribe, OpAlterConfigs, OpDescribeConfigs)},
		{ResourceTopic, "other", 0},
		{ResourceGroup, "g", bits(OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs)},
		{ResourceCluster, ClusterName, bits(OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe)},
		{ResourceAny, "x", 0},
	}
	for _, tt := range tests {
		if got := a.AuthorizedOperations(s, alice, ip1, tt.rt, tt.name); got != tt.want {
			t.Errorf("AuthorizedOperations(%s %q) = %#x, want %#x", tt.rt, tt.name, got, tt.want)
		}
	}
	su := Authorizer{SuperUsers: []string{alice}}
	if got, want := su.AuthorizedOperations(nil, alice, ip1, ResourceTransactionalID, "tx"), bits(OpDescribe, OpWrite); got != want {
		t.Errorf("super user's TRANSACTIONAL_ID operations = %#x, want %#x", got, want)
	}
	if got, want := su.AuthorizedOperations(nil, alice, ip1, ResourceUser, "u"), bits(OpCreateTokens, OpDescribeTokens); got != want {
		t.Errorf("super user's USER operations = %#x, want %#x", got, want)
	}
}

// reference is Kafka's decision written as directly as possible: a scan
// of every binding. The property test checks the indexed Set against it.
func reference(a *Authorizer, bs []Binding, principal, host string, op Operation, rt ResourceType, name string) bool {
	for _, su := range a.SuperUsers {
		if su == principal {
			return true
		}
	}
	found, allowed := false, false
	for _, b := range bs {
		if b.ResourceType != rt || !patternApplies(b.PatternType, b.ResourceName, name) {
			continue
		}
		found = true
		if (b.Principal != principal && b.Principal != WildcardPrincipal) || (b.Host != Wildcard && b.Host != host) {
			continue
		}
		if b.Permission == PermissionDeny && (b.Operation == OpAll || b.Operation == op) {
			return false
		}
		implied := (op == OpDescribe && strings.Contains(" READ WRITE DELETE ALTER ", " "+b.Operation.String()+" ")) ||
			(op == OpDescribeConfigs && b.Operation == OpAlterConfigs)
		if b.Permission == PermissionAllow && (b.Operation == OpAll || b.Operation == op || implied) {
			allowed = true
		}
	}
	return allowed || (!found && a.AllowEveryoneIfNoACLFound)
}

// randomBinding draws from small alphabets so that bindings and requests
// collide often.
func randomBinding(r *rand.Rand) Binding {
	names := []string{"a", "ab", "abc", "b", "*", "ba"}
	principals := []string{alice, bob, WildcardPrincipal}
	hosts := []string{"*", ip1, ip2}
	perms := []Permission{PermissionAllow, PermissionDeny}
	return Binding{
		ResourceType: ResourceType(2 + r.IntN(2)),
		ResourceName: names[r.IntN(len(names))],
		PatternType:  PatternType(3 + r.IntN(2)),
		Principal:    principals[r.IntN(len(principals))],
		Host:         hosts[r.IntN(len(hosts))],
		Operation:    Operation(2 + r.IntN(10)),
		Permission:   perms[r.IntN(2)],
	}
}

func TestAuthorizeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "abd", "b", "ba", "*", "c"}
	for round := range 300 {
		bs := make([]Binding, r.IntN(12))
		for i := range bs {
			bs[i] = randomBinding(r)
		}
		a := &Authorizer{AllowEveryoneIfNoACLFound: r.IntN(2) == 0}
		if r.IntN(4) == 0 {
			a.SuperUsers = []string{bob}
		}
		s := NewSet(bs)
		for range 30 {
			p := []string{alice, bob, "User:carol"}[r.IntN(3)]
			h := []string{ip1, ip2}[r.IntN(2)]
			op := Operation(3 + r.IntN(9))
			rt := ResourceType(2 + r.IntN(2))
			name := names[r.IntN(len(names))]
			if got, want := a.Authorize(s, p, h, op, rt, name), reference(a, bs, p, h, op, rt, name); got != want {
				t.Fatalf("round %d: Authorize(%s, %s, %s, %s, %q) = %v, reference says %v; bindings:\n%v",
					round, p, h, op, rt, name, got, want, strings.Join(bindingLines(bs), "\n"))
			}
		}
	}
}

func bindingLines(bs []Binding) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.String()
	}
	return out
}

// benchSet is n topics with a literal ALLOW each for several users, a
// few hundred prefixed bindings of varied lengths, and wildcard bindings.
func benchSet(n int) *Set {
	var bs []Binding
	for i := range n {
		name := fmt.Sprintf("team%d.topic%d", i%50, i)
		for u := range 4 {
			bs = append(bs, allow(fmt.Sprintf("User:u%d", u), "*", OpRead, ResourceTopic, PatternLiteral, name))
		}
		bs = append(bs, allow("User:u0", "*", OpWrite, ResourceTopic, PatternLiteral, name))
	}
	for i := range 300 {
		bs = append(bs, allow(fmt.Sprintf("User:p%d", i), "*", OpRead, ResourceTopic, PatternPrefixed, fmt.Sprintf("team%d.%s", i%50, strings.Repeat("t", i%7))))
	}
	bs = append(bs, deny("User:blocked", "*", OpAll, ResourceTopic, PatternLiteral, "*"))
	bs = append(bs, allow("User:ops", "10.1.2.3", OpDescribe, ResourceTopic, PatternLiteral, "*"))
	return NewSet(bs)
}

func TestAuthorizeDoesNotAllocate(t *testing.T) {
	s := benchSet(1000)
	a := &Authorizer{SuperUsers: []string{"User:admin"}}
	allocs := testing.AllocsPerRun(100, func() {
		if !a.Authorize(s, "User:u2", "10.1.2.3", OpRead, ResourceTopic, "team7.topic507") {
			t.Fatal("denied")
		}
		if a.Authorize(s, "User:u2", "10.1.2.4", OpWrite, ResourceTopic, "team7.topic507") {
			t.Fatal("allowed")
		}
	})
	if allocs != 0 {
		t.Errorf("Authorize allocates %v times per call pair", allocs)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	s := benchSet(10000)
	a := &Authorizer{SuperUsers: []string{"User:admin"}}
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Authorize(s, "User:u2", "10.1.2.3", OpRead, ResourceTopic, "team7.topic5007")
		}
	})
	b.Run("denied", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Authorize(s, "User:u2", "10.1.2.3", OpWrite, ResourceTopic, "team7.topic5007")
		}
	})
	b.Run("superuser", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Authorize(s, "User:admin", "10.1.2.3", OpWrite, ResourceTopic, "team7.topic5007")
		}
	})
}
