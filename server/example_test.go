package server_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/server"
)

// answerAll is a stand-in for the coordinator.
type answerAll struct{}

func (answerAll) Handle(_ context.Context, _ server.Client, req kmsg.Request) (kmsg.Response, error) {
	return req.ResponseKind(), nil
}

// A node listening on port 0 learns its port after Listen and only then
// advertises it, which is what `cohort serve --listen 127.0.0.1:0` needs.
func Example_portZero() {
	topo := server.SingleNode(server.Broker{NodeID: 0}, "my-cluster")
	srv, err := server.New(server.Config{
		Listen:   "127.0.0.1:0",
		Groups:   answerAll{},
		Topology: topo,
		Catalog:  catalog.New(catalog.Options{}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		log.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	p, _ := strconv.Atoi(port)
	topo.SetSelf(server.Broker{NodeID: 0, Host: host, Port: int32(p)})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	fmt.Println(topo.Self().Port != 0)
	cancel() // graceful shutdown
	fmt.Println(<-done)
	// Output:
	// true
	// <nil>
}
