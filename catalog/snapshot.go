package catalog

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadSnapshot is returned by Restore for data that is not a valid catalog
// snapshot.
var ErrBadSnapshot = errors.New("catalog: bad snapshot")

// snapshotVersion is the version written into snapshots. Restore accepts
// exactly the versions it knows.
const snapshotVersion = 1

// The snapshot is JSON: small, self-describing, and easy to inspect in
// whatever durable store holds it. A topic's record (Options.PersistTopic) is
// a snapshot of that one topic; a snapshot of every topic (Snapshot,
// Restore) is the format nodes before the per-topic records kept the whole
// catalog in, as one record, which a node now reads once to move it to
// per-topic records.
type snapshotDoc struct {
	Version int             `json:"version"`
	Topics  []snapshotTopic `json:"topics"`
}

type snapshotTopic struct {
	Name       string     `json:"name"`
	ID         string     `json:"id"` // 32 hex digits
	Partitions int32      `json:"partitions"`
	Racks      [][]string `json:"racks,omitempty"`
}

func encode(topics []*Topic) []byte {
	doc := snapshotDoc{Version: snapshotVersion, Topics: make([]snapshotTopic, len(topics))}
	for i, t := range topics {
		doc.Topics[i] = snapshotTopic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: t.Partitions, Racks: t.Racks}
	}
	b, err := json.Marshal(doc)
	if err != nil { // cannot happen: strings, ints and slices only
		panic("catalog: encoding snapshot: " + err.Error())
	}
	return b
}

// Snapshot returns the encoded current state, every topic in one document,
// as Restore reads it.
func (c *Catalog) Snapshot() []byte {
	return encode(c.cur.Load().sorted)
}

// Restore replaces the catalog's contents with the decoded snapshot data
// (from Snapshot, or the one record older nodes kept the catalog in). It
// does not call Options.PersistTopic; it calls Options.Removed for the
// topics the data no longer holds. Invalid data leaves the catalog unchanged
// and returns an error wrapping ErrBadSnapshot.
func (c *Catalog) Restore(data []byte) error {
	v, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	c.mu.Lock()
	old := c.install(v)
	c.mu.Unlock()
	c.notifyRemoved(old, v)
	return nil
}

// RestoreTopics replaces the catalog's topics with those of records (topic
// key -> record, as Options.PersistTopic received them; a nil or empty record
// is no topic): at start-up, from what the store holds. It does not call
// Options.PersistTopic; it calls Options.Removed for the topics the records no
// longer hold. Invalid records (damaged, of a newer version, stored under a key
// that is not their topic's, or colliding) leave the catalog unchanged and
// return an error wrapping ErrBadSnapshot.
func (c *Catalog) RestoreTopics(records map[string][]byte) error {
	return c.SyncTopics(func() (map[string][]byte, error) { return records, nil })
}

// SyncTopics is RestoreTopics of what read returns, read under the
// catalog's lock: no change made through this catalog can fall between the
// read and the replacement, so a read that sees every change already made
// (a read of the shared store the changes are persisted to, in cluster mode)
// can never roll the catalog back past one of them. An error of read is
// returned as is.
func (c *Catalog) SyncTopics(read func() (map[string][]byte, error)) error {
	c.mu.Lock()
	records, err := read()
	if err != nil {
		c.mu.Unlock()
		return err
	}
	v, err := decodeRecords(records)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	old := c.cur.Load()
	if !sameTopics(old, v) {
		c.install(v)
	}
	end := c.cur.Load()
	c.mu.Unlock()
	c.notifyRemoved(old, end)
	return nil
}

// SyncTopic is SyncTopics for the one record of key (nil or empty: no topic
// has it), read under the catalog's lock: in cluster mode, on a change
// another node made to that record.
func (c *Catalog) SyncTopic(key string, read func() ([]byte, error)) error {
	c.mu.Lock()
	data, err := read()
	if err != nil {
		c.mu.Unlock()
		return err
	}
	t, err := decodeRecord(key, data)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	old := c.cur.Load()
	c.installTopic(key, t)
	end := c.cur.Load()
	c.mu.Unlock()
	c.notifyKeyRemoved(old, end, key)
	return nil
}

// TopicRecords returns every topic's record, by key, as
// Options.PersistTopic receives them.
func (c *Catalog) TopicRecords() map[string][]byte {
	v := c.cur.Load()
	m := make(map[string][]byte, len(v.sorted))
	for _, t := range v.sorted {
		m[TopicKey(t.Name)] = encodeRecord(t)
	}
	return m
}

