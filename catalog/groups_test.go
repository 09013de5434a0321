package catalog

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Group configs are persisted in their own snapshot, survive a round trip,
// leave the topics' snapshot and Version alone, and are removed by an empty
// set.
func TestGroupConfigs(t *testing.T) {
	var topics, groups []byte
	c := New(Options{Persist: func(b []byte) error { topics = b; return nil }, PersistGroups: func(b []byte) error { groups = b; return nil }})
	if _, err := c.Create("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	tv, topicsBefore := c.Version(), string(topics)
	gv := c.GroupConfigsVersion()
	if err := c.SetGroupConfig("g", map[string]string{"consumer.session.timeout.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	if c.Version() != tv || string(topics) != topicsBefore {
		t.Fatal("a group config change touched the topics' version or snapshot")
	}
	if c.GroupConfigsVersion() == gv || !strings.Contains(string(groups), `"consumer.session.timeout.ms":"60000"`) {
		t.Fatalf("group configs version %d (was %d), snapshot %s", c.GroupConfigsVersion(), gv, groups)
	}
	if v, ok := c.GroupConfigValue("g", "consumer.session.timeout.ms"); !ok || v != "60000" {
		t.Fatalf("value %q %v", v, ok)
	}
	if _, ok := c.GroupConfigValue("h", "consumer.session.timeout.ms"); ok {
		t.Fatal("another group has g's config")
	}
	got := c.GroupConfig("g")
	got["x"] = "changed" // a copy
	if _, ok := c.GroupConfigValue("g", "x"); ok {
		t.Fatal("GroupConfig returned the catalog's own map")
	}
	d := New(Options{})
	if err := d.RestoreGroupConfigs(groups); err != nil {
		t.Fatal(err)
	}
	if got := d.GroupConfig("g"); len(got) != 1 || got["consumer.session.timeout.ms"] != "60000" {
		t.Fatalf("restored %v", got)
	}
	if got := d.ConfiguredGroups(); len(got) != 1 || got[0] != "g" {
		t.Fatalf("configured groups %v", got)
	}
	if err := c.SetGroupConfig("g", nil); err != nil {
		t.Fatal(err)
	}
	if c.GroupConfig("g") != nil || string(groups) != `{"version":1,"groups":{}}` {
		t.Fatalf("after removal: %v, %s", c.GroupConfig("g"), groups)
	}
}

// Refused changes leave everything as it was: a failed persist, the limits,
// an update function's error; a dry run checks without changing.
func TestGroupConfigRefusals(t *testing.T) {
	fail := New(Options{PersistGroups: func([]byte) error { return errors.New("disk full") }})
	if err := fail.SetGroupConfig("g", map[string]string{"a": "1"}); !errors.Is(err, ErrPersist) || fail.GroupConfig("g") != nil {
		t.Fatalf("persist failure: %v, %v", err, fail.GroupConfig("g"))
	}
	c := New(Options{})
	big := map[string]string{}
	for i := 0; i <= MaxGroupConfigs; i++ {
		big[fmt.Sprint("k", i)] = "v"
	}
	for _, bad := range []func() error{
		func() error { return c.SetGroupConfig("", map[string]string{"a": "1"}) },
		func() error {
			return c.SetGroupConfig(strings.Repeat("g", MaxGroupNameLen+1), map[string]string{"a": "1"})
		},
		func() error { return c.SetGroupConfig("g", big) },
		func() error {
			return c.SetGroupConfig("g", map[string]string{"a": strings.Repeat("x", MaxGroupConfigLen+1)})
		},
		func() error {
			return c.UpdateGroupConfig("g", true, func(map[string]string) (map[string]string, error) { return big, nil })
		},
	} {
		if err := bad(); !errors.Is(err, ErrInvalidGroupConfig) {
			t.Fatalf("got %v, want ErrInvalidGroupConfig", err)
		}
	}
	oops := errors.New("oops")
	if err := c.UpdateGroupConfig("g", false, func(map[string]string) (map[string]string, error) { return map[string]string{"a": "1"}, oops }); err != oops {
		t.Fatalf("update error: %v", err)
	}
	if err := c.UpdateGroupConfig("g", true, func(map[string]string) (map[string]string, error) { return map[string]string{"a": "1"}, nil }); err != nil {
		t.Fatal(err)
	}
	if len(c.ConfiguredGroups()) != 0 {
		t.Fatalf("refused or dry-run changes stored: %v", c.ConfiguredGroups())
	}
	// At most MaxConfiguredGroups groups; existing ones may still change.
	for i := 0; i < MaxConfiguredGroups; i++ {
		if err := c.SetGroupConfig(fmt.Sprint("g", i), map[string]string{"a": "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetGroupConfig("one-more", map[string]string{"a": "1"}); !errors.Is(err, ErrInvalidGroupConfig) {
		t.Fatalf("group %d: %v", MaxConfiguredGroups+1, err)
	}
	if err := c.SetGroupConfig("g0", map[string]string{"a": "2"}); err != nil {
		t.Fatalf("changing an existing group at the limit: %v", err)
	}
}

// Concurrent updates of one group each see the other's result: none is lost.
func TestGroupConfigUpdatesSerialised(t *testing.T) {
	c := New(Options{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.UpdateGroupConfig("g", false, func(cur map[string]string) (map[string]string, error) {
				if cur == nil {
					cur = map[string]string{}
				}
				cur[fmt.Sprint("k", i)] = "v"
				return cur, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := c.GroupConfig("g"); len(got) != 8 {
		t.Fatalf("after 8 concurrent updates: %v", got)
	}
}

func TestRestoreGroupConfigsRejects(t *testing.T) {
	c := New(Options{})
	if err := c.SetGroupConfig("g", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{``, `{`, `{"version":2,"groups":{}}`, `{"version":1,"groups":{"g":{}}}`, `{"version":1,"groups":{"":{"a":"1"}}}`,
		`{"version":1,"groups":{"g":{"":"1"}}}`} {
		if err := c.RestoreGroupConfigs([]byte(bad)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("RestoreGroupConfigs(%s) = %v, want ErrBadSnapshot", bad, err)
		}
	}
	if got := c.GroupConfig("g"); len(got) != 1 {
		t.Fatalf("a rejected restore changed the configs: %v", got)
	}
}

func FuzzRestoreGroupConfigs(f *testing.F) {
	c := New(Options{})
	c.SetGroupConfig("g", map[string]string{"consumer.session.timeout.ms": "60000"})
	f.Add(c.GroupConfigsSnapshot())
	f.Add([]byte(`{"version":1,"groups":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := New(Options{})
		if err := r.RestoreGroupConfigs(data); err != nil {
			return
		}
		again := New(Options{})
		if err := again.RestoreGroupConfigs(r.GroupConfigsSnapshot()); err != nil {
			t.Fatalf("re-restoring an accepted snapshot failed: %v", err)
		}
		if fmt.Sprint(again.ConfiguredGroups()) != fmt.Sprint(r.ConfiguredGroups()) {
			t.Fatal("round trip changed the configured groups")
		}
		for _, g := range r.ConfiguredGroups() {
			if fmt.Sprint(again.GroupConfig(g)) != fmt.Sprint(r.GroupConfig(g)) {
				t.Fatalf("round trip changed group %q's configs", g)
			}
		}
	})
}
