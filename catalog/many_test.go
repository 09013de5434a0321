package catalog

import (
	"errors"
	"fmt"
	"testing"
)

// TestCreateMany: each topic is checked against the catalog and the ones
// created before it in the same call, persisted in order, and answered on
// its own (a name taken, a name twice, a failed write: the others are
// created); readers see the topics once a batch is done, in one new view
// per batch of createBatch topics.
func TestCreateMany(t *testing.T) {
	var order []string
	failKey := ""
	c := New(Options{PersistTopic: func(key string, b []byte) error {
		if key == failKey {
			return errors.New("disk full")
		}
		order = append(order, key)
		return nil
	}})
	if _, err := c.Create("old", 1, nil); err != nil {
		t.Fatal(err)
	}
	v0 := c.Version()
	failKey = "broken"
	errs := c.CreateMany([]NewTopic{
		{Name: "a", Partitions: 2},
		{Name: "old", Partitions: 1},
		{Name: "a", Partitions: 3},
		{Name: "a_", Partitions: 1},
		{Name: "a.", Partitions: 1}, // collides with a_ (one record)
		{Name: "broken", Partitions: 1},
		{Name: "bad/name", Partitions: 1},
		{Name: "z", Partitions: 0},
		{Name: "b", Partitions: 4, Racks: [][]string{{"r1"}, {"r2"}, nil, {"r1"}}},
	})
	want := []error{nil, ErrExists, ErrExists, nil, ErrInvalidName, ErrPersist, ErrInvalidName, ErrInvalidPartitions, nil}
	for i, w := range want {
		if w == nil && errs[i] != nil || w != nil && !errors.Is(errs[i], w) {
			t.Errorf("topic %d: %v, want %v", i, errs[i], w)
		}
	}
	if fmt.Sprint(order) != "[old a a_ b]" {
		t.Errorf("persisted %v, want old, a, a_, b in order", order)
	}
	if v := c.Version(); v != v0+1 {
		t.Errorf("version %d after one batch, want %d: one new view", v, v0+1)
	}
	for _, name := range []string{"a", "a_", "b", "old"} {
		if _, ok := c.Lookup(name); !ok {
			t.Errorf("%s missing", name)
		}
	}
	if b, _ := c.Lookup("b"); b.Partitions != 4 || len(b.Racks) != 4 || b.Racks[1][0] != "r2" {
		t.Errorf("b = %+v", b)
	}
	if c.Len() != 4 {
		t.Errorf("%d topics, want 4", c.Len())
	}

	// More than a batch: one view per batch, every topic there.
	many := make([]NewTopic, 2*createBatch+1)
	for i := range many {
		many[i] = NewTopic{Name: fmt.Sprintf("t%05d", i), Partitions: 1}
	}
	v1 := c.Version()
	for i, err := range c.CreateMany(many) {
		if err != nil {
			t.Fatalf("topic %d: %v", i, err)
		}
	}
	if v := c.Version(); v != v1+3 {
		t.Errorf("version %d after %d topics, want %d (three batches)", v, len(many), v1+3)
	}
	if c.Len() != 4+len(many) {
		t.Errorf("%d topics, want %d", c.Len(), 4+len(many))
	}
	if c.CreateMany(nil) != nil && len(c.CreateMany(nil)) != 0 {
		t.Error("CreateMany(nil) answered something")
	}
}

