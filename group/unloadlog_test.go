package group

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnloadLogsNoWriteFailures: the writes in flight when a partition is
// unloaded (a node stopping, a partition moving) have an unknown outcome,
// not a failed one: the store may have taken them. Unload answers their
// requests NOT_COORDINATOR but logs no failure for the writes only the log
// would hear of (the empty generation, the rebalance event); a write that
// really fails is still logged.
func TestUnloadLogsNoWriteFailures(t *testing.T) {
	emptied := func(t *testing.T) (*h, *[]string) {
		h := newH(t)
		said := new([]string)
		h.s.Logf = func(f string, a ...any) { *said = append(*said, fmt.Sprintf(f, a...)) }
		ids, _ := h.stableGroup("g", 1)
		h.hold = true
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = ids[0]
		h.leave("g", m)
		if len(h.held) == 0 {
			t.Fatal("the leave wrote nothing")
		}
		return h, said
	}
	t.Run("unloaded", func(t *testing.T) {
		h, said := emptied(t)
		var out Output
		h.s.Unload(h.now, &out)
		h.settle(&out)
		if len(*said) != 0 {
			t.Errorf("Unload logged %q", *said)
		}
		if h.s.PendingWrites() != 0 {
			t.Errorf("%d writes pending after Unload", h.s.PendingWrites())
		}
	})
	t.Run("failed", func(t *testing.T) {
		h, said := emptied(t)
		h.fail = ErrNotCoordinator // as a fenced store answers a write it refused
		h.release()
		got := strings.Join(*said, "\n")
		for _, want := range []string{`group "g": persisting empty generation 2 failed: NOT_COORDINATOR (16)`, `group "g": storing rebalance event`} {
			if !strings.Contains(got, want) {
				t.Errorf("log %q lacks %q", got, want)
			}
		}
	})
}
