package clients

// TestSessionTimeoutOutOfRange: each client's worker (examples/workdist)
// asks for a session timeout outside the node's bounds, once below the
// minimum and once above the maximum (the node's bounds are moved around
// the workers' bareSession). Kafka's coordinator refuses such a JoinGroup
// with INVALID_SESSION_TIMEOUT and the member never joins. For sessionWatch
// the test checks that cohort answers every JoinGroup of the worker with
// that error and nothing else, that the worker never gets partitions, that
// the group has no member at the end, that cohort logs no warning, and that
// the worker says so (an error line) and, if it gives up, exits with a
// failure status. It logs what the client did with the error (its error
// lines, whether it exited, how many JoinGroups it sent), which
// docs/compatibility.md describes per client.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/server"
)

// sessionWatch is how long each worker is watched.
const sessionWatch = 8 * time.Second

func TestSessionTimeoutOutOfRange(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own node
	bounds := []struct {
		name     string
		min, max time.Duration
	}{
		{"below-min", bareSession + time.Second, 30 * time.Minute},
		{"above-max", time.Second, bareSession - time.Second},
	}
	for _, c := range workdistClients {
		for _, bd := range bounds {
			t.Run(c.name+"/"+bd.name, func(t *testing.T) {
				t.Parallel()
				b := testbed.StartBareTuned(t, map[string]int32{bareTopic: barePartitions}, func(g *group.Config) {
					g.MinSessionTimeout, g.MaxSessionTimeout = bd.min, bd.max
				})
				grp := "session-" + c.name
				clientID := c.name + "-1"
				var mu sync.Mutex
				codes := map[int16]int{}
				b.OnAnswered(func(cl server.Client, req kmsg.Request, resp kmsg.Response) {
					if r, ok := resp.(*kmsg.JoinGroupResponse); ok && cl.ID == clientID {
						mu.Lock()
						codes[r.ErrorCode]++
						mu.Unlock()
					}
				})
				w := startWorker(t, surviving(c), b.Addr(), grp, clientID)
				began := time.Now()
				exited := ""
				select {
				case <-w.p.done:
					exited = fmt.Sprintf("exited after %v (%v)", time.Since(began).Round(time.Millisecond), w.p.err)
					if w.p.err == nil {
						// A supervisor (systemd's Restart=on-failure)
						// would take it for a clean stop.
						t.Errorf("%s exited with status 0, unasked, after the node refused its session timeout", clientID)
					}
				case <-time.After(sessionWatch):
					exited = "still running"
				}
				w.p.Close()

				mu.Lock()
				defer mu.Unlock()
				joins := b.Requests(clientID, kmsg.JoinGroup.Int16())
				t.Logf("%s, node session bounds [%v, %v], worker's session %v: %d JoinGroup requests in %v, %s; answers by error code %v",
					c.name, bd.min, bd.max, bareSession, joins, sessionWatch, exited, codes)
				if codes[group.ErrInvalidSessionTimeout] == 0 {
					t.Errorf("no JoinGroup of %s was answered INVALID_SESSION_TIMEOUT (answers by code: %v)", clientID, codes)
				}
				for code, n := range codes {
					if code != group.ErrInvalidSessionTimeout {
						t.Errorf("%d JoinGroup answers with error code %d, want only INVALID_SESSION_TIMEOUT (%d)", n, code, group.ErrInvalidSessionTimeout)
					}
				}
				w.mu.Lock()
				for _, e := range w.events {
					if e.kind == "assigned" && len(e.parts) > 0 {
						t.Errorf("%s was assigned %v with a session timeout the node refuses", clientID, e.parts)
					}
				}
				for line, n := range w.errs {
					t.Logf("%s error line ×%d: %s", clientID, n, line)
				}
				if len(w.errs) == 0 {
					t.Errorf("%s printed no error line: its user is not told why it never gets partitions", clientID)
				}
				w.mu.Unlock()
				cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ClientID("session-admin"))
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				described, err := kadm.NewClient(cl).DescribeGroups(ctx, grp)
				if err != nil {
					t.Fatal(err)
				}
				if g := described[grp]; len(g.Members) != 0 {
					t.Errorf("group %s has members %v (state %s) after refusing every join", grp, g.Members, g.State)
				}
				if warns := b.Warnings(); len(warns) > 0 {
					t.Errorf("cohort logged %d warnings or errors, first: %s", len(warns), warns[0])
				}
			})
		}
	}
}
