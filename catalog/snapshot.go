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
	var doc snapshotDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if doc.Version != snapshotVersion {
		return fmt.Errorf("%w: version %d, this build reads version %d", ErrBadSnapshot, doc.Version, snapshotVersion)
	}
	topics := make([]Topic, 0, len(doc.Topics))
	v := buildView(nil)
	for _, st := range doc.Topics {
		if err := checkCreate(v, st.Name, st.Partitions, st.Racks); err != nil {
			return fmt.Errorf("%w: topic %q: %w", ErrBadSnapshot, st.Name, err)
		}
		var id [16]byte
		if len(st.ID) != 32 {
			return fmt.Errorf("%w: topic %q: bad id %q", ErrBadSnapshot, st.Name, st.ID)
		}
		if _, err := hex.Decode(id[:], []byte(st.ID)); err != nil {
			return fmt.Errorf("%w: topic %q: bad id %q", ErrBadSnapshot, st.Name, st.ID)
		}
		if id == ([16]byte{}) {
			return fmt.Errorf("%w: topic %q: zero id", ErrBadSnapshot, st.Name)
		}
		if _, dup := v.byID[id]; dup {
			return fmt.Errorf("%w: topic %q: duplicate id %s", ErrBadSnapshot, st.Name, st.ID)
		}
		topics = append(topics, Topic{Name: st.Name, ID: id, Partitions: st.Partitions, Racks: st.Racks}.clone())
		// Index the topic so later entries are checked against it (in
		// input order until the final buildView sorts).
		i := len(v.sorted)
		v.byName[st.Name], v.byID[id], v.byKey[collisionKey(st.Name)] = i, i, i
		v.sorted = append(v.sorted, Topic{Name: st.Name})
	}
	v = buildView(topics)
	c.mu.Lock()
	old := c.cur.Load()
	v.version = old.version + 1
	c.cur.Store(v)
	c.mu.Unlock()
	if c.removed != nil {
		if names := removedTopics(old, v); len(names) > 0 {
			c.removed(names)
		}
	}
	return nil
}
