// Package group is the state machine of Kafka's classic group coordinator:
// the two-phase JoinGroup/SyncGroup protocol with client-side assignment,
// heartbeats and session timeouts, static membership, and committed offsets.
//
// The package is pure and deterministic. It does no I/O, starts no goroutines
// and never reads the wall clock: every entry point takes the current time, and
// member ids are drawn from a caller-supplied random source. This is what lets
// thousands of rebalance scenarios run in milliseconds on a fake clock.
//
// A Shard holds the groups of one coordinator partition. Each request handler
// takes a Ticket (the caller's handle for the request) and appends to an
// Output:
//
//   - Replies are responses that may be sent now. A parked request (a
//     JoinGroup waiting for the join barrier, a follower's SyncGroup waiting for
//     the leader) produces no reply until a later call releases it.
//   - Writes are batches of records that must be made durable. Each Write has an
//     ID; once the runtime has appended it (or failed to), it calls
//     Shard.WriteDone, and the shard releases the replies that depended on the
//     write (an offset commit's response, the assignment of a SyncGroup) or
//     turns them into errors. Nothing that depends on a write is acknowledged
//     before the write is durable.
//
// Timers (session timeouts, the join and sync barriers, the initial rebalance
// delay, pending-member and new-member timeouts) live in the shard;
// Shard.NextDeadline says when to call Shard.Tick next.
//
// Requests and responses are franz-go's generated kmsg types, so the state
// machine sees exactly the fields and versions of the wire protocol; the
// semantics follow Apache Kafka's classic group coordinator:
// docs/group-semantics.md states each rule and names the conformance test
// that shows it, and docs/architecture.md describes the design.
package group
