package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestValidateName(t *testing.T) {
	good := []string{"a", "orders", "a.b_c-D9", strings.Repeat("x", 249), "..."}
	for _, n := range good {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	bad := []string{"", ".", "..", strings.Repeat("x", 250), "a b", "a/b", "é", "a\x00"}
	for _, n := range bad {
		if err := ValidateName(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", n, err)
		}
	}
}

func TestCreateLookupListDelete(t *testing.T) {
	c := New(Options{})
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if _, err := c.Create(n, 3, nil); err != nil {
			t.Fatalf("Create(%q): %v", n, err)
		}
	}
	var names []string
	for _, tp := range c.List() {
		names = append(names, tp.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,mid,zeta" {
		t.Fatalf("List order = %s, want alpha,mid,zeta", got)
	}
	tp, ok := c.Lookup("mid")
	if !ok || tp.Partitions != 3 || tp.ID != TopicID("mid") {
		t.Fatalf("Lookup(mid) = %+v, %v", tp, ok)
	}
	if got, ok := c.LookupID(TopicID("zeta")); !ok || got.Name != "zeta" {
		t.Fatalf("LookupID(zeta) = %+v, %v", got, ok)
	}
	if _, err := c.Create("mid", 1, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Create = %v, want ErrExists", err)
	}
	if err := c.Delete("mid"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Lookup("mid"); ok {
		t.Fatal("mid still present after Delete")
	}
	if _, ok := c.LookupID(TopicID("mid")); ok {
		t.Fatal("mid still found by ID after Delete")
	}
	if err := c.Delete("mid"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
}

func TestCreateRejects(t *testing.T) {
	c := New(Options{})
	if _, err := c.Create("a.b", 1, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		parts int32
		racks [][]string
		want  error
	}{
		{"x", 0, nil, ErrInvalidPartitions},
		{"x", -1, nil, ErrInvalidPartitions},
		{"x", MaxPartitions + 1, nil, ErrInvalidPartitions},
		{"bad name", 1, nil, ErrInvalidName},
		{"a_b", 1, nil, ErrInvalidName}, // collides with a.b
		{"x", 2, [][]string{{"r1"}}, ErrInvalidRacks},
		{"x", 1, [][]string{{""}}, ErrInvalidRacks},
	}
	for _, tc := range cases {
		if err := c.ValidateCreate(tc.name, tc.parts, tc.racks); !errors.Is(err, tc.want) {
			t.Errorf("ValidateCreate(%q, %d) = %v, want %v", tc.name, tc.parts, err, tc.want)
		}
		if _, err := c.Create(tc.name, tc.parts, tc.racks); !errors.Is(err, tc.want) {
			t.Errorf("Create(%q, %d) = %v, want %v", tc.name, tc.parts, err, tc.want)
		}
	}
	if c.Len() != 1 {
		t.Fatalf("rejected creates changed the catalog: %d topics", c.Len())
	}
}

func TestAddPartitions(t *testing.T) {
	c := New(Options{})
	if _, err := c.Create("t", 2, [][]string{{"r1"}, {"r2"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int32{2, 1, 0, -3} {
		if _, err := c.AddPartitions("t", n, nil); !errors.Is(err, ErrInvalidPartitions) {
			t.Errorf("AddPartitions(t, %d) = %v, want ErrInvalidPartitions", n, err)
		}
	}
	if _, err := c.AddPartitions("nope", 5, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddPartitions(nope) = %v, want ErrNotFound", err)
	}
	if err := c.ValidateAddPartitions("t", 4, [][]string{{"r3"}}); !errors.Is(err, ErrInvalidRacks) {
		t.Errorf("ValidateAddPartitions with short racks = %v, want ErrInvalidRacks", err)
	}
	if err := c.ValidateAddPartitions("t", 4, nil); err != nil {
		t.Fatal(err)
	}
	if tp, _ := c.Lookup("t"); tp.Partitions != 2 {
		t.Fatalf("ValidateAddPartitions changed the topic: %d partitions", tp.Partitions)
	}
	tp, err := c.AddPartitions("t", 4, [][]string{{"r3"}, nil})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Partitions != 4 || fmt.Sprint(tp.Racks) != "[[r1] [r2] [r3] []]" {
		t.Fatalf("after AddPartitions: %+v", tp)
	}
	// A topic without racks stays without racks when none are given.
	if _, err := c.Create("plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	if tp, err := c.AddPartitions("plain", 3, nil); err != nil || tp.Racks != nil {
		t.Fatalf("AddPartitions(plain) = %+v, %v", tp, err)
	}
}

func TestReturnedTopicsAreCopies(t *testing.T) {
	c := New(Options{})
	racks := [][]string{{"r1"}}
	if _, err := c.Create("t", 1, racks); err != nil {
		t.Fatal(err)
	}
	racks[0][0] = "changed"
	tp, _ := c.Lookup("t")
	tp.Racks[0][0] = "changed too"
	if got, _ := c.Lookup("t"); got.Racks[0][0] != "r1" {
		t.Fatalf("catalog shares memory with callers: rack = %q", got.Racks[0][0])
	}
}

func TestTopicIDDistinctAndNonZero(t *testing.T) {
	seen := map[[16]byte]string{}
	for i := 0; i < 2000; i++ {
		n := fmt.Sprintf("topic-%d", i)
		id := TopicID(n)
		if id == ([16]byte{}) || id == ([16]byte{15: 1}) {
			t.Fatalf("TopicID(%q) is reserved: %x", n, id)
		}
		if prev, ok := seen[id]; ok {
			t.Fatalf("TopicID collision between %q and %q", prev, n)
		}
		seen[id] = n
		if TopicID(n) != id {
			t.Fatalf("TopicID(%q) not deterministic", n)
		}
	}
}

// TestPersistHook: each change persists the one record it touches (keyed by
// TopicKey, nil for a deletion) before it is visible; a failed persist
// abandons the change; the records restore the catalog.
func TestPersistHook(t *testing.T) {
	records := map[string][]byte{}
	calls := 0
	fail := false
	c := New(Options{PersistTopic: func(key string, b []byte) error {
		if fail {
			return errors.New("disk full")
		}
		calls++
		if b == nil {
			delete(records, key)
		} else {
			records[key] = b
		}
		return nil
	}})
	if _, err := c.Create("a.x", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("b", 1, [][]string{{"r1", "r2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddPartitions("b", 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := records["a_x"]; !ok || len(records) != 2 {
		t.Fatalf("records under keys %v, want a_x and b", slices.Collect(maps.Keys(records)))
	}
	fail = true
	if _, err := c.Create("c", 1, nil); !errors.Is(err, ErrPersist) {
		t.Fatalf("Create with failing PersistTopic = %v, want ErrPersist", err)
	}
	if _, ok := c.Lookup("c"); ok {
		t.Fatal("a change whose persistence failed became visible")
	}
	if err := c.Delete("a.x"); !errors.Is(err, ErrPersist) {
		t.Fatalf("Delete with failing PersistTopic = %v, want ErrPersist", err)
	}
	if _, ok := c.Lookup("a.x"); !ok {
		t.Fatal("a failed Delete removed the topic")
	}
	fail = false
	if err := c.Delete("a.x"); err != nil {
		t.Fatal(err)
	}
	if calls != 4 || len(records) != 1 {
		t.Fatalf("PersistTopic called %d times successfully leaving %d records, want 4 and 1", calls, len(records))
	}
	// The records restore the state as of the last change.
	r := New(Options{})
	if _, err := r.Create("gone", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.RestoreTopics(records); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.List()) != fmt.Sprint(c.List()) {
		t.Fatalf("restored %v, want %v", r.List(), c.List())
	}
	if !maps.EqualFunc(r.TopicRecords(), records, bytes.Equal) {
		t.Fatal("TopicRecords differs from the records persisted")
	}
}

// TestRecordSizeIndependentOfCatalog: a change persists one topic's record,
// whatever the number of topics (the whole catalog used to be one record,
// rewritten by every change: quadratic bytes for a bulk creation, and a
// size limit in etcd).
func TestRecordSizeIndependentOfCatalog(t *testing.T) {
	largest := 0
	c := New(Options{PersistTopic: func(_ string, b []byte) error {
		largest = max(largest, len(b))
		return nil
	}})
	for i := range 2000 {
		if _, err := c.Create(fmt.Sprintf("topic-%05d", i), 12, nil); err != nil {
			t.Fatal(err)
		}
	}
	if largest > 200 {
		t.Fatalf("a record of %d bytes for a 12-partition topic among 2000", largest)
	}
}

// TestRestoreTopicsRejects: records that are damaged, stored under another
// topic's key, hold several topics or collide leave the catalog unchanged.
func TestRestoreTopicsRejects(t *testing.T) {
	src := New(Options{})
	for _, n := range []string{"a", "b.c"} {
		if _, err := src.Create(n, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	good := src.TopicRecords()
	two := src.Snapshot()
	bad := []map[string][]byte{
		{"a": []byte("{")},
		{"x": good["a"]},     // under another key
		{"b.c": good["b_c"]}, // the name, not the key
		{"a": two},           // two topics in one record
		{"a": []byte(`{"version":1,"topics":[]}`)}, // no topic
		{"a": []byte(`{"version":2,"topics":[]}`)},
	}
	c := New(Options{})
	if _, err := c.Create("keep", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range bad {
		if err := c.RestoreTopics(r); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("RestoreTopics(%q) = %v, want ErrBadSnapshot", r, err)
		}
	}
	if _, ok := c.Lookup("keep"); !ok || c.Len() != 1 {
		t.Fatal("a rejected RestoreTopics changed the catalog")
	}
	if err := c.RestoreTopics(good); err != nil || c.Len() != 2 {
		t.Fatalf("RestoreTopics(good) = %v, %d topics", err, c.Len())
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	c := New(Options{})
	c.Create("x.y", 3, [][]string{{"a"}, nil, {"b", "c"}})
	c.Create("plain", 7, nil)
	r := New(Options{})
	r.Create("will-be-replaced", 1, nil)
	if err := r.Restore(c.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.List()) != fmt.Sprint(c.List()) {
		t.Fatalf("restored %v, want %v", r.List(), c.List())
	}
	if _, ok := r.LookupID(TopicID("plain")); !ok {
		t.Fatal("restored catalog lost its ID index")
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	id := func(n string) string { x := TopicID(n); return fmt.Sprintf("%x", x[:]) }
	bad := []string{
		``, `{`, `[]`, `{"version":2,"topics":[]}`,
		`{"version":1,"topics":[{"name":"","id":"` + id("a") + `","partitions":1}]}`,
		`{"version":1,"topics":[{"name":"a","id":"` + id("a") + `","partitions":0}]}`,
		`{"version":1,"topics":[{"name":"a","id":"zz","partitions":1}]}`,
		`{"version":1,"topics":[{"name":"a","id":"00000000000000000000000000000000","partitions":1}]}`,
		`{"version":1,"topics":[{"name":"a","id":"` + id("a") + `","partitions":1},{"name":"a","id":"` + id("b") + `","partitions":1}]}`,
		`{"version":1,"topics":[{"name":"a","id":"` + id("a") + `","partitions":1},{"name":"b","id":"` + id("a") + `","partitions":1}]}`,
		`{"version":1,"topics":[{"name":"a","id":"` + id("a") + `","partitions":2,"racks":[["r"]]}]}`,
	}
	c := New(Options{})
	c.Create("keep", 1, nil)
	for _, s := range bad {
		if err := c.Restore([]byte(s)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("Restore(%s) = %v, want ErrBadSnapshot", s, err)
		}
	}
	if _, ok := c.Lookup("keep"); !ok || c.Len() != 1 {
		t.Fatal("a rejected Restore changed the catalog")
	}
}

func TestConcurrentUse(t *testing.T) {
	c := New(Options{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := fmt.Sprintf("w%d-%d", w, i)
				if _, err := c.Create(n, 1, nil); err != nil {
					t.Error(err)
					return
				}
				c.List()
				c.Range(func(*Topic) bool { return true })
				if i%2 == 0 {
					if err := c.Delete(n); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() != 400 {
		t.Fatalf("Len = %d, want 400", c.Len())
	}
}

func FuzzRestore(f *testing.F) {
	c := New(Options{})
	c.Create("x.y", 3, [][]string{{"a"}, nil, {"b"}})
	f.Add(c.Snapshot())
	f.Add([]byte(`{"version":1,"topics":null}`))
	f.Add(c.TopicRecords()[TopicKey("x.y")])
	f.Fuzz(func(t *testing.T, data []byte) {
		// As one topic's record: taken whole or refused, never a panic.
		one := New(Options{})
		if err := one.SyncTopic("x_y", func() ([]byte, error) { return data, nil }); err == nil && one.Len() > 1 {
			t.Fatalf("one record gave %d topics", one.Len())
		}
		r := New(Options{})
		if err := r.Restore(data); err != nil {
			return
		}
		// Its topics' records restore the same catalog.
		per := New(Options{})
		if err := per.RestoreTopics(r.TopicRecords()); err != nil {
			t.Fatalf("restoring an accepted catalog's per-topic records failed: %v", err)
		}
		if fmt.Sprint(per.List()) != fmt.Sprint(r.List()) {
			t.Fatal("per-topic records changed the catalog")
		}
		// Whatever was accepted must survive a round trip unchanged.
		again := New(Options{})
		if err := again.Restore(r.Snapshot()); err != nil {
			t.Fatalf("re-restoring an accepted snapshot failed: %v", err)
		}
		if fmt.Sprint(again.List()) != fmt.Sprint(r.List()) {
			t.Fatal("snapshot round trip changed the catalog")
		}
	})
}

// TestVersionChangesWithTopics: Version moves on every create, grow and
// delete (consumer groups re-read their subscribed topics then) and not on
// a refused change.
func TestVersionChangesWithTopics(t *testing.T) {
	c := New(Options{})
	v0 := c.Version()
	if _, err := c.Create("a", 1, nil); err != nil {
		t.Fatal(err)
	}
	v1 := c.Version()
	if _, err := c.Create("a", 1, nil); err == nil {
		t.Fatal("duplicate create accepted")
	}
	if c.Version() != v1 {
		t.Fatal("a refused create changed the version")
	}
	if _, err := c.AddPartitions("a", 3, nil); err != nil {
		t.Fatal(err)
	}
	v2 := c.Version()
	if err := c.Delete("a"); err != nil {
		t.Fatal(err)
	}
	v3 := c.Version()
	if !(v0 < v1 && v1 < v2 && v2 < v3) {
		t.Fatalf("versions %d %d %d %d do not grow with each change", v0, v1, v2, v3)
	}
}

// TestRemovedHook: Options.Removed hears of every topic a change took away,
// by a Delete or a Restore that lacks it; not of topics created, grown or
// kept, and not of a failed Delete.
func TestRemovedHook(t *testing.T) {
	var got [][]string
	c := New(Options{Removed: func(names []string) { got = append(got, names) }})
	for _, n := range []string{"a", "b", "c"} {
		if _, err := c.Create(n, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AddPartitions("a", 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("b"); err == nil {
		t.Fatal("deleted twice")
	}
	// Another node's catalog: "a" kept, "c" deleted, "d" new.
	other := New(Options{})
	if err := other.Restore(c.Snapshot()); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return other.Delete("c") },
		func() error { _, err := other.Create("d", 1, nil); return err },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Restore(other.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(other.Snapshot()); err != nil { // nothing removed this time
		t.Fatal(err)
	}
	if want := [][]string{{"b"}, {"c"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("removed %q, want %q", got, want)
	}
}
