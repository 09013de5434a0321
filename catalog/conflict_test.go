package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
)

// shared is a set of records several catalogs write with compare-and-swap,
// as cluster mode's etcd keys: each writer remembers, per key, the revision
// it last saw.
type shared struct {
	mu   sync.Mutex
	val  map[string][]byte
	rev  map[string]int64
	seen map[*Catalog]map[string]int64
}

func newShared() *shared {
	return &shared{val: map[string][]byte{}, rev: map[string]int64{}, seen: map[*Catalog]map[string]int64{}}
}

func (s *shared) saw(c *Catalog, key string) {
	if s.seen[c] == nil {
		s.seen[c] = map[string]int64{}
	}
	s.seen[c][key] = s.rev[key]
}

func (s *shared) read(c *Catalog, key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saw(c, key)
	return s.val[key]
}

// readAll returns every record, as a prefix read of etcd.
func (s *shared) readAll(c *Catalog) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.val {
		s.saw(c, k)
	}
	return maps.Clone(s.val)
}

func (s *shared) write(c *Catalog, key string, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev, ok := s.seen[c][key]; !ok || rev != s.rev[key] {
		s.saw(c, key)
		return &Conflict{Current: s.val[key]}
	}
	if val == nil {
		delete(s.val, key)
	} else {
		s.val[key] = val
	}
	s.rev[key]++
	s.saw(c, key)
	return nil
}

func sharedCatalogs(n int, removed func(i int, names []string)) ([]*Catalog, *shared, *shared) {
	return sharedCatalogsOpt(n, true, removed)
}

func sharedCatalogsOpt(n int, isShared bool, removed func(i int, names []string)) ([]*Catalog, *shared, *shared) {
	topics, groups := newShared(), newShared()
	cs := make([]*Catalog, n)
	for i := range cs {
		var c *Catalog
		c = New(Options{
			PersistTopic: func(k string, b []byte) error { return topics.write(c, k, b) },
			PersistGroup: func(g string, b []byte) error { return groups.write(c, g, b) },
			Shared:       isShared,
			Removed: func(names []string) {
				if removed != nil {
					removed(i, names)
				}
			},
		})
		cs[i] = c
	}
	return cs, topics, groups
}

func topicNames(c *Catalog) []string {
	var names []string
	for _, t := range c.List() {
		names = append(names, t.Name)
	}
	return names
}

