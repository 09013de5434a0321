package server

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTapSeesAnsweredRequests: Config.Tap is called once per answered
// request, with the request as decoded and the answer as sent, and the
// client's identity, before the client has the answer.
func TestTapSeesAnsweredRequests(t *testing.T) {
	type seen struct {
		client string
		key    int16
		member string
	}
	var mu sync.Mutex
	var got []seen
	ts := startServer(t, func(c *Config) {
		c.Tap = func(cl Client, req kmsg.Request, resp kmsg.Response) {
			s := seen{client: cl.ID, key: req.Key()}
			if jr, ok := resp.(*kmsg.JoinGroupResponse); ok {
				s.member = jr.MemberID
				// A slow tap: were the answer written first, the
				// client would hold it before this record.
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}
	})
	rc := ts.dial(t)
	rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType = 5, "tapped", "consumer"
	jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 10000, 10000
	rc.roundTrip(jg)
	rc.nc.Close()

	// The tap is called before the answer is written: a client holding
	// the answer finds it recorded (the client test bed's checks rely on
	// it: a worker exits as soon as its LeaveGroup is answered).
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("tap saw %d requests, want 2: %+v", len(got), got)
	}
	if got[0].key != 18 || got[1].key != 11 {
		t.Errorf("tap saw keys %d, %d; want ApiVersions (18) then JoinGroup (11)", got[0].key, got[1].key)
	}
	if got[1].member != "member-of-tapped" {
		t.Errorf("tap saw JoinGroup answer with member %q, want the answer sent (member-of-tapped)", got[1].member)
	}
	if got[1].client == "" {
		t.Errorf("tap saw no client id")
	}
}
