package acl

import (
	"strings"
	"testing"
)

// roundTrip checks that parse reads back each code's lower-cased name.
func roundTrip[T interface {
	code
	String() string
}](t *testing.T, from, to T, parse func(string) (T, error)) {
	t.Helper()
	for c := from; c <= to; c++ {
		if got, err := parse(strings.ToLower(c.String())); err != nil || got != c {
			t.Errorf("parse(%q) = %v, %v", c, got, err)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	roundTrip(t, ResourceAny, ResourceUser, ParseResourceType)
	roundTrip(t, PatternAny, PatternPrefixed, ParsePatternType)
	roundTrip(t, OpAny, OpDescribeTokens, ParseOperation)
	roundTrip(t, PermissionAny, PermissionAllow, ParsePermission)
}

func TestParse(t *testing.T) {
	ops := map[string]Operation{
		"read": OpRead, "READ": OpRead, "Read": OpRead, "all": OpAll, "any": OpAny,
		"ClusterAction": OpClusterAction, "cluster_action": OpClusterAction, "cluster-action": OpClusterAction,
		"DescribeConfigs": OpDescribeConfigs, "IDEMPOTENT_WRITE": OpIdempotentWrite,
	}
	for s, want := range ops {
		if got, err := ParseOperation(s); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if got, err := ParseResourceType("transactional-id"); err != nil || got != ResourceTransactionalID {
		t.Errorf("ParseResourceType(transactional-id) = %v, %v", got, err)
	}
	if got, err := ParsePatternType("Match"); err != nil || got != PatternMatch {
		t.Errorf("ParsePatternType(Match) = %v, %v", got, err)
	}
	if got, err := ParsePermission("Deny"); err != nil || got != PermissionDeny {
		t.Errorf("ParsePermission(Deny) = %v, %v", got, err)
	}
	for _, s := range []string{"", "unknown", "reads", "*", "rea d"} {
		if got, err := ParseOperation(s); err == nil {
			t.Errorf("ParseOperation(%q) = %v, want an error", s, got)
		} else if !strings.Contains(err.Error(), "describe_configs") {
			t.Errorf("ParseOperation(%q) error %q does not list the names", s, err)
		}
	}
	if _, err := ParseResourceType("unknown"); err == nil {
		t.Error("ParseResourceType(unknown) succeeded")
	}
	if _, err := ParsePermission("grant"); err == nil {
		t.Error("ParsePermission(grant) succeeded")
	}
	if _, err := ParsePatternType("regex"); err == nil {
		t.Error("ParsePatternType(regex) succeeded")
	}
}

func TestStrings(t *testing.T) {
	if s := OpDescribeConfigs.String(); s != "DESCRIBE_CONFIGS" {
		t.Errorf("OpDescribeConfigs = %q", s)
	}
	if s := Operation(42).String(); s != "UNKNOWN(42)" {
		t.Errorf("Operation(42) = %q", s)
	}
	if s := ResourceType(-1).String(); s != "UNKNOWN(-1)" {
		t.Errorf("ResourceType(-1) = %q", s)
	}
	b := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders")
	if got, want := b.String(), `ALLOW "User:alice" from "*" READ on TOPIC LITERAL "orders"`; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
}
