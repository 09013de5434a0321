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
// whatever durable store the lead chooses. Catalogs are tiny (topics, not
// records), so compactness does not matter.
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

func encode(topics []Topic) []byte {
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

// Snapshot returns the encoded current state, in the format Options.Persist
// receives and Restore reads.
func (c *Catalog) Snapshot() []byte {
	return encode(c.cur.Load().sorted)
}

// Restore replaces the catalog's contents with the decoded snapshot data
// (from Snapshot or Options.Persist): at start-up, and in cluster mode for
// a change made through another node. It does not call Options.Persist; it
// calls Options.Removed for the topics the data no longer holds. Invalid data
// leaves the catalog unchanged and returns an error wrapping ErrBadSnapshot.
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

// Sync is Restore of what read returns, read under the catalog's lock: no
// change made through this catalog can fall between the read and the
// replacement, so a read that sees every change already made (a read of the
// shared store the changes are persisted to, in cluster mode) can never roll
// the catalog back past one of them. Empty or unchanged data changes
// nothing; an error of read is returned as is.
func (c *Catalog) Sync(read func() ([]byte, error)) error {
	c.mu.Lock()
	data, err := read()
	if err != nil || len(data) == 0 || string(data) == string(encode(c.cur.Load().sorted)) {
		c.mu.Unlock()
		return err
	}
	v, err := decodeSnapshot(data)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	old := c.install(v)
	c.mu.Unlock()
	c.notifyRemoved(old, v)
	return nil
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
		// Index the topic so later entries are checked against it (in
		// input order until the final buildView sorts).
		i := len(v.sorted)
		v.byName[st.Name], v.byID[id], v.byKey[collisionKey(st.Name)] = i, i, i
		v.sorted = append(v.sorted, Topic{Name: st.Name})
	}
	return buildView(topics), nil
}
