package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every error of Binding.Validate and
// Filter.Validate. Kafka answers all of them with INVALID_REQUEST; the
// messages say what is wrong.
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks a binding for CreateAcls, as Kafka's controller
// (AclControlManager.validateNewAcl) and broker (AclApis) do: a concrete
// resource type, a LITERAL or PREFIXED pattern, a concrete operation and
// permission, a non-empty resource name, and a CLUSTER resource named
// "kafka-cluster".
//
// Stricter than Kafka, by decision: a CLUSTER binding must be LITERAL
// (Kafka also takes PREFIXED "kafka-cluster", which means the same); the
// principal must be "Type:name" with both parts non-empty (Kafka stores a
// principal without a colon and then fails on it when authorizing) and the
// host must not be empty (Kafka's empty host matches no client).
func (b Binding) Validate() error {
	if b.ResourceType < ResourceTopic || !known(b.ResourceType, resourceTypeNames) {
		return invalid("resource type %s: a binding needs a concrete type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER)", b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return invalid("pattern type %s: a binding's pattern is LITERAL or PREFIXED", b.PatternType)
	}
	if b.Operation < OpAll || !known(b.Operation, operationNames) {
		return invalid("operation %s: a binding needs a concrete operation or ALL", b.Operation)
	}
	if b.Permission != PermissionAllow && b.Permission != PermissionDeny {
		return invalid("permission %s: a binding ALLOWs or DENYs", b.Permission)
	}
	if b.ResourceName == "" {
		return invalid("empty resource name")
	}
	if b.ResourceType == ResourceCluster {
		if b.ResourceName != ClusterName {
			return invalid("resource name %q: the only valid name for the CLUSTER resource is %s", b.ResourceName, ClusterName)
		}
		if b.PatternType != PatternLiteral {
			return invalid("pattern type %s: the CLUSTER resource is named LITERAL", b.PatternType)
		}
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 || i == len(b.Principal)-1 {
		return invalid("principal %q: want Type:name, e.g. User:alice or User:*", b.Principal)
	}
	if b.Host == "" {
		return invalid("empty host: use * for any host")
	}
	return nil
}

// Validate checks a filter for DescribeAcls and DeleteAcls: like Kafka it
// rejects an UNKNOWN resource type, pattern type, operation or permission
// (a code Kafka does not define counts as UNKNOWN); ANY and MATCH are fine.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == ResourceUnknown || !known(f.ResourceType, resourceTypeNames):
		return invalid("filter resource type %s", f.ResourceType)
	case f.PatternType == PatternUnknown || !known(f.PatternType, patternTypeNames):
		return invalid("filter pattern type %s", f.PatternType)
	case f.Operation == OpUnknown || !known(f.Operation, operationNames):
		return invalid("filter operation %s", f.Operation)
	case f.Permission == PermissionUnknown || !known(f.Permission, permissionNames):
		return invalid("filter permission %s", f.Permission)
	}
	return nil
}

// Matches reports whether f selects b, with Kafka's semantics
// (ResourcePatternFilter and AccessControlEntryFilter): ResourceAny, OpAny
// and PermissionAny match every value and a nil name, principal or host
// matches any; otherwise values compare equal. With PatternAny, or with
// the binding's own pattern type, the names compare literally (so a
// LITERAL filter for "*" selects only the wildcard bindings). With
// PatternMatch the filter selects the bindings that apply to the named
// resource: LITERAL bindings of that name or of "*", and PREFIXED bindings
// whose name is a prefix of it.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil && !f.matchesName(*f.ResourceName, b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

func (f Filter) matchesName(name string, b Binding) bool {
	if f.PatternType == PatternAny || f.PatternType == b.PatternType {
		return name == b.ResourceName
	}
	// PatternMatch.
	return patternApplies(b.PatternType, b.ResourceName, name)
}

// patternApplies reports whether a binding's pattern (pt, pattern) covers
// the resource called name: Kafka's rule for authorizing and for MATCH.
func patternApplies(pt PatternType, pattern, name string) bool {
	switch pt {
	case PatternLiteral:
		return pattern == name || pattern == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, pattern)
	}
	return false
}
