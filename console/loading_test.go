package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store"
)

// heldLoad is a store whose Load of one partition waits until released:
// a coordinator over it keeps that partition loading for as long as the
// test says.
type heldLoad struct {
	store.Store
	p       int32
	release chan struct{}
}

func (h *heldLoad) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	if p == h.p {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Store.Load(ctx, p, fn)
}

// TestGroupsPageWhileTheOwnerLoads: the node that has just taken a
// coordinator partition over answers ListGroups COORDINATOR_LOAD_IN_PROGRESS
// until it has loaded it, with the groups and counts of its other
// partitions. The page counts and lists every other partition and names
// that one as not counted; before, the whole page was a 502 ("Listing the
// groups failed: COORDINATOR_LOAD_IN_PROGRESS"), on a cluster of real
// nodes right after a node left or joined. Once loaded, it is counted.
func TestGroupsPageWhileTheOwnerLoads(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 50
	m := newMovingCluster(t, 40)
	m.ownedBy(t)
	m.byBroker[0] = m.coordinator(t, func(p int32) bool { return p != m.moving }) // let it go
	held := &heldLoad{Store: m.st, p: m.moving, release: make(chan struct{})}
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	loading, err := coordinator.New(coordinator.Config{Partitions: movingParts, Group: gcfg, Store: held,
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), Owned: func(p int32) bool { return p == m.moving }})
	if err != nil {
		t.Fatal(err)
	}
	loading.Start()
	t.Cleanup(func() { loading.Close() })
	t.Cleanup(func() {
		select {
		case <-held.release:
		default:
			close(held.release)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lreq := kmsg.NewPtrListGroupsRequest()
	group.RequestListFilter(lreq, group.ListFilter{Limit: -1})
	testwait.For(t, 10*time.Second, "the new owner loading the partition", func() bool {
		resp, err := loading.Handle(ctx, group.Client{}, lreq)
		return err == nil && resp.(*kmsg.ListGroupsResponse).ErrorCode == kerr.CoordinatorLoadInProgress.Code
	})
	m.byBroker[1] = loading

	left := 40 - m.inMoving
	body := m.page(t, "")
	if want := fmt.Sprintf("%d of %d groups", left, left); !strings.HasPrefix(countOf(body), want) {
		t.Errorf("the page says %q, want %q (every group but the %d of the loading partition)", countOf(body), want+" …", m.inMoving)
	}
	if want := fmt.Sprintf("coordinator partition %d (of %d) are neither counted nor listed", m.moving, movingParts); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
	for _, id := range m.ids {
		inMoving := coordinator.PartitionFor(id, movingParts) == m.moving
		if listed := strings.Contains(body, ">"+id+"<"); listed == inMoving {
			t.Errorf("group %s (in the loading partition: %v) listed: %v", id, inMoving, listed)
		}
	}

	close(held.release)
	if err := loading.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	body = m.page(t, "")
	if got := countOf(body); !strings.HasPrefix(got, "40 of 40 groups") {
		t.Errorf("loaded: the page says %q, want %q", got, "40 of 40 groups …")
	}
	if strings.Contains(body, `id="uncounted"`) {
		t.Error("loaded: the page still names a partition as not counted")
	}
}
