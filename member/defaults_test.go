package member

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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

// TestConfigErrorsSayWhatToSet: a refused Config names what is missing,
// and only that (election and workers set all but Group themselves), and a
// heartbeat that does not fit gives the values it was compared with.
func TestConfigErrorsSayWhatToSet(t *testing.T) {
	full := Config{Group: "g", ProtocolType: "t", Protocols: func() []Protocol { return nil },
		Assign: func(context.Context, Generation) (map[string][]byte, error) { return nil, nil }}
	noGroup := full
	noGroup.Group = ""
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{noGroup, "member: Config.Group is required"},
		{Config{}, "member: Config.Group, Config.ProtocolType, Config.Protocols, Config.Assign are required"},
	} {
		if _, err := NewMachine(tc.cfg, time.Unix(0, 0), 1); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	slow := full
	slow.HeartbeatInterval = 9 * time.Second
	_, err := NewMachine(slow, time.Unix(0, 0), 1)
	if err == nil || !strings.Contains(err.Error(), "HeartbeatInterval (9s) must be well below SessionTimeout-LostMargin (10s-2s)") {
		t.Errorf("heartbeat 9s in a 10s session: %v", err)
	}
}

// TestInvalidSessionTimeoutSaysWhatToSet: the coordinator's refusal of the
// session timeout, which stops the member, says which timeout the member
// asked for and which flags of cohort bound it (Kafka's text names
// Kafka's broker settings), and still wraps the Kafka error.
func TestInvalidSessionTimeoutSaysWhatToSet(t *testing.T) {
	d := &driver{t: t, fc: &fakeCoordinator{joinErr: kerr.InvalidSessionTimeout.Code}, now: time.Unix(1000, 0),
		cancelled: map[uint64]error{}}
	m, err := NewMachine(Config{Group: "g", ProtocolType: "test", SessionTimeout: 3 * time.Second,
		Protocols: func() []Protocol { return []Protocol{{Name: "p"}} },
		Assign:    func(context.Context, Generation) (map[string][]byte, error) { return nil, nil },
		Logger:    slog.New(slog.DiscardHandler)}, d.now, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.m = m
	d.settle()
	err = m.Err()
	var fe *FatalError
	if !errors.As(err, &fe) || !errors.Is(err, kerr.InvalidSessionTimeout) {
		t.Fatalf("Err() = %v, want a *FatalError wrapping INVALID_SESSION_TIMEOUT", err)
	}
	for _, want := range []string{"Config.SessionTimeout is 3s", "--min-session-timeout", "--max-session-timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %q, does not say %q", err, want)
		}
	}
}
