package node

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCloseWithAnUnreadAnswerSucceeds: a client that never reads its
// answer (stopped, or far away behind a full window) holds its connection in
// a write until Close's grace for connections ends and closes it. That is
// the client's loss, not a failure of the node: Close returns nil, so that
// cohort serve exits 0 on SIGTERM. It returned the grace's "context
// deadline exceeded" (taking the place of any error of the store's close),
// and cohort serve exited 1 with that line.
func TestCloseWithAnUnreadAnswerSucceeds(t *testing.T) {
	defer func(d time.Duration) { connGrace = d }(connGrace)
	connGrace = 200 * time.Millisecond
	n := startNode(t, nil)
	a, b := net.Pipe()
	defer a.Close()
	if err := n.ServeInternal(b); err != nil {
		t.Fatal(err)
	}
	// A pipe has no buffer: the node's answer waits for a read that never
	// comes.
	(&rawSASL{nc: a}).send(t, kmsg.NewPtrApiVersionsRequest())
	if err := n.Close(); err != nil {
		t.Fatalf("Close with a connection that does not read its answer: %v", err)
	}
}
