package group

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dynamic group configs: Kafka's GROUP config resource (IncrementalAlterConfigs,
// DescribeConfigs), a consumer group's own values of the consumer protocol's
// settings. cohort keeps the three a consumer group uses; Kafka's share.*,
// streams.* and dead-letter names belong to group types cohort does not serve,
// and consumer.assignor.offload.enable switches a thread of Kafka's own.
// Values are milliseconds, as in Kafka. Classic groups and classic members
// are not affected (their session timeout is the one they join with).
const (
	ConfigSessionTimeout     = "consumer.session.timeout.ms"
	ConfigHeartbeatInterval  = "consumer.heartbeat.interval.ms"
	ConfigAssignmentInterval = "consumer.assignment.interval.ms"
)

// GroupConfigNames are the group configs cohort keeps, in the order
// DescribeConfigs lists them.
var GroupConfigNames = []string{ConfigSessionTimeout, ConfigHeartbeatInterval, ConfigAssignmentInterval}

// Bounds of the values a group may be given (milliseconds). cohort's node
// settings are flags without Kafka's min/max broker settings, so the bounds
// are fixed: a session of at least a second (a shorter one fences members
// between two heartbeats of a busy client) and at most an hour; a heartbeat
// interval of at least 100 ms and below the session timeout; an assignment
// interval of 0 (compute on every change) to 15 s, Kafka's bounds for it.
const (
	minGroupSessionMs    = 1000
	maxGroupSessionMs    = 3_600_000
	minGroupHeartbeatMs  = 100
	maxGroupAssignmentMs = 15_000
)

// ParseGroupConfigInt reads a group config's value as Kafka reads an INT
// config: a 32-bit integer, blanks (and control characters) around it
// ignored, as Java's trim drops them.
func ParseGroupConfigInt(v string) (int64, error) {
	return strconv.ParseInt(javaTrim(v), 10, 32)
}

// ParseOverrides turns a group's configs (name -> value, as stored) into
// Overrides (for Config.GroupOverrides). A value that does not parse is
// ignored: values are checked when they are set (CheckGroupConfig).
func ParseOverrides(cfg map[string]string) Overrides {
	var o Overrides
	ms := func(name string, min int64) (time.Duration, bool) {
		v, ok := cfg[name]
		if !ok {
			return 0, false
		}
		n, err := ParseGroupConfigInt(v)
		if err != nil || n < min {
			return 0, false
		}
		return time.Duration(n) * time.Millisecond, true
	}
	o.SessionTimeout, _ = ms(ConfigSessionTimeout, 1)
	o.HeartbeatInterval, _ = ms(ConfigHeartbeatInterval, 1)
	o.AssignmentInterval, o.HasAssignmentInterval = ms(ConfigAssignmentInterval, 0)
	return o
}

// Consistent reports whether o's session timeout and heartbeat interval,
// with the node's (c) standing in for the ones o does not set, can be used
// together (Shard.consumerTimes): the session longer than the interval.
func (c Config) Consistent(o Overrides) bool {
	c = c.withDefaults()
	session, hb := c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval
	if o.SessionTimeout > 0 {
		session = o.SessionTimeout
	}
	if o.HeartbeatInterval > 0 {
		hb = o.HeartbeatInterval
	}
	return session > hb
}

// GroupConfigEntry is one group config as DescribeConfigs shows it.
type GroupConfigEntry struct {
	Name string
	// Value is the group's value if set (Set), else the node's.
	Value string
	Set   bool
	// NodeName and NodeValue are the node-wide setting the group's value
	// replaces, under Kafka's broker config name (a synonym), and whether
	// the node's value is Kafka's default (NodeDefault).
	NodeName    string
	NodeValue   string
	NodeDefault bool
	// DefaultValue is the node setting's default, the value NodeName has
	// when no flag changes it.
	DefaultValue string
	Doc          string
}

