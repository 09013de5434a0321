package member

import (
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
}
