package group

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A JoinGroup naming a pending member id together with an instance id is
// refused (Kafka: a pending member is never static) and logged, at most
// once a minute per shard, the next line counting those left out: the
// pending id stays, so a client repeating that request logged a warning
// (quoting its group id) at every request.
func TestPendingStaticJoinLogBounded(t *testing.T) {
	h := newH(t)
	var lines []string
	h.s.Logf = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	pending := func() string {
		r := h.joinResp(h.join("g", jo{}))
		expectCode(t, "first join", r.ErrorCode, ErrMemberIDRequired)
		return r.MemberID
	}
	id := pending()
	for range 100 {
		h.wantCode(h.join("g", jo{member: id, instance: "i"}), ErrUnknownServer)
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines logged for 100 refusals in the same minute", len(lines))
	}
	h.advance(time.Minute)
	id = pending()
	h.wantCode(h.join("g", jo{member: id, instance: "i"}), ErrUnknownServer)
	if len(lines) != 2 || !strings.Contains(lines[1], "(99 more refused since the last such line)") {
		t.Fatalf("after a minute: %q", lines)
	}
}
