// Package acl is Kafka's access-control model, as cohort enforces it: ACL
// bindings (principal, host, resource pattern, operation, permission), the
// filters of DescribeAcls/DeleteAcls, and the authorizer's decision with
// Kafka's rules (DENY wins, ALL covers every operation, READ/WRITE/DELETE/
// ALTER imply DESCRIBE, super users bypass, allow-everyone-if-no-acl-found).
//
// The numeric values of the enums are Kafka's wire codes, so that the server
// copies them from and to kmsg requests unchanged. The package is pure: no
// I/O, no clock; a Set is an immutable value that a store publishes.
package acl

// ResourceType is Kafka's resource type code.
type ResourceType int8

// Resource types (Kafka's codes).
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's resource pattern type code.
type PatternType int8

// Pattern types (Kafka's codes).
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type, names compared literally
	PatternMatch    PatternType = 2 // filters only: every binding that would apply to the named resource
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's ACL operation code.
type Operation int8

// Operations (Kafka's codes).
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is Kafka's ACL permission type code.
type Permission int8

// Permissions (Kafka's codes).
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcard is the literal resource name, principal and host that match
// every resource, principal ("User:*") and host.
const Wildcard = "*"

// ClusterName is the only name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Binding is one ACL: Principal (e.g. "User:alice", "User:*") on Host ("*"
// or an IP address) is allowed or denied Operation on the resources that
// (ResourceType, ResourceName, PatternType) matches.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil name,
// principal or host matches any; the *Any codes match any value; PatternMatch
// selects the bindings that apply to the named resource (literal equal,
// literal wildcard, prefixed prefix of the name).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}
