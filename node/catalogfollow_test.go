package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterCatalogNeverRollsBack: a node that creates topics one after
// another never loses one it already has: the etcd events of its own earlier
// writes, arriving after it stored a later one, must not roll its catalog
// back (a topic missing there for a moment has its offsets deleted).
func TestClusterCatalogNeverRollsBack(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ns := startCluster848(t, ec, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, ns[0].Addr()))
	cat := ns[0].Catalog()
	var created atomic.Int32 // topics t0 … t(created-1) exist
	lost := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n := created.Load()
			if n < 0 {
				return
			}
			for i := range n {
				if _, ok := cat.Lookup(fmt.Sprint("t", i)); !ok {
					select {
					case lost <- fmt.Sprint("t", i):
					default:
					}
					return
				}
			}
		}
	}()
	for i := range 60 {
		if r, err := adm.CreateTopics(ctx, 1, 1, nil, fmt.Sprint("t", i)); err != nil || r.Error() != nil {
			t.Fatalf("create t%d: %v %v", i, err, r.Error())
		}
		created.Store(int32(i + 1))
		select {
		case name := <-lost:
			t.Fatalf("node 1's catalog lost %s after creating t%d", name, i)
		default:
		}
	}
	created.Store(-1)
	<-done
	select {
	case name := <-lost:
		t.Fatalf("node 1's catalog lost %s", name)
	default:
	}
}
