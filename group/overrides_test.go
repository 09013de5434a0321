package group

import (
	"testing"
	"time"
)

// A group's own settings (Config.GroupOverrides, Kafka's GROUP configs)
// replace the node's for that group only, and a change reaches the members
// at their next heartbeat: the interval in the answer, the session timer
// re-armed with the new timeout.
func TestGroupOverrides(t *testing.T) {
	own := map[string]Overrides{}
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
		c.ConsumerSessionTimeout = 45 * time.Second
		c.ConsumerHeartbeatInterval = 5 * time.Second
		c.GroupOverrides = func(g string) Overrides { return own[g] }
	})
	h.cgJoin("a", "t")
	h.cgJoin("b", "t")
	h.cgSettle("a", "b")
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("interval %d without an override, want the node's 5000", r.HeartbeatIntervalMillis)
	}
	own["other"] = Overrides{HeartbeatInterval: time.Second}
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("interval %d: another group's override applied", r.HeartbeatIntervalMillis)
	}

	own["cg"] = Overrides{HeartbeatInterval: 2 * time.Second, SessionTimeout: 10 * time.Second}
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 2000 {
		t.Fatalf("interval %d, want the group's 2000", r.HeartbeatIntervalMillis)
	}
	// b heartbeats once under the new setting, then falls silent: its
	// session is the group's 10 s, not the node's 45 s.
	h.cgBeat("b", h.cgOwned("b"))
	for i := 0; i < 4; i++ {
		h.advance(2 * time.Second)
		h.cgBeat("a", h.cgOwned("a"))
	}
	if h.cmember("cg", "b") == nil {
		t.Fatal("b fenced after 8 s of a 10 s session")
	}
	h.advance(2 * time.Second)
	h.cgBeat("a", h.cgOwned("a"))
	if h.cmember("cg", "b") != nil {
		t.Fatal("b not fenced 10 s after its last heartbeat")
	}

	// The override removed: the node's settings again, from the next
	// heartbeat on.
	delete(own, "cg")
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("interval %d after the override was removed, want 5000", r.HeartbeatIntervalMillis)
	}
	h.advance(40 * time.Second)
	if h.cmember("cg", "a") == nil {
		t.Fatal("a fenced within the node's 45 s session")
	}
}

// An assignment interval set for the group is the wait itself, whatever
// the group's size (Kafka's meaning); the node's is the longest wait,
// scaled by the group's size. 0 computes the target on every change.
func TestGroupOverridesAssignmentInterval(t *testing.T) {
	own := map[string]Overrides{}
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
		c.ConsumerAssignmentInterval = time.Second
		c.ConsumerAssignmentDelayPerMember = 20 * time.Microsecond
		c.GroupOverrides = func(g string) Overrides { return own[g] }
	})
	if d := h.s.assignWait("cg", 100); d != 2*time.Millisecond {
		t.Fatalf("wait %v, want the node's 100 × 20µs", d)
	}
	own["cg"] = Overrides{AssignmentInterval: 500 * time.Millisecond, HasAssignmentInterval: true}
	if d := h.s.assignWait("cg", 100); d != 500*time.Millisecond {
		t.Fatalf("wait %v, want the group's 500ms", d)
	}
	own["cg"] = Overrides{AssignmentInterval: 0, HasAssignmentInterval: true}
	if d := h.s.assignWait("cg", 100); d != 0 {
		t.Fatalf("wait %v, want 0 (the group's)", d)
	}
	if d := h.s.assignWait("other", 10); d != 200*time.Microsecond {
		t.Fatalf("another group waits %v, want the node's 10 × 20µs", d)
	}
}

// A group's heartbeat interval that is not below the session timeout it
// runs with (the node's flags changed since it was set) is not used: the
// group runs on the node's pair, so that its members are not fenced between
// two heartbeats.
func TestGroupOverridesInconsistentPair(t *testing.T) {
	own := map[string]Overrides{}
	h, _ := newCH(t, map[string]int32{"t": 4}, func(c *Config) {
		c.ConsumerSessionTimeout = 20 * time.Second
		c.ConsumerHeartbeatInterval = 5 * time.Second
		c.GroupOverrides = func(g string) Overrides { return own[g] }
	})
	own["cg"] = Overrides{HeartbeatInterval: 30 * time.Second} // set when the node's session was 45 s
	if s, hb := h.s.consumerTimes("cg"); s != 20*time.Second || hb != 5*time.Second {
		t.Fatalf("times %v, %v: want the node's 20s, 5s", s, hb)
	}
	own["cg"] = Overrides{HeartbeatInterval: 30 * time.Second, SessionTimeout: 60 * time.Second}
	if s, hb := h.s.consumerTimes("cg"); s != 60*time.Second || hb != 30*time.Second {
		t.Fatalf("times %v, %v: want the group's 60s, 30s", s, hb)
	}
	h.cgJoin("a", "t")
	h.cgSettle("a")
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 30000 {
		t.Fatalf("interval %d, want the group's 30000", r.HeartbeatIntervalMillis)
	}
	own["cg"] = Overrides{SessionTimeout: 4 * time.Second} // below the node's 5 s interval
	if r := h.cgBeat("a", h.cgOwned("a")); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("interval %d, want the node's 5000", r.HeartbeatIntervalMillis)
	}
	h.advance(15 * time.Second)
	if h.cmember("cg", "a") == nil {
		t.Fatal("a fenced by the group's 4 s session paired with a 5 s interval")
	}
}

// When several values of one change are wrong, the refusal names the same
// one every time, in Kafka's order: an unknown name before any value, a
// value that is not a number before one out of bounds, and among those out
// of bounds the heartbeat interval, then the session timeout, then the
// assignment interval. (cohort walked the change in map order, so the same
// request could be refused with either message.)
func TestCheckGroupConfigReportsInKafkaOrder(t *testing.T) {
	c := Defaults()
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{ConfigSessionTimeout: "500", ConfigHeartbeatInterval: "50", ConfigAssignmentInterval: "99999"},
			"consumer.heartbeat.interval.ms must be in the range 100 to 3600000 inclusive, not 50"},
		{map[string]string{ConfigSessionTimeout: "0", ConfigHeartbeatInterval: "50"}, // 0 is no timeout at all
			"consumer.session.timeout.ms must be in the range 1000 to 3600000 inclusive, not 0"},
		{map[string]string{ConfigSessionTimeout: "500", ConfigAssignmentInterval: "x"},
			`invalid value "x" for configuration consumer.assignment.interval.ms: not an integer (milliseconds)`},
		{map[string]string{ConfigSessionTimeout: "x", ConfigHeartbeatInterval: "y", "share.session.timeout.ms": "1"},
			"unknown group config name: share.session.timeout.ms (cohort keeps consumer.session.timeout.ms, consumer.heartbeat.interval.ms, consumer.assignment.interval.ms)"},
		// An operator looking for the assignor is told where it is chosen.
		{map[string]string{"group.consumer.assignors": "range"},
			"unknown group config name: group.consumer.assignors (cohort keeps consumer.session.timeout.ms, consumer.heartbeat.interval.ms, consumer.assignment.interval.ms); a consumer group's assignor is not a group config: each member asks for one (franz-go by its balancer, librdkafka's group.remote.assignor) among the node's --consumer-assignors, and the group runs the one most members ask for"},
	} {
		for i := 0; i < 50; i++ {
			err := c.CheckGroupConfig(tc.set)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("%v (try %d): %v\nwant %s", tc.set, i, err, tc.want)
			}
		}
	}
}
