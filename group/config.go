package group

import (
	"time"

	"github.com/cohort-dev/cohort/catalog"
)

// Config holds the coordinator settings that shape group behaviour. Start from
// Defaults (Kafka's values). A zero field means Kafka's default, except
// InitialRebalanceDelay, where zero means no delay.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for (group.min/max.session.timeout.ms; 6 s and 30 min).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long a group starting from Empty waits for
	// more members before its first generation (group.initial.rebalance.delay.ms,
	// 3 s in Defaults). Zero disables it.
	InitialRebalanceDelay time.Duration
	// MaxSize caps the members of a group (group.max.size); 0 = unlimited.
	MaxSize int
	// NewMemberJoinTimeout bounds how long a new member may stay parked in
	// JoinGroup (Kafka's fixed 5 minutes, KAFKA-7610).
	NewMemberJoinTimeout time.Duration
	// OffsetMetadataMaxBytes caps a committed offset's metadata string
	// (offset.metadata.max.bytes, 4096). Despite its name Kafka counts
	// characters (UTF-16 code units), and so does cohort.
	OffsetMetadataMaxBytes int
	// OffsetsRetention is how long offsets are kept (offsets.retention.minutes,
	// 7 days); see Shard.ExpireOffsets for which offsets expire when.
	OffsetsRetention time.Duration

	// The consumer protocol (KIP-848) groups:
	//
	// ConsumerSessionTimeout is how long a consumer-protocol member lives
	// without a heartbeat (group.consumer.session.timeout.ms, 45 s); the
	// coordinator sets it, not the client.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is the heartbeat interval given to members
	// (group.consumer.heartbeat.interval.ms, 5 s).
	ConsumerHeartbeatInterval time.Duration
	// ConsumerRebalanceHeartbeatInterval is the longest interval given
	// while a member's group is not Stable (default 500 ms; 0 or a value
	// not below ConsumerHeartbeatInterval disables the shorter intervals):
	// see heartbeatInterval.
	ConsumerRebalanceHeartbeatInterval time.Duration
	// ConsumerRebalanceHeartbeatMin is the shortest interval given while
	// the group is not Stable: to a member whose assignment just changed;
	// later answers give the time since that change, up to
	// ConsumerRebalanceHeartbeatInterval (default 1 ms; 0 or a value not
	// below ConsumerRebalanceHeartbeatInterval disables it).
	ConsumerRebalanceHeartbeatMin time.Duration
	// ConsumerAssignmentInterval and ConsumerAssignmentDelayPerMember
	// batch target computations (Kafka 4.3's
	// group.consumer.assignment.interval.ms, KIP-1263, scaled by the
	// group's size): after computing a group's target, the coordinator
	// computes the next one no sooner than min(members ×
	// ConsumerAssignmentDelayPerMember, ConsumerAssignmentInterval) later,
	// so that a burst of joins costs a few computations, not one per join
	// over all the members so far. Defaults 1 s and 20 µs (a 10-member
	// group waits 0.2 ms, 1,000 members 20 ms); 0 in either computes the
	// target on every change, as Kafka before 4.3. The first computation
	// of a group (or after it emptied) is never delayed. docs/kip848.md.
	ConsumerAssignmentInterval       time.Duration
	ConsumerAssignmentDelayPerMember time.Duration
	// GroupOverrides, when set, returns a consumer group's own settings
	// (Kafka's dynamic GROUP configs, set with IncrementalAlterConfigs):
	// a non-zero field replaces the Consumer* setting above for that group
	// (a session timeout and heartbeat interval only as a consistent pair:
	// Shard.consumerTimes).
	// The shard asks whenever it uses one (every heartbeat and timer arm),
	// so a change reaches existing members at their next heartbeat, as in
	// Kafka. It is called on the shard's goroutine and must be cheap.
	GroupOverrides func(group string) Overrides
	// MaxRecordBytes is the largest record (key and value) the store takes;
	// 0 = no limit (the embedded store). A classic group's metadata record
	// (all members' protocols and assignments) over it is not written and
	// its JoinGroup or SyncGroup gets UNKNOWN_SERVER_ERROR (writeMetadata).
	MaxRecordBytes int
	// ConsumerMaxSize caps the members of a consumer group
	// (group.consumer.max.size); 0 = unlimited.
	ConsumerMaxSize int
	// ConsumerAssignors are the server-side assignors members may ask for
	// (group.consumer.assignors); the first is the default. Default
	// uniform, range.
	ConsumerAssignors []string
	// ConsumerMigrationPolicy decides whether groups move between the
	// classic and the consumer protocol (group.consumer.migration.policy):
	// bidirectional (default), upgrade, downgrade or disabled.
	ConsumerMigrationPolicy string
	// Topics is the topic metadata consumer groups are assigned from (the
	// catalog). Nil means no topics.
	Topics Topics
	// TopicAccess, when set, keeps a member's SubscribedTopicRegex to the
	// topics its principal may DESCRIBE, as Kafka filters a regex's matches
	// with the authorizer. Nil (a node without an authorizer) gives every
	// match.
	TopicAccess TopicAccess

	// The rebalance history (docs/history.md):
	//
	// HistorySize is how many rebalance events are kept per group (default
	// 100; negative: none are recorded).
	HistorySize int
	// StormThreshold and StormWindow: a group that started more than
	// StormThreshold rebalances within StormWindow is flagged as storming
	// (default 10 in 5 minutes; a negative threshold disables the
	// detector).
	StormThreshold int
	StormWindow    time.Duration
	// OnRebalance, when set, is called by the shard (on the caller's
	// goroutine, with the partition's lock held: it must be cheap and never
	// block) with each rebalance event as it completes.
	OnRebalance func(RebalanceEvent)
	// OnStorm, when set, is called the same way when a group is flagged as
	// storming or unflagged.
	OnStorm func(StormStatus)
}