// TestCreateManyConflict: in cluster mode a topic's record may have been
// written by another node; CreateMany takes the stored record, checks the
// topic again against it, and goes on with the others.
func TestCreateManyConflict(t *testing.T) {
	other := New(Options{})
	if _, err := other.Create("taken", 3, nil); err != nil {
		t.Fatal(err)
	}
	stored := other.TopicRecords()["taken"]
	accepted := 0
	c := New(Options{Shared: true, PersistTopic: func(key string, b []byte) error {
		if key == "taken" {
			return &Conflict{Current: stored, Accepted: func() { accepted++ }}
		}
		return nil
	}})
	errs := c.CreateMany([]NewTopic{{Name: "x", Partitions: 1}, {Name: "taken", Partitions: 1}, {Name: "y", Partitions: 1}})
	if errs[0] != nil || !errors.Is(errs[1], ErrExists) || errs[2] != nil || accepted != 1 {
		t.Fatalf("errors %v, accepted %d; want x and y created, taken refused as existing after one conflict", errs, accepted)
	}
	if tp, ok := c.Lookup("taken"); !ok || tp.Partitions != 3 {
		t.Fatalf("the stored record was not installed: %+v %v", tp, ok)
	}
}

// TestMaxTotalPartitions: creating or growing past the bound is refused
// with ErrLimit (validation says so too); deleting frees room; topics
// already stored are restored whatever their number.
func TestMaxTotalPartitions(t *testing.T) {
	c := New(Options{MaxTotalPartitions: 10})
	if _, err := c.Create("a", 6, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("b", 5, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("create past the bound: %v", err)
	}
	if err := c.ValidateCreate("b", 5, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("validate past the bound: %v", err)
	}
	if errs := c.CreateMany([]NewTopic{{Name: "b", Partitions: 4}, {Name: "c", Partitions: 1}}); errs[0] != nil || !errors.Is(errs[1], ErrLimit) {
		t.Fatalf("CreateMany up to the bound: %v", errs)
	}
	if _, err := c.AddPartitions("a", 7, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("grow past the bound: %v", err)
	}
	if err := c.ValidateAddPartitions("a", 7, nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("validate grow past the bound: %v", err)
	}
	if err := c.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddPartitions("a", 10, nil); err != nil {
		t.Fatalf("grow to the bound after a delete: %v", err)
	}
	big := New(Options{})
	for i := range 3 {
		if _, err := big.Create(fmt.Sprintf("t%d", i), 5, nil); err != nil {
			t.Fatal(err)
		}
	}
	small := New(Options{MaxTotalPartitions: 10})
	if err := small.RestoreTopics(big.TopicRecords()); err != nil || small.Len() != 3 {
		t.Fatalf("restore of 15 partitions under a bound of 10: %v, %d topics", err, small.Len())
	}
}

// TestValidateManyAgreesWithCreateMany: a validation answers what the same
// creation would, topic for topic (names and colliding names listed before,
// the partitions of the topics before against the bound), and creates
// nothing.
func TestValidateManyAgreesWithCreateMany(t *testing.T) {
	topics := []NewTopic{
		{Name: "a", Partitions: 4},
		{Name: "old", Partitions: 1},
		{Name: "a", Partitions: 1},
		{Name: "x_y", Partitions: 1},
		{Name: "x.y", Partitions: 1},
		{Name: "big", Partitions: 5}, // 2 + 4 + 1 + 5 > 10
		{Name: "bad/name", Partitions: 1},
		{Name: "z", Partitions: 0},
		{Name: "small", Partitions: 3},
		{Name: "r", Partitions: 2, Racks: [][]string{{"r1"}}},
	}
	fresh := func() *Catalog {
		c := New(Options{MaxTotalPartitions: 10})
		if _, err := c.Create("old", 2, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := fresh()
	v0 := c.Version()
	validated := c.ValidateMany(topics)
	if c.Version() != v0 || c.Len() != 1 {
		t.Fatalf("validation changed the catalog: version %d → %d, %d topics", v0, c.Version(), c.Len())
	}
	created := fresh().CreateMany(topics)
	for i := range topics {
		if fmt.Sprint(validated[i]) != fmt.Sprint(created[i]) {
			t.Errorf("topic %d (%s): validated %v, created %v", i, topics[i].Name, validated[i], created[i])
		}
	}
	if !errors.Is(validated[5], ErrLimit) || validated[8] != nil {
		t.Errorf("big: %v (want the limit), small: %v (want nil)", validated[5], validated[8])
	}
}
