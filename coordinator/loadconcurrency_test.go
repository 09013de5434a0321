package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// countingLoads wraps memstore and records how many Loads run at once;
// each Load waits for a release so that overlapping loads do overlap.
type countingLoads struct {
	*memstore.Store
	mu      sync.Mutex
	now     int
	max     int
	started chan int32
	release chan struct{}
}

func (c *countingLoads) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
	c.started <- p
	<-c.release
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
	return c.Store.Load(ctx, p, fn)
}

// With LoadConcurrency 2, never more than two partitions load at once, and
// every partition still loads.
func TestLoadConcurrency(t *testing.T) {
	st := &countingLoads{Store: memstore.New(), started: make(chan int32, 16), release: make(chan struct{})}
	c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: st, Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), LoadConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	// Release a load only while two are in progress (or the last one):
	// the bound is reached, and a third must not start meanwhile.
	seen, running := map[int32]bool{}, 0
	for len(seen) < 8 || running > 0 {
		if running == 2 || (len(seen) == 8 && running > 0) {
			st.release <- struct{}{}
			running--
			continue
		}
		select {
		case p := <-st.started:
			seen[p] = true
			running++
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d partitions started loading", len(seen))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if st.max > 2 {
		t.Fatalf("%d loads at once, want at most 2", st.max)
	}
	if st.max < 2 {
		t.Fatalf("%d load at once: the bound of 2 was not used", st.max)
	}
}