// Overrides are one consumer group's own settings; a zero field means the
// node's (Config). AssignmentInterval is the only field where zero is a
// meaningful setting (compute on every change), so it has its own flag.
type Overrides struct {
	SessionTimeout     time.Duration // consumer.session.timeout.ms
	HeartbeatInterval  time.Duration // consumer.heartbeat.interval.ms
	AssignmentInterval time.Duration // consumer.assignment.interval.ms
	// HasAssignmentInterval says AssignmentInterval is set (0 included).
	HasAssignmentInterval bool
}

// overrides returns group's own settings (none without GroupOverrides).
func (s *Shard) overrides(group string) Overrides {
	if s.cfg.GroupOverrides == nil {
		return Overrides{}
	}
	return s.cfg.GroupOverrides(group)
}

// consumerTimes are the session timeout and heartbeat interval of group's
// consumer-protocol members: the group's own where it sets them, the node's
// otherwise. They are checked together when set, but against the node's
// values of that moment: a node restarted with a shorter session, or a
// cluster node with other flags, could pair a group's heartbeat interval
// with a session no longer than it, and fence every member between two
// heartbeats. Such a pair is not used: the group runs on the node's values
// (the node logs it: node.groupOverrides).
func (s *Shard) consumerTimes(group string) (session, heartbeat time.Duration) {
	o := s.overrides(group)
	session, heartbeat = s.cfg.ConsumerSessionTimeout, s.cfg.ConsumerHeartbeatInterval
	if o.SessionTimeout > 0 {
		session = o.SessionTimeout
	}
	if o.HeartbeatInterval > 0 {
		heartbeat = o.HeartbeatInterval
	}
	if session <= heartbeat {
		return s.cfg.ConsumerSessionTimeout, s.cfg.ConsumerHeartbeatInterval
	}
	return session, heartbeat
}

// sessionFor is the session timeout of group's consumer-protocol members.
func (s *Shard) sessionFor(group string) time.Duration {
	d, _ := s.consumerTimes(group)
	return d
}

// heartbeatFor is the heartbeat interval given to group's members.
func (s *Shard) heartbeatFor(group string) time.Duration {
	_, d := s.consumerTimes(group)
	return d
}

// Defaults returns Kafka's defaults.
func Defaults() Config {
	return Config{
		MinSessionTimeout:      6 * time.Second,
		MaxSessionTimeout:      30 * time.Minute,
		InitialRebalanceDelay:  3 * time.Second,
		NewMemberJoinTimeout:   5 * time.Minute,
		OffsetMetadataMaxBytes: 4096,
		OffsetsRetention:       7 * 24 * time.Hour,

		ConsumerSessionTimeout:             45 * time.Second,
		ConsumerHeartbeatInterval:          5 * time.Second,
		ConsumerRebalanceHeartbeatInterval: 500 * time.Millisecond,
		ConsumerRebalanceHeartbeatMin:      time.Millisecond,
		ConsumerAssignmentInterval:         time.Second,
		ConsumerAssignmentDelayPerMember:   20 * time.Microsecond,
		ConsumerAssignors:                  []string{"uniform", "range"},

		HistorySize:    100,
		StormThreshold: 10,
		StormWindow:    5 * time.Minute,
	}
}

// withDefaults fills zero fields from Defaults.
func (c Config) withDefaults() Config {
	d := Defaults()
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = d.MinSessionTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = d.MaxSessionTimeout
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.NewMemberJoinTimeout == 0 {
		c.NewMemberJoinTimeout = d.NewMemberJoinTimeout
	}
	if c.OffsetMetadataMaxBytes == 0 {
		c.OffsetMetadataMaxBytes = d.OffsetMetadataMaxBytes
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = d.OffsetsRetention
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = d.ConsumerSessionTimeout
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = d.ConsumerHeartbeatInterval
	}
	if c.ConsumerMigrationPolicy == "" {
		c.ConsumerMigrationPolicy = MigrationBidirectional
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = d.ConsumerAssignors
	}
	if c.Topics == nil {
		c.Topics = noTopics{}
	}
	if c.HistorySize == 0 {
		c.HistorySize = d.HistorySize
	}
	if c.StormThreshold == 0 {
		c.StormThreshold = d.StormThreshold
	}
	if c.StormWindow <= 0 {
		c.StormWindow = d.StormWindow
	}
	return c
}

// noTopics is the empty topic metadata.
type noTopics struct{}

func (noTopics) Lookup(string) (catalog.Topic, bool)     { return catalog.Topic{}, false }
func (noTopics) LookupID([16]byte) (catalog.Topic, bool) { return catalog.Topic{}, false }
func (noTopics) Range(func(*catalog.Topic) bool)         {}
func (noTopics) Version() uint64                         { return 0 }
