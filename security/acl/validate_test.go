package acl

import (
	"errors"
	"strings"
	"testing"
)

func TestBindingValidate(t *testing.T) {
	good := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders")
	if err := good.Validate(); err != nil {
		t.Fatalf("valid binding: %v", err)
	}
	for _, b := range []Binding{
		allow(WildcardPrincipal, ip1, OpAll, ResourceTopic, PatternPrefixed, "ord"),
		deny(alice, "*", OpAlter, ResourceCluster, PatternLiteral, ClusterName),
		allow(alice, "*", OpDescribeTokens, ResourceUser, PatternLiteral, "*"),
		allow("User:CN=alice,O=acme", "*", OpWrite, ResourceTransactionalID, PatternLiteral, "tx"),
	} {
		if err := b.Validate(); err != nil {
			t.Errorf("%v: %v", b, err)
		}
	}
	tests := []struct {
		mutate func(*Binding)
		want   string // in the error message
	}{
		{func(b *Binding) { b.ResourceType = ResourceAny }, "resource type ANY"},
		{func(b *Binding) { b.ResourceType = ResourceUnknown }, "resource type UNKNOWN"},
		{func(b *Binding) { b.ResourceType = 8 }, "resource type UNKNOWN(8)"},
		{func(b *Binding) { b.PatternType = PatternAny }, "pattern type ANY"},
		{func(b *Binding) { b.PatternType = PatternMatch }, "pattern type MATCH"},
		{func(b *Binding) { b.PatternType = PatternUnknown }, "pattern type UNKNOWN"},
		{func(b *Binding) { b.Operation = OpAny }, "operation ANY"},
		{func(b *Binding) { b.Operation = OpUnknown }, "operation UNKNOWN"},
		{func(b *Binding) { b.Operation = 15 }, "operation UNKNOWN(15)"},
		{func(b *Binding) { b.Permission = PermissionAny }, "permission ANY"},
		{func(b *Binding) { b.Permission = PermissionUnknown }, "permission UNKNOWN"},
		{func(b *Binding) { b.ResourceName = "" }, "empty resource name"},
		{func(b *Binding) { b.ResourceType = ResourceCluster }, "only valid name for the CLUSTER resource is kafka-cluster"},
		{func(b *Binding) {
			b.ResourceType, b.ResourceName, b.PatternType = ResourceCluster, ClusterName, PatternPrefixed
		}, "CLUSTER resource is named LITERAL"},
		{func(b *Binding) { b.Principal = "alice" }, `principal "alice"`},
		{func(b *Binding) { b.Principal = ":alice" }, `principal ":alice"`},
		{func(b *Binding) { b.Principal = "User:" }, `principal "User:"`},
		{func(b *Binding) { b.Principal = "" }, `principal ""`},
		{func(b *Binding) { b.Host = "" }, "empty host"},
	}
	for _, tt := range tests {
		b := good
		tt.mutate(&b)
		err := b.Validate()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: Validate() = %v, want an ErrInvalid naming %q", b, err, tt.want)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	anyF := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	if err := anyF.Validate(); err != nil {
		t.Fatalf("ANY filter: %v", err)
	}
	match := Filter{ResourceType: ResourceTopic, PatternType: PatternMatch, Operation: OpRead, Permission: PermissionDeny}
	if err := match.Validate(); err != nil {
		t.Fatalf("MATCH filter: %v", err)
	}
	for i, mutate := range []func(*Filter){
		func(f *Filter) { f.ResourceType = ResourceUnknown },
		func(f *Filter) { f.ResourceType = 8 },
		func(f *Filter) { f.PatternType = PatternUnknown },
		func(f *Filter) { f.PatternType = -1 },
		func(f *Filter) { f.Operation = OpUnknown },
		func(f *Filter) { f.Operation = 15 },
		func(f *Filter) { f.Permission = PermissionUnknown },
		func(f *Filter) { f.Permission = 4 },
	} {
		f := anyF
		mutate(&f)
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: Validate() = %v, want ErrInvalid", i, err)
		}
	}
}

func ptr(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	lit := allow(alice, ip1, OpRead, ResourceTopic, PatternLiteral, "orders")
	star := allow(bob, "*", OpWrite, ResourceTopic, PatternLiteral, "*")
	pre := deny(alice, "*", OpRead, ResourceTopic, PatternPrefixed, "ord")
	preOther := allow(alice, "*", OpRead, ResourceTopic, PatternPrefixed, "pay")
	grp := allow(alice, "*", OpRead, ResourceGroup, PatternLiteral, "orders")
	all := []Binding{lit, star, pre, preOther, grp}

	anyFilter := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(mutate func(*Filter)) Filter { f := anyFilter; mutate(&f); return f }
	tests := []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"any matches all", anyFilter, all},
		{"resource type", with(func(f *Filter) { f.ResourceType = ResourceGroup }), []Binding{grp}},
		{"pattern type literal", with(func(f *Filter) { f.PatternType = PatternLiteral }), []Binding{lit, star, grp}},
		{"pattern type prefixed", with(func(f *Filter) { f.PatternType = PatternPrefixed }), []Binding{pre, preOther}},
		{"ANY compares names literally", with(func(f *Filter) { f.ResourceName = ptr("orders") }), []Binding{lit, grp}},
		{"ANY with the prefix's own name", with(func(f *Filter) { f.ResourceName = ptr("ord") }), []Binding{pre}},
		{"LITERAL * selects only wildcard bindings", with(func(f *Filter) {
			f.PatternType, f.ResourceName = PatternLiteral, ptr("*")
		}), []Binding{star}},
		{"LITERAL does not match prefixed of the same name", with(func(f *Filter) {
			f.PatternType, f.ResourceName = PatternLiteral, ptr("ord")
		}), nil},
		{"MATCH selects what applies", with(func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternMatch, ptr("orders")
		}), []Binding{lit, star, pre}},
		{"MATCH on a name only a wildcard covers", with(func(f *Filter) {
			f.PatternType, f.ResourceName = PatternMatch, ptr("zzz")
		}), []Binding{star}},
		{"MATCH without a name selects every pattern", with(func(f *Filter) { f.PatternType = PatternMatch }), all},
		{"principal", with(func(f *Filter) { f.Principal = ptr(bob) }), []Binding{star}},
		{"principal compares literally, User:* is not a wildcard here", with(func(f *Filter) { f.Principal = ptr(WildcardPrincipal) }), nil},
		{"host", with(func(f *Filter) { f.Host = ptr(ip1) }), []Binding{lit}},
		{"operation is exact, no implication", with(func(f *Filter) { f.Operation = OpDescribe }), nil},
		{"operation", with(func(f *Filter) { f.Operation = OpWrite }), []Binding{star}},
		{"permission", with(func(f *Filter) { f.Permission = PermissionDeny }), []Binding{pre}},
	}
	s := NewSet(all)
	for _, tt := range tests {
		var got []Binding
		for _, b := range all {
			if tt.f.Matches(b) {
				got = append(got, b)
			}
		}
		if !sameBindings(got, tt.want) {
			t.Errorf("%s: matched %v, want %v", tt.name, got, tt.want)
		}
		if m := s.Match(tt.f); !sameBindings(m, NewSet(tt.want).All()) {
			t.Errorf("%s: Set.Match = %v, want %v", tt.name, m, tt.want)
		}
	}
}

func sameBindings(a, b []Binding) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