// DescribeGroupConfig lists every group config for a group whose configs
// are set (nil for none): the group's value or the node's.
func (c Config) DescribeGroupConfig(set map[string]string) []GroupConfigEntry {
	c = c.withDefaults()
	d := Defaults()
	node := func(v, def time.Duration) (string, bool, string) {
		ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
		return ms(v), v == def, ms(def)
	}
	out := make([]GroupConfigEntry, 0, len(GroupConfigNames))
	for _, name := range GroupConfigNames {
		e := GroupConfigEntry{Name: name, NodeName: "group." + name}
		switch name {
		case ConfigSessionTimeout:
			e.NodeValue, e.NodeDefault, e.DefaultValue = node(c.ConsumerSessionTimeout, d.ConsumerSessionTimeout)
			e.Doc = "How long a member of this consumer group lives without a heartbeat (cohort serve --consumer-session-timeout for every group)."
		case ConfigHeartbeatInterval:
			e.NodeValue, e.NodeDefault, e.DefaultValue = node(c.ConsumerHeartbeatInterval, d.ConsumerHeartbeatInterval)
			e.Doc = "The heartbeat interval given to this consumer group's members (cohort serve --consumer-heartbeat-interval for every group)."
		case ConfigAssignmentInterval:
			e.NodeValue, e.NodeDefault, e.DefaultValue = node(c.ConsumerAssignmentInterval, d.ConsumerAssignmentInterval)
			e.Doc = "The wait between two target assignment computations of this consumer group; 0 computes on every change (cohort serve --consumer-assignment-interval is the longest wait for every group, scaled down for small groups)."
		}
		e.Value = e.NodeValue
		if v, ok := set[name]; ok {
			e.Value, e.Set = v, true
		}
		out = append(out, e)
	}
	return out
}

// CheckGroupConfig checks the configs a group would have after a change
// (all of them, not only the changed ones): known names, integer values
// within their bounds, and a session timeout above the heartbeat interval,
// the node's value standing in for one the group does not set. The error's
// text is for the client (INVALID_CONFIG).
func (c Config) CheckGroupConfig(set map[string]string) error {
	c = c.withDefaults()
	// Checked in phases, in Kafka's order, so that a change with several
	// wrong values is always refused for the same one: names (sorted),
	// then whether each value is a number (in GroupConfigNames' order),
	// then the bounds (heartbeat interval, session timeout, assignment
	// interval), then the pair.
	var unknown []string
	for name := range set {
		if !slices.Contains(GroupConfigNames, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		err := fmt.Errorf("unknown group config name: %s (cohort keeps %s)", unknown[0], strings.Join(GroupConfigNames, ", "))
		if strings.Contains(strings.ToLower(unknown[0]), "assignor") {
			// Kafka has no group config for it either: the members
			// choose among the node's --consumer-assignors.
			err = fmt.Errorf("%w; a consumer group's assignor is not a group config: each member asks for one (franz-go by its balancer, librdkafka's group.remote.assignor) among the node's --consumer-assignors, and the group runs the one most members ask for", err)
		}
		return err
	}
	bounds := func(name string) (int64, int64) {
		switch name {
		case ConfigHeartbeatInterval:
			return minGroupHeartbeatMs, maxGroupSessionMs
		case ConfigAssignmentInterval:
			return 0, maxGroupAssignmentMs
		}
		return minGroupSessionMs, maxGroupSessionMs
	}
	ms := map[string]int64{}
	for _, name := range GroupConfigNames {
		v, ok := set[name]
		if !ok {
			continue
		}
		n, err := ParseGroupConfigInt(v)
		if err != nil {
			return fmt.Errorf("invalid value %q for configuration %s: not an integer (milliseconds)", v, name)
		}
		if lo, hi := bounds(name); n < min(lo, 1) {
			// Below any value of its kind (a negative interval, a zero
			// timeout): Kafka refuses it while reading the values.
			return fmt.Errorf("%s must be in the range %d to %d inclusive, not %d", name, lo, hi, n)
		}
		ms[name] = n
	}
	for _, name := range []string{ConfigHeartbeatInterval, ConfigSessionTimeout, ConfigAssignmentInterval} {
		n, ok := ms[name]
		if !ok {
			continue
		}
		if lo, hi := bounds(name); n < lo || n > hi {
			return fmt.Errorf("%s must be in the range %d to %d inclusive, not %d", name, lo, hi, n)
		}
	}
	session, ok := ms[ConfigSessionTimeout]
	if !ok {
		session = c.ConsumerSessionTimeout.Milliseconds()
	}
	hb, ok := ms[ConfigHeartbeatInterval]
	if !ok {
		hb = c.ConsumerHeartbeatInterval.Milliseconds()
	}
	if session <= hb {
		return fmt.Errorf("%s (%d) must be greater than %s (%d; a value the group does not set is the node's)",
			ConfigSessionTimeout, session, ConfigHeartbeatInterval, hb)
	}
	return nil
}
