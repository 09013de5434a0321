package acl

import (
	"net/netip"
	"slices"
)

// WildcardPrincipal is the principal of the bindings that apply to every
// principal. As in Kafka it applies to principals of every type, not only
// to "User:..." ones.
const WildcardPrincipal = "User:*"

// Authorizer decides requests against a Set with the rules of Kafka's
// StandardAuthorizer. The zero value (and a nil *Authorizer) has no super
// users and denies what no binding allows.
type Authorizer struct {
	// SuperUsers are principals ("User:admin") allowed everything, whatever
	// the bindings say (Kafka's super.users). Compared exactly: "User:*"
	// here is not a wildcard, as in Kafka.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows a request on a resource that no
	// binding applies to at all, for any principal, host or operation
	// (Kafka's allow.everyone.if.no.acl.found).
	AllowEveryoneIfNoACLFound bool
}

// Authorize reports whether principal, connected from host (an IP
// address), may perform op on the resource of type rt called name.
//
// Kafka's rules: super users are always allowed. A binding applies when
// its resource pattern covers the resource (LITERAL of that name or of
// "*", PREFIXED by a prefix of the name), its principal is principal or
// "User:*", and its host is "*" or host. Any applying DENY for op or ALL
// denies. Otherwise an applying ALLOW for op or ALL allows, and so does an
// ALLOW that implies op: READ, WRITE, DELETE and ALTER imply DESCRIBE,
// ALTER_CONFIGS implies DESCRIBE_CONFIGS. Implication is for ALLOW only: a
// DENY of READ does not deny DESCRIBE. Otherwise the request is allowed
// only when AllowEveryoneIfNoACLFound and no binding's pattern covers the
// resource.
//
// Hosts compare as strings and, where both are IP addresses, as
// addresses, so "::1" and "0:0:0:0:0:0:0:1" (Java's spelling) are one
// host; Kafka compares the strings only. An IPv6 zone (fe80::1%eth0) is
// ignored by a DENY and must match for an ALLOW (sameAddr).
//
// Authorize does not allocate: it looks up the resource's literal name,
// "*", and each distinct prefix length of the type's PREFIXED bindings.
func (a *Authorizer) Authorize(s *Set, principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.isSuperUser(principal) {
		return true
	}
	m := matcher{principal: principal, host: host, op: op}
	s.scan(&m, rt, name)
	switch {
	case m.denied:
		return false
	case m.allowed:
		return true
	}
	return !m.found && a != nil && a.AllowEveryoneIfNoACLFound
}

// AuthorizedOperations is Kafka's authorized-operations bit field for a
// resource (IncludeClusterAuthorizedOperations and the like): bit 1<<op
// for each operation Authorize allows among those Kafka defines for rt
// (AclEntry.supportedOperations); 0 for a type that is not concrete.
func (a *Authorizer) AuthorizedOperations(s *Set, principal, host string, rt ResourceType, name string) int32 {
	if rt < 0 || int(rt) >= len(supportedOperations) {
		return 0
	}
	var bits int32
	for _, op := range supportedOperations[rt] {
		if a.Authorize(s, principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// SupportedOperations is the bit field of every operation Kafka defines for
// rt: the authorized operations a server without an authorizer answers, as
// Kafka does.
func SupportedOperations(rt ResourceType) int32 {
	if rt < 0 || int(rt) >= len(supportedOperations) {
		return 0
	}
	var bits int32
	for _, op := range supportedOperations[rt] {
		bits |= 1 << op
	}
	return bits
}

// supportedOperations is Kafka's AclEntry.supportedOperations, by
// resource type.
var supportedOperations = [...][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

func (a *Authorizer) isSuperUser(principal string) bool {
	return a != nil && slices.Contains(a.SuperUsers, principal)
}

// matcher accumulates the bindings that apply to one request.
type matcher struct {
	principal, host string
	op              Operation

	addr    netip.Addr // host parsed, once parsed is set
	parsed  bool
	found   bool // some binding's pattern covers the resource
	allowed bool
	denied  bool
}

// scan feeds m the bindings of s whose pattern covers the resource,
// stopping at the first DENY that applies.
func (s *Set) scan(m *matcher, rt ResourceType, name string) {
	if s == nil || rt < 0 || int(rt) >= len(s.types) || s.types[rt] == nil {
		return
	}
	ix := s.types[rt]
	m.apply(ix.literal[name])
	if name != Wildcard && !m.denied {
		m.apply(ix.literal[Wildcard])
	}
	for _, n := range ix.lengths {
		if n > len(name) || m.denied {
			break
		}
		m.apply(ix.prefixed[name[:n]])
	}
}

func (m *matcher) apply(es []entry) {
	if len(es) > 0 {
		m.found = true
	}
	for i := range es {
		e := &es[i]
		if e.principal != m.principal && e.principal != WildcardPrincipal {
			continue
		}
		if e.host != Wildcard && e.host != m.host && !m.sameAddr(e.addr, e.perm == PermissionDeny) {
			continue
		}
		switch e.perm {
		case PermissionDeny:
			if e.op == OpAll || e.op == m.op {
				m.denied = true
				return
			}
		case PermissionAllow:
			if grants(e.op, m.op) {
				m.allowed = true
			}
		}
	}
}

// sameAddr reports whether m's host is the IP address a; anyZone compares
// them without their IPv6 zones (fe80::1%eth0 is then fe80::1).
//
// A client's link-local address comes with the zone of the interface it
// arrived on. A DENY compares without zones, so that one written without
// the zone (or with another spelling of it) still applies: a DENY must not
// be escaped by how the address is written. An ALLOW compares with them: a
// link-local address is unique on its link only, and an ALLOW for fe80::1
// must not let in whoever holds that address on every link of the node.
func (m *matcher) sameAddr(a netip.Addr, anyZone bool) bool {
	if !a.IsValid() {
		return false
	}
	if !m.parsed {
		m.parsed = true
		if h, err := netip.ParseAddr(m.host); err == nil {
			m.addr = h.Unmap()
		}
	}
	if anyZone {
		return m.addr.WithZone("") == a.WithZone("")
	}
	return m.addr == a
}

// grants reports whether an ALLOW binding for operation allows op.
func grants(operation, op Operation) bool {
	if operation == OpAll || operation == op {
		return true
	}
	switch op {
	case OpDescribe:
		return operation == OpRead || operation == OpWrite || operation == OpDelete || operation == OpAlter
	case OpDescribeConfigs:
		return operation == OpAlterConfigs
	}
	return false
}