// installTopic publishes the view with key's topic set to t (nil: none),
// c.mu held, unless the view has that already.
func (c *Catalog) installTopic(key string, t *Topic) {
	v := c.cur.Load()
	cur := v.byKey[key]
	if t == nil && cur == nil || t != nil && cur != nil && string(encodeRecord(cur)) == string(encodeRecord(t)) {
		return
	}
	c.install(withTopic(v, key, t))
}

// sameTopics reports whether a and b hold the same topics.
func sameTopics(a, b *view) bool {
	return len(a.sorted) == len(b.sorted) && string(encode(a.sorted)) == string(encode(b.sorted))
}

// encodeRecord encodes one topic's record (nil for no topic).
func encodeRecord(t *Topic) []byte {
	if t == nil {
		return nil
	}
	return encode([]*Topic{t})
}

// decodeRecord checks and decodes key's record: nil for empty data, else
// one topic whose TopicKey is key.
func decodeRecord(key string, data []byte) (*Topic, error) {
	if len(data) == 0 {
		return nil, nil
	}
	v, err := decodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	if len(v.sorted) != 1 || TopicKey(v.sorted[0].Name) != key {
		return nil, fmt.Errorf("%w: the record of topic key %q holds %d topics, not one of that key", ErrBadSnapshot, key, len(v.sorted))
	}
	return v.sorted[0], nil
}

// decodeRecords checks and decodes a set of records into a view.
func decodeRecords(records map[string][]byte) (*view, error) {
	doc := snapshotDoc{Version: snapshotVersion, Topics: make([]snapshotTopic, 0, len(records))}
	for key, data := range records {
		t, err := decodeRecord(key, data)
		if err != nil {
			return nil, err
		}
		if t != nil {
			doc.Topics = append(doc.Topics, snapshotTopic{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: t.Partitions, Racks: t.Racks})
		}
	}
	return validate(doc)
}

// install publishes v as the next version (c.mu held) and returns the view
// it replaced.
func (c *Catalog) install(v *view) *view {
	old := c.cur.Load()
	v.version = old.version + 1
	c.cur.Store(v)
	return old
}

// notifyRemoved calls Options.Removed (outside the lock) with the topics
// old had and v lacks.
func (c *Catalog) notifyRemoved(old, v *view) {
	if c.removed != nil {
		if names := removedTopics(old, v); len(names) > 0 {
			c.removed(names)
		}
	}
}

// decodeSnapshot checks and decodes a snapshot into a view.
func decodeSnapshot(data []byte) (*view, error) {
	var doc snapshotDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if doc.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads version %d", ErrBadSnapshot, doc.Version, snapshotVersion)
	}
	return validate(doc)
}

// validate checks a decoded document's topics (names, partitions, racks, ids,
// no two colliding) and builds their view.
func validate(doc snapshotDoc) (*view, error) {
	topics := make([]Topic, 0, len(doc.Topics))
	v := buildView(nil)
	for _, st := range doc.Topics {
		if err := checkCreate(v, st.Name, st.Partitions, st.Racks); err != nil {
			return nil, fmt.Errorf("%w: topic %q: %w", ErrBadSnapshot, st.Name, err)
		}
		var id [16]byte
		if len(st.ID) != 32 {
			return nil, fmt.Errorf("%w: topic %q: bad id %q", ErrBadSnapshot, st.Name, st.ID)
		}
		if _, err := hex.Decode(id[:], []byte(st.ID)); err != nil {
			return nil, fmt.Errorf("%w: topic %q: bad id %q", ErrBadSnapshot, st.Name, st.ID)
		}
		if id == ([16]byte{}) {
			return nil, fmt.Errorf("%w: topic %q: zero id", ErrBadSnapshot, st.Name)
		}
		if _, dup := v.byID[id]; dup {
			return nil, fmt.Errorf("%w: topic %q: duplicate id %s", ErrBadSnapshot, st.Name, st.ID)
		}
		topics = append(topics, Topic{Name: st.Name, ID: id, Partitions: st.Partitions, Racks: st.Racks}.clone())
		// Index the topic so later entries are checked against it (the
		// final buildView sorts).
		seen := &Topic{Name: st.Name, ID: id}
		v.byName[st.Name], v.byID[id], v.byKey[collisionKey(st.Name)] = seen, seen, seen
	}
	return buildView(topics), nil
}