// TestConflictAppliesChangeAgain: a catalog whose write meets a newer
// record installs it and applies its change to it, so changes made through
// several catalogs sharing one record are all kept.
func TestConflictAppliesChangeAgain(t *testing.T) {
	cs, topics, groups := sharedCatalogs(3, nil)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if _, err := c.Create(fmt.Sprintf("c%d-t%d", i, j), 1, nil); err != nil {
					t.Errorf("create: %v", err)
				}
				if j < 5 {
					name := fmt.Sprintf("c%d-k%d", i, j)
					if err := c.UpdateGroupConfig("g", false, func(cur map[string]string) (map[string]string, error) {
						if cur == nil {
							cur = map[string]string{}
						}
						cur[name] = "v"
						return cur, nil
					}); err != nil {
						t.Errorf("group config: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range cs {
		if err := c.SyncTopics(func() (map[string][]byte, error) { return topics.readAll(c), nil }); err != nil {
			t.Fatal(err)
		}
		if err := c.SyncGroupConfig("g", func() ([]byte, error) { return groups.read(c, "g"), nil }); err != nil {
			t.Fatal(err)
		}
		if got := len(c.List()); got != 60 {
			t.Errorf("a catalog has %d topics, want 60: %v", got, topicNames(c))
		}
		if got := len(c.GroupConfig("g")); got != 15 {
			t.Errorf("group g has %d configs, want 15: %v", got, c.GroupConfig("g"))
		}
	}
}

// TestConflictChecksAgain: the change is checked again against the newer
// record: a topic created, deleted or grown through another catalog in
// between makes the operation fail as it would have there, and a topic the
// newer record lacks is reported as removed. A catalog learns of the other
// topics through SyncTopic (cluster mode's watch), not through a conflict.
func TestConflictChecksAgain(t *testing.T) {
	var removed []string
	cs, topics, _ := sharedCatalogs(2, func(i int, names []string) {
		if i == 0 {
			removed = append(removed, names...)
		}
	})
	a, b := cs[0], cs[1]
	if _, err := a.Create("x", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create("y", 2, nil); err != nil {
		t.Fatal(err)
	}
	// b has never read x's record: its first write conflicts, and it
	// learns of x.
	if _, err := b.Create("x", 1, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("b creating x (already created through a) = %v, want ErrExists", err)
	}
	if _, err := b.AddPartitions("x", 4, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete("y"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b deleting y, which it has not seen = %v, want ErrNotFound", err)
	}
	sync := func(c *Catalog, name string) {
		t.Helper()
		if err := c.SyncTopic(TopicKey(name), func() ([]byte, error) { return topics.read(c, TopicKey(name)), nil }); err != nil {
			t.Fatal(err)
		}
	}
	sync(b, "y")
	if err := b.Delete("y"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddPartitions("x", 3, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("a growing x to 3 after b grew it to 4 = %v, want ErrInvalidPartitions", err)
	}
	if tp, _ := a.Lookup("x"); tp.Partitions != 4 {
		t.Fatalf("a's x has %d partitions, want b's 4", tp.Partitions)
	}
	if len(removed) != 0 {
		t.Fatalf("a was told of removed topics %v before it synced y", removed)
	}
	sync(a, "y")
	if !slices.Equal(removed, []string{"y"}) {
		t.Fatalf("a was told of removed topics %v, want [y] (deleted through b)", removed)
	}
	removed = nil
	if err := b.Delete("x"); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleting x after b did = %v, want ErrNotFound", err)
	}
	if !slices.Equal(removed, []string{"x"}) {
		t.Fatalf("a was told of removed topics %v, want [x]", removed)
	}

	if err := a.SetGroupConfig("g", map[string]string{"k": "1"}); err != nil {
		t.Fatal(err)
	}
	// b's first try works on what b has (nothing); its write conflicts,
	// and the second try sees a's k=1 and removes it.
	tries := 0
	if err := b.UpdateGroupConfig("g", false, func(cur map[string]string) (map[string]string, error) {
		tries++
		if cur["k"] != "1" {
			return map[string]string{"k": "stale"}, nil
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if tries != 2 || b.GroupConfig("g") != nil {
		t.Fatalf("b's update ran %d times and left %v, want 2 times and nothing", tries, b.GroupConfig("g"))
	}
	if err := a.UpdateGroupConfig("g", false, func(cur map[string]string) (map[string]string, error) {
		if cur != nil { // a's first try, on what it had
			cur["j"] = "stale"
			return cur, nil
		}
		return map[string]string{"j": "2"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := a.GroupConfig("g"); !maps.Equal(got, map[string]string{"j": "2"}) {
		t.Fatalf("a's configs of g = %v", got)
	}
}

// TestConflictsBounded: a writer that always loses gives up after
// MaxConflicts, with ErrPersist, keeping the newest record of the key it saw;
// a conflict over one topic's record never touches the other topics.
func TestConflictsBounded(t *testing.T) {
	calls := 0
	newer := New(Options{})
	if _, err := newer.Create("mine", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := New(Options{PersistTopic: func(key string, _ []byte) error {
		calls++
		if key != TopicKey("mine") {
			t.Errorf("PersistTopic(%q), want mine's key", key)
		}
		// Another writer grows the topic each time.
		if _, err := newer.AddPartitions("mine", int32(calls+1), nil); err != nil {
			return err
		}
		return &Conflict{Current: newer.TopicRecords()[TopicKey("mine")]}
	}})
	if err := c.RestoreTopics(newer.TopicRecords()); err != nil {
		t.Fatal(err)
	}
	_, err := c.AddPartitions("mine", 100, nil)
	if !errors.Is(err, ErrPersist) || !errors.As(err, new(*Conflict)) {
		t.Fatalf("AddPartitions = %v, want ErrPersist wrapping a Conflict", err)
	}
	if calls != MaxConflicts+1 {
		t.Fatalf("PersistTopic called %d times, want %d", calls, MaxConflicts+1)
	}
	if tp, _ := c.Lookup("mine"); tp.Partitions != int32(MaxConflicts+1) {
		t.Fatalf("mine has %d partitions, want the %d of the newest record installed", tp.Partitions, MaxConflicts+1)
	}

	first := true
	d := New(Options{PersistTopic: func(string, []byte) error {
		if first {
			first = false
			return &Conflict{} // no record stored for the key
		}
		return nil
	}})
	if err := d.RestoreTopics(newer.TopicRecords()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("yours", 1, nil); err != nil {
		t.Fatal(err)
	}
	if got := d.Len(); got != newer.Len()+1 {
		t.Fatalf("catalog has %d topics after a conflict with no record, want %d", got, newer.Len()+1)
	}
}

// TestConflictCollidingNames: two catalogs creating names Kafka considers
// colliding ("a.b" and "a_b") write the same record: the second learns of
// the first and is refused, as one catalog would refuse it.
func TestConflictCollidingNames(t *testing.T) {
	cs, topics, _ := sharedCatalogs(2, nil)
	if _, err := cs[0].Create("a.b", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[1].Create("a_b", 1, nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("creating a_b after a.b through another catalog = %v, want ErrInvalidName", err)
	}
	if got := topics.readAll(cs[1]); len(got) != 1 {
		t.Fatalf("%d records stored, want 1", len(got))
	}
	if _, ok := cs[1].Lookup("a.b"); !ok {
		t.Fatal("the refused catalog did not learn of a.b")
	}
}

// TestSharedNoOpStillWrites: with Shared, a config change that changes
// nothing in a catalog's view that is behind the store is still written, so
// it does not report success for a value another writer has since replaced.
func TestSharedNoOpStillWrites(t *testing.T) {
	for _, isShared := range []bool{true, false} {
		cs, _, groups := sharedCatalogsOpt(2, isShared, nil)
		a, b := cs[0], cs[1]
		set := func(c *Catalog, v string) {
			t.Helper()
			if err := c.SetGroupConfig("g", map[string]string{"k": v}); err != nil {
				t.Fatal(err)
			}
		}
		set(a, "45000")
		set(b, "50000") // a has not seen it
		set(a, "45000") // a no-op in a's view
		got, err := decodeGroup("g", groups.read(a, "g"))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"k": "45000"}; isShared && !maps.Equal(got, want) {
			t.Fatalf("shared: the store holds %v after a's last change succeeded, want %v", got, want)
		} else if !isShared && got["k"] != "50000" {
			t.Fatalf("not shared: the store holds %v; the no-op should not have been written", got)
		}
	}
}
