package group

import (
	"testing"
	"time"
)

// TestMemberRecordKeepsNegativeRebalanceTimeout: a consumer-protocol member
// may send a negative RebalanceTimeoutMs other than -1 (Kafka refuses only
// -1 in a first heartbeat, and stores the int32 as it came); its revocation
// deadline is then already past. The member record stored the milliseconds
// as a uint32 and read them back unsigned, so after a reload (a restart, a
// cluster hand-over) the same member had 49.7 days to revoke instead of none.
func TestMemberRecordKeepsNegativeRebalanceTimeout(t *testing.T) {
	for _, d := range []time.Duration{-5 * time.Millisecond, -time.Duration(1<<31) * time.Millisecond, 0,
		45 * time.Second, time.Duration(1<<31-1) * time.Millisecond} {
		m := &cmember{id: "m1", clientID: "c", rebalanceTimeout: d}
		r := cMemberRec("g", m)
		enc := r.encodeConsumer()
		got, err := decodeConsumer(enc.Key, enc.Value)
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if got.c.meta == nil || got.c.meta.rebalanceTimeout != d {
			t.Errorf("rebalance timeout %v read back as %v", d, got.c.meta.rebalanceTimeout)
		}
	}
}
