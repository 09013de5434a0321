package member_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// startExampleNode runs a cohort node for the examples.
func startExampleNode() *node.Node {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n, err := node.Start(node.Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	return n
}

// A member of a group with its own protocol: the leader hands every member
// a greeting, and the member reports its generation.
func ExampleStart() {
	n := startExampleNode()
	defer n.Close()

	done := make(chan struct{})
	m, err := member.Start(member.Config{
		Brokers:      []string{n.Addr()},
		Group:        "example",
		ProtocolType: "greeting",
		Protocols:    func() []member.Protocol { return []member.Protocol{{Name: "v1", Metadata: []byte("alice")}} },
		Assign: func(_ context.Context, g member.Generation) (map[string][]byte, error) {
			out := map[string][]byte{}
			for _, mm := range g.Members {
				out[mm.ID] = []byte("hello " + string(mm.Metadata))
			}
			return out, nil
		},
		Assigned: func(ctx context.Context, g member.Generation) {
			fmt.Printf("generation %d, leader %v: %s\n", g.ID, g.Leader, g.Assignment)
			close(done)
		},
		SessionTimeout: 6 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.Close(ctx)
	// Output: generation 1, leader true: hello alice
}
