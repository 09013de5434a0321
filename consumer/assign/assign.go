// Package assign holds the partition assignors of the consumer protocol. An
// assignor runs on the group leader only: it receives every member's
// subscription and the topics' metadata and decides which member owns which
// partitions. The coordinator never looks at the result (client-side
// assignment), which is what makes strategies such as co-partitioning or
// redundant assignment possible.
package assign

// TopicPartitions names some partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// Member is one group member as the leader sees it, decoded from its
// consumer-protocol subscription.
type Member struct {
	ID         string
	InstanceID string            // static membership id, "" if dynamic
	Topics     []string          // subscribed topics
	UserData   []byte            // assignor-specific (sticky: previous assignment and generation)
	Owned      []TopicPartitions // partitions the member owns now (subscription v1+)
	Generation int32             // generation of Owned (subscription v2+), -1 if unknown
	Rack       string            // the member's rack (subscription v3+), "" if unknown
}

// Topic is the metadata of one topic as the leader read it (Metadata API).
type Topic struct {
	Name       string
	Partitions int32 // number of partitions, 0..Partitions-1
	// Racks optionally lists, per partition, the racks of its replicas
	// (Racks[p]); nil or short when unknown.
	Racks [][]string
}

// Assignment is what the leader hands one member in SyncGroup.
type Assignment struct {
	Partitions []TopicPartitions
	UserData   []byte
}

// Assignor decides partition ownership. Implementations are deterministic: the
// same input gives the same output, whichever member leads.
type Assignor interface {
	// Name is the protocol name announced in JoinGroup (for example "range",
	// "roundrobin", "sticky", "cooperative-sticky").
	Name() string
	// Cooperative reports whether the assignor follows the cooperative
	// (incremental, KIP-429) rebalance protocol: a partition that changes
	// owner is first revoked and only assigned in a follow-up rebalance.
	Cooperative() bool
	// UserData is the subscription user data this member announces, given
	// what it owns now and the generation it owns it in (-1 if none). Most
	// assignors return nil.
	UserData(owned []TopicPartitions, generation int32) []byte
	// Assign computes every member's assignment. members is sorted by ID;
	// topics holds the metadata of every subscribed topic that exists.
	// Every member of members gets an entry in the result (possibly empty).
	Assign(members []Member, topics map[string]Topic) (map[string]Assignment, error)
}

// Streamer is implemented by assignors that can hand out their plan one
// member at a time instead of building every member's Assignment at once. A
// leader that only encodes each assignment for SyncGroup (the kgobalancer
// adapter does) then never holds the whole plan as Go values: for a million
// partitions spread over many topics that plan is tens of megabytes of
// topic entries, written once and thrown away.
type Streamer interface {
	Assignor
	// AssignEach computes the same plan as Assign and calls emit once for
	// every member, with i its index in members. The calls may be spread
	// over up to workers goroutines (workers < 1 means one), the caller's
	// among them; w in [0, workers) names the goroutine making a call:
	// calls with the same w never overlap and come in the order of
	// members, so state kept per w needs no locking. The Assignment passed
	// to emit, and the slices in it, are valid only until emit returns. An
	// error from emit stops the walk and is returned (one of them, should
	// several goroutines fail).
	AssignEach(members []Member, topics map[string]Topic, workers int, emit func(w, i int, a Assignment) error) error
}
