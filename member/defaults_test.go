package member

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestConfigWithDefaults: the timings Start uses for settings left at zero
// (the documented defaults), and settings given kept as they are.
func TestConfigWithDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second,
		HeartbeatInterval: 10 * time.Second / 3, LostMargin: 2 * time.Second,
		RetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: 2 * time.Second}
	if got.SessionTimeout != want.SessionTimeout || got.RebalanceTimeout != want.RebalanceTimeout ||
		got.HeartbeatInterval != want.HeartbeatInterval || got.LostMargin != want.LostMargin ||
		got.RetryBackoff != want.RetryBackoff || got.MaxRetryBackoff != want.MaxRetryBackoff {
		t.Errorf("defaults %+v", got)
	}
	set := Config{SessionTimeout: 4 * time.Second, RetryBackoff: 3 * time.Second}.WithDefaults()
	if set.SessionTimeout != 4*time.Second || set.HeartbeatInterval != 4*time.Second/3 ||
		set.RetryBackoff != 3*time.Second || set.MaxRetryBackoff != 3*time.Second {
		t.Errorf("with SessionTimeout 4s and RetryBackoff 3s: %+v", set)
	}
	// A rebalance timeout shorter than the session sets the window: a
	// dynamic member counts it from its last confirmed heartbeat too.
	short := Config{SessionTimeout: 60 * time.Second}.WithDefaults()
	if short.HeartbeatInterval != 10*time.Second || short.LostMargin != 6*time.Second {
		t.Errorf("with SessionTimeout 60s (rebalance timeout 30s): %+v", short)
	}
}

// TestHeartbeatWithinRebalanceTimeout: a dynamic member whose heartbeat
// interval does not fit in RebalanceTimeout-LostMargin would declare itself
// lost between two heartbeats (lostAt), so it is refused; a static member,
// which the coordinator does not drop at the end of a join phase, is not.
func TestHeartbeatWithinRebalanceTimeout(t *testing.T) {
	cfg := Config{Group: "g", ProtocolType: "t", Protocols: func() []Protocol { return nil },
		Assign:         func(context.Context, Generation) (map[string][]byte, error) { return nil, nil },
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 4 * time.Second,
		HeartbeatInterval: 3 * time.Second, LostMargin: time.Second}
	if _, err := NewMachine(cfg, time.Unix(0, 0), 1); err == nil || !strings.Contains(err.Error(), "RebalanceTimeout-LostMargin") {
		t.Errorf("dynamic member: %v", err)
	}
	cfg.InstanceID = "i"
	if _, err := NewMachine(cfg, time.Unix(0, 0), 1); err != nil {
		t.Errorf("static member: %v", err)
	}
}
