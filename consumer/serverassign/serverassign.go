// Package serverassign holds the server-side assignors of the consumer group
// protocol of KIP-848 (ConsumerGroupHeartbeat). In that protocol the group
// coordinator, not a client leader, computes every group's target
// assignment; members only name an assignor ("uniform" or "range") and the
// coordinator runs one of them for the whole group whenever the group's
// epoch moves (members, subscriptions or topic metadata changed).
//
// Assignors here are pure functions of their input: no I/O, no clock, no
// randomness, no dependence on map iteration order. The same members, topics
// and previous target always give the same plan.
//
//   - Uniform ("uniform") balances partition counts across members, as
//     evenly as the subscriptions allow, and among the balanced plans it
//     keeps the largest possible number of partitions with their owner in
//     the previous target: it moves the fewest partitions balance requires.
//     It uses the exact min-cost-flow solver of consumer/assign/sticky.
//     When members and partitions carry racks, it also places partitions on
//     members in a rack holding one of their replicas where it can do so
//     without giving up balance or stickiness.
//   - Range ("range") gives each topic's subscribers contiguous ranges of
//     its partitions, in a fixed member order, so that topics with the same
//     partition count and the same subscribers are co-partitioned. It does
//     not look at the previous target, as Kafka's server-side range since
//     3.9.
//
// See docs/serverassign.md for how these compare with Kafka's own assignors.
package serverassign

import (
	"strings"
)

// Member is one consumer-protocol member as the server-side assignor sees it.
type Member struct {
	ID         string
	InstanceID string   // static membership id, "" if dynamic
	Rack       string   // "" if unknown
	Topics     []string // subscribed topics that exist, sorted, no duplicates
}

// Topic is one subscribed topic's metadata.
type Topic struct {
	Name       string
	Partitions int32      // partitions 0..Partitions-1
	Racks      [][]string // optional, per partition: racks of its replicas
}

// Plan maps member id -> topic -> sorted partitions. Members with nothing
// have no entry or an empty one. The assignors of this package give every
// member an entry (an empty map when it gets nothing) and never list a
// topic with no partitions.
type Plan map[string]map[string][]int32

// Assignor computes a group's target assignment.
type Assignor interface {
	Name() string // "uniform", "range"
	// Assign returns the new target. members is sorted by ID; topics holds
	// every topic some member subscribes to that exists; prev is the
	// previous target (stickiness source; may be nil and may name members
	// or partitions that no longer exist). It must not modify its inputs.
	//
	// A topic a member names that is missing from topics (or has no
	// partitions) is skipped: it yields no error and no assignment. The
	// error cases are input no coordinator produces: an empty member id or
	// the same member id twice. The returned plan shares no memory with
	// the inputs.
	Assign(members []Member, topics map[string]Topic, prev Plan) (Plan, error)
}

// Names of the assignors, as members send them in ServerAssignor.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// ByName returns the assignor with that name ("uniform", "range"), case-insensitive.
func ByName(name string) (Assignor, bool) {
	switch strings.ToLower(name) {
	case UniformName:
		return Uniform(), true
	case RangeName:
		return Range(), true
	}
	return nil, false
}

// Names lists the assignors ByName knows, the default ("uniform") first.
func Names() []string { return []string{UniformName, RangeName} }
