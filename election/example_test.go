package election_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cohort-dev/cohort/election"
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

// One candidate becomes the writer and writes through a fence with its token.
func ExampleStart() {
	n := startExampleNode()
	defer n.Close()

	var fence election.Fence
	wrote := make(chan struct{})
	e, err := election.Start(election.Config{Member: member.Config{
		Brokers: []string{n.Addr()}, Group: "example-writers", SessionTimeout: 6 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}, func(ctx context.Context, token int32) {
		if err := fence.Admit(token); err == nil {
			fmt.Println("wrote with token", token)
		}
		close(wrote)
		<-ctx.Done()
	})
	if err != nil {
		panic(err)
	}
	<-wrote
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.Close(ctx)
	// Output: wrote with token 1
}

// A resource refuses writes from a writer that was replaced.
func ExampleFence() {
	var f election.Fence
	fmt.Println(f.Admit(4)) // writer of generation 4
	fmt.Println(f.Admit(7)) // its successor
	fmt.Println(f.Admit(4)) // the old writer, back from a pause
	// Output:
	// <nil>
	// <nil>
	// election: stale fencing token 4 (a writer with token 7 has written)
}
