package catalog

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Group configs are persisted one record per group, survive a round trip,
// leave the topics' snapshot and Version alone, and are removed by an empty
// set (a nil record). Persisting happens only for a real change.
func TestGroupConfigs(t *testing.T) {
	var topics []byte
	persisted := map[string][]byte{}
	persists := 0
	c := New(Options{PersistTopic: func(_ string, b []byte) error { topics = b; return nil },
		PersistGroup: func(g string, b []byte) error { persisted[g] = b; persists++; return nil }})
	if _, err := c.Create("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	tv, topicsBefore := c.Version(), string(topics)
	gv := c.GroupConfigsVersion()
	cfg := map[string]string{"consumer.session.timeout.ms": "60000"}
	if err := c.SetGroupConfig("g", cfg); err != nil {
		t.Fatal(err)
	}
	if c.Version() != tv || string(topics) != topicsBefore {
		t.Fatal("a group config change touched the topics' version or snapshot")
	}
	if c.GroupConfigsVersion() == gv || string(persisted["g"]) != `{"version":1,"configs":{"consumer.session.timeout.ms":"60000"}}` {
		t.Fatalf("group configs version %d (was %d), record %s", c.GroupConfigsVersion(), gv, persisted["g"])
	}
	if err := c.SetGroupConfig("g", cfg); err != nil || persists != 1 {
		t.Fatalf("the same configs again: %v, %d persists (want 1: nothing changed)", err, persists)
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
	// Restored elsewhere (another node, a restart): the version moves, so
	// that a reader's cache is rebuilt.
	d := New(Options{})
	dv := d.GroupConfigsVersion()
	if err := d.RestoreGroupConfig("g", persisted["g"]); err != nil {
		t.Fatal(err)
	}
	if got := d.GroupConfig("g"); len(got) != 1 || got["consumer.session.timeout.ms"] != "60000" || d.GroupConfigsVersion() == dv {
		t.Fatalf("restored %v, version %d (was %d)", got, d.GroupConfigsVersion(), dv)
	}
	if got := d.ConfiguredGroups(); len(got) != 1 || got[0] != "g" {
		t.Fatalf("configured groups %v", got)
	}
	if err := c.SetGroupConfig("g", nil); err != nil {
		t.Fatal(err)
	}
	if c.GroupConfig("g") != nil || persisted["g"] != nil {
		t.Fatalf("after removal: %v, record %s", c.GroupConfig("g"), persisted["g"])
	}
	dv = d.GroupConfigsVersion()
	if err := d.RestoreGroupConfig("g", nil); err != nil || d.GroupConfig("g") != nil || d.GroupConfigsVersion() == dv {
		t.Fatalf("restoring a removal: %v, %v", err, d.GroupConfig("g"))
	}
}

// Refused changes leave everything as it was: a failed persist, the limits,
// an update function's error; a dry run checks without changing.
func TestGroupConfigRefusals(t *testing.T) {
	fail := New(Options{PersistGroup: func(string, []byte) error { return errors.New("disk full") }})
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

func TestRestoreGroupConfigRejects(t *testing.T) {
	c := New(Options{})
	if err := c.SetGroupConfig("g", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{`, `{"version":2,"configs":{"a":"2"}}`, `{"version":1,"configs":{}}`, `{"version":1,"configs":{"":"1"}}`} {
		if err := c.RestoreGroupConfig("g", []byte(bad)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("RestoreGroupConfig(%s) = %v, want ErrBadSnapshot", bad, err)
		}
	}
	if err := c.RestoreGroupConfig("", []byte(`{"version":1,"configs":{"a":"1"}}`)); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("an empty group name: %v", err)
	}
	if got := c.GroupConfig("g"); len(got) != 1 || got["a"] != "1" {
		t.Fatalf("a rejected restore changed the configs: %v", got)
	}
}

func FuzzRestoreGroupConfig(f *testing.F) {
	c := New(Options{})
	c.SetGroupConfig("g", map[string]string{"consumer.session.timeout.ms": "60000"})
	f.Add(c.GroupConfigSnapshot("g"))
	f.Add([]byte(`{"version":1,"configs":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := New(Options{})
		if err := r.RestoreGroupConfig("g", data); err != nil {
			return
		}
		again := New(Options{})
		if err := again.RestoreGroupConfig("g", r.GroupConfigSnapshot("g")); err != nil {
			t.Fatalf("re-restoring an accepted snapshot failed: %v", err)
		}
		if fmt.Sprint(again.ConfiguredGroups()) != fmt.Sprint(r.ConfiguredGroups()) || fmt.Sprint(again.GroupConfig("g")) != fmt.Sprint(r.GroupConfig("g")) {
			t.Fatal("round trip changed the configs")
		}
	})
}

// SyncTopics, SyncTopic and SyncGroupConfig read under the catalog's lock (no change of the
// catalog can fall between the read and the replacement), apply what they
// read, and leave everything as it was on a read error.
func TestSyncReadsUnderTheLock(t *testing.T) {
	src := New(Options{})
	if _, err := src.Create("t", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := src.SetGroupConfig("g", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	c := New(Options{})
	locked := func(data []byte) func() ([]byte, error) {
		return func() ([]byte, error) {
			if c.mu.TryLock() {
				c.mu.Unlock()
				t.Error("read ran without the catalog's lock")
			}
			return data, nil
		}
	}
	if err := c.SyncTopics(func() (map[string][]byte, error) {
		_, err := locked(nil)()
		return src.TopicRecords(), err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncGroupConfig("g", locked(src.GroupConfigSnapshot("g"))); err != nil {
		t.Fatal(err)
	}
	if tp, ok := c.Lookup("t"); !ok || tp.Partitions != 2 || c.GroupConfig("g")["a"] != "1" {
		t.Fatalf("after sync: %+v %v", tp, c.GroupConfig("g"))
	}
	boom := errors.New("etcd unreachable")
	fail := func() ([]byte, error) { return nil, boom }
	if err := c.SyncTopics(func() (map[string][]byte, error) { return nil, boom }); err != boom {
		t.Fatalf("SyncTopics: %v", err)
	}
	if err := c.SyncTopic(TopicKey("t"), fail); err != boom {
		t.Fatalf("SyncTopic: %v", err)
	}
	if err := c.SyncGroupConfig("g", fail); err != boom {
		t.Fatalf("SyncGroupConfig: %v", err)
	}
	if _, ok := c.Lookup("t"); !ok || c.GroupConfig("g") == nil {
		t.Fatal("a failed read changed the catalog")
	}
	if err := c.SyncGroupConfig("g", locked(nil)); err != nil || c.GroupConfig("g") != nil {
		t.Fatalf("a group whose record is gone: %v %v", err, c.GroupConfig("g"))
	}
	if err := c.SyncTopic(TopicKey("t"), locked(nil)); err != nil || c.Len() != 0 {
		t.Fatalf("a topic whose record is gone: %v, %d topics left", err, c.Len())
	}
}
