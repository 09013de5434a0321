package acl

import (
	"fmt"
	"strconv"
	"strings"
)

// Kafka's names of the codes, indexed by code (the Java enums' names).
var (
	resourceTypeNames = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	patternTypeNames  = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	operationNames    = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
	permissionNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

// code is one of the package's enums.
type code interface {
	~int8
}

// known reports whether c is a code Kafka defines (UNKNOWN included):
// Kafka maps any other code to UNKNOWN.
func known[T code](c T, names []string) bool { return c >= 0 && int(c) < len(names) }

func codeName[T code](c T, names []string) string {
	if known(c, names) {
		return names[c]
	}
	return "UNKNOWN(" + strconv.Itoa(int(c)) + ")"
}

// String is Kafka's name of the resource type ("TOPIC"); a code Kafka does
// not define prints as "UNKNOWN(code)".
func (t ResourceType) String() string { return codeName(t, resourceTypeNames) }

// String is Kafka's name of the pattern type ("PREFIXED").
func (t PatternType) String() string { return codeName(t, patternTypeNames) }

// String is Kafka's name of the operation ("DESCRIBE_CONFIGS").
func (o Operation) String() string { return codeName(o, operationNames) }

// String is Kafka's name of the permission ("ALLOW").
func (p Permission) String() string { return codeName(p, permissionNames) }

// squash folds a name for comparison: upper case, without '_' and '-', so
// that "describe_configs", "DescribeConfigs" (kafka-acls' spelling) and
// "describe-configs" are one name.
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '_' || r == '-':
			return -1
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// parseCode finds s among names, UNKNOWN excluded: a name that parses to
// UNKNOWN would only make a binding or filter that Validate rejects.
func parseCode[T code](kind, s string, names []string) (T, error) {
	key := squash(s)
	for i := 1; i < len(names); i++ {
		if squash(names[i]) == key {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("acl: unknown %s %q (one of %s)", kind, s, strings.ToLower(strings.Join(names[1:], ", ")))
}

// ParseResourceType parses a resource type name, case-insensitively and
// ignoring '_' and '-' ("topic", "TRANSACTIONAL_ID", "transactional-id",
// "any").
func ParseResourceType(s string) (ResourceType, error) {
	return parseCode[ResourceType]("resource type", s, resourceTypeNames)
}

// ParsePatternType parses a pattern type name ("literal", "prefixed", and
// for filters "any", "match"), case-insensitively.
func ParsePatternType(s string) (PatternType, error) {
	return parseCode[PatternType]("pattern type", s, patternTypeNames)
}

// ParseOperation parses an operation name ("read", "all", "any",
// "cluster_action", "ClusterAction"), case-insensitively and ignoring '_'
// and '-'.
func ParseOperation(s string) (Operation, error) {
	return parseCode[Operation]("operation", s, operationNames)
}

// ParsePermission parses a permission name ("allow", "deny", and for
// filters "any"), case-insensitively.
func ParsePermission(s string) (Permission, error) {
	return parseCode[Permission]("permission", s, permissionNames)
}

// String is the binding on one line, names quoted, e.g.
// `ALLOW "User:alice" from "*" READ on TOPIC LITERAL "orders"`.
func (b Binding) String() string {
	return fmt.Sprintf("%s %q from %q %s on %s %s %q",
		b.Permission, b.Principal, b.Host, b.Operation, b.ResourceType, b.PatternType, b.ResourceName)
}
