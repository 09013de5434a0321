package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/internal/golden"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestStoredCatalogRecordsGolden holds, under testdata/golden/, the stored
// bytes of each kind of record of store partition -1 (CatalogPartition) as
// this version writes them: a topic's record, a group's configs and the
// partition count; and the single catalog record that versions before
// ed0ac35 wrote (captured from cohort 0275013). A node started on exactly
// those records must serve them (topics with their ids and racks, the group
// configs), hold the same bytes for them (its catalog encodes them again
// alike), and move the old single record's topics to their own records. It
// fails when a key or value encoding changes: users' stores hold the
// earlier one. A new record kind gets a case here; running the test once
// with COHORT_TEST_WRITE_GOLDEN=1 writes its fixture (package
// internal/golden).
func TestStoredCatalogRecordsGolden(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mine := catalog.New(catalog.Options{})
	racks := [][]string{{"r1", "r2"}, {}}
	topic, err := mine.Create("events.a", 2, racks)
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "4000"}
	if err := mine.SetGroupConfig("cg-848", configs); err != nil {
		t.Fatal(err)
	}
	topicKey := catalog.TopicKey("events.a")
	cases := []struct {
		name, about, key string
		value            []byte
	}{
		{"topic", "a topic's record (key topic/<catalog.TopicKey>, JSON, version 1): events.a, 2 partitions, racks of partition 0", topicRecordPrefix + topicKey, mine.TopicRecords()[topicKey]},
		{"group-config", "a group's dynamic configs (key group-config/<group>, JSON, version 1)", groupConfigPrefix + "cg-848", mine.GroupConfigSnapshot("cg-848")},
		{"partitions", "the number of coordinator partitions the groups are spread over (key partitions, decimal)", string(partitionsKey), []byte("50")},
	}
	st := memstore.New()
	stored := map[string][]byte{}
	for _, c := range cases {
		k, v := golden.Record(t, c.name, c.about, []byte(c.key), c.value)
		if string(k) != c.key || !bytes.Equal(v, c.value) {
			t.Errorf("%s: encoding changed:\nstored  %q %s\nencoded %q %s", c.name, k, v, c.key, c.value)
		}
		stored[c.name] = v
		if err := st.Append(context.Background(), CatalogPartition, []store.Record{{Key: k, Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	nd, err := Start(Config{Listen: "127.0.0.1:0", Store: st, Partitions: 50, Logger: quiet})
	if err != nil {
		t.Fatal(err) // a partition count it cannot read (or not 50) is refused here
	}
	defer nd.Close()
	cat := nd.Catalog()
	if got, ok := cat.Lookup("events.a"); !ok || !reflect.DeepEqual(got, topic) {
		t.Errorf("topic events.a: %+v (%v), want %+v", got, ok, topic)
	}
	if got := cat.TopicRecords()[topicKey]; !bytes.Equal(got, stored["topic"]) {
		t.Errorf("topic events.a encodes to %s, stored %s", got, stored["topic"])
	}
	if got := cat.GroupConfig("cg-848"); !maps.Equal(got, configs) {
		t.Errorf("group configs %v, want %v", got, configs)
	}
	if got := cat.GroupConfigSnapshot("cg-848"); !bytes.Equal(got, stored["group-config"]) {
		t.Errorf("group configs encode to %s, stored %s", got, stored["group-config"])
	}
	if cat.Len() != 1 {
		t.Errorf("%d topics, want 1", cat.Len())
	}

	t.Run("catalog-0275013", func(t *testing.T) {
		key, value := golden.Load(t, "catalog-0275013")
		st := memstore.New()
		if err := st.Append(context.Background(), CatalogPartition, []store.Record{{Key: key, Value: value}}); err != nil {
			t.Fatal(err)
		}
		nd, err := Start(Config{Listen: "127.0.0.1:0", Store: st, Partitions: 50, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		want := map[string]struct {
			id         string
			partitions int32
		}{"events.a": {"abdcde51a0e34244a9c4cc72f48681b7", 2}, "events.b": {"926d8ae68d0c4f51bb70536fae5d92f3", 1},
			"orders": {"4eb2f124f39543168070a89092166ea4", 3}, "other": {"0ab0a52d9ea24fb181c2683e3eb735c5", 1}}
		if n := nd.Catalog().Len(); n != len(want) {
			t.Errorf("%d topics, want %d", n, len(want))
		}
		for name, w := range want {
			got, ok := nd.Catalog().Lookup(name)
			if !ok || got.Partitions != w.partitions || hexID(got.ID) != w.id {
				t.Errorf("topic %s: %+v (%v), want id %s and %d partitions", name, got, ok, w.id, w.partitions)
			}
		}
		held := map[string]bool{}
		if err := st.Load(context.Background(), CatalogPartition, func(r store.Record) error {
			held[string(r.Key)] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if held[legacyCatalogKey] || !held[topicRecordPrefix+catalog.TopicKey("orders")] {
			t.Errorf("after the move the store holds %v", held)
		}
	})
}

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }
