// Package catalog holds cohort's topic catalog: the named topics clients see
// in Metadata, each with a partition count and optional per-partition racks.
//
// cohort stores no records. Topics exist so that stock Kafka clients can
// subscribe, build assignments (a consumer-group leader reads partition
// counts, and for rack-aware assignors the replicas' racks, from Metadata) and
// be administered with the usual CreateTopics/DeleteTopics/CreatePartitions
// tools. The catalog is not a gate for offsets: the coordinator may commit
// offsets for topics it does not list.
//
// The catalog also keeps the consumer groups' dynamic configs (groups.go):
// cluster metadata that takes the same way to disk and to every node.
//
// A Catalog is safe for concurrent use. Reads (Lookup, List) take no lock:
// every change publishes a new immutable view. Changes can be made durable
// through Options.Persist, which receives the encoded snapshot of the new
// state before the change becomes visible.
package catalog

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxPartitions is the largest partition count a topic may have. Kafka has no
// hard limit, but a catalog entry is free to create while every Metadata
// response lists every partition, so an unbounded count would let one admin
// request make the server build arbitrarily large responses.
const MaxPartitions = 1 << 16

// MaxNameLen is Kafka's limit on topic name length.
const MaxNameLen = 249

// Errors returned by catalog operations. The server maps them to Kafka error
// codes; match them with errors.Is.
var (
	ErrInvalidName       = errors.New("catalog: invalid topic name")
	ErrExists            = errors.New("catalog: topic already exists")
	ErrNotFound          = errors.New("catalog: unknown topic")
	ErrInvalidPartitions = errors.New("catalog: invalid partition count")
	ErrInvalidRacks      = errors.New("catalog: invalid racks")
	// ErrPersist wraps an error returned by Options.Persist; the change it
	// was for did not happen.
	ErrPersist = errors.New("catalog: persisting the change failed")
)

// Conflict is the error a Persist or PersistGroup returns when it writes
// only where the stored record is still the one this catalog last saw (a
// compare-and-swap, as cluster mode does in etcd: several nodes change the
// same records) and another writer got there first. Current is the stored
// record (nil if there is none). The catalog installs it, checks and
// applies the change again to it, and persists once more; after
// MaxConflicts conflicts in a row the operation fails with an error wrapping
// ErrPersist.
type Conflict struct {
	Current []byte
	// Accepted, if set, is called once the catalog holds Current (it
	// installed it, or already had it) and before it tries again: a writer
	// that compares revisions takes Current's as the one it last saw
	// there, so that a record the catalog could not read is never
	// written over.
	Accepted func()
}

func (e *Conflict) Error() string {
	return "catalog: the stored record changed since this node last read it"
}

// MaxConflicts bounds how many times one change is applied again after a
// Conflict.
const MaxConflicts = 16

// backOff waits before the next try after the n-th conflict in a row (from
// 0): not after the first (the conflict brought the newer record, so the
// next try normally wins), then a random wait of up to n ms, so that writers
// that keep meeting each other fall out of step.
func backOff(n int) {
	if n > 0 {
		time.Sleep(rand.N(time.Duration(n) * time.Millisecond))
	}
}

// Topic is one topic as the catalog describes it. Values returned by the
// catalog are copies; modifying them does not change the catalog.
type Topic struct {
	Name string
	// ID is the topic's UUID (Metadata v10+, DeleteTopics v6). It is derived
	// from the name, so it is stable across restarts and never all zeros.
	ID [16]byte
	// Partitions is the partition count; partitions are 0..Partitions-1.
	Partitions int32
	// Racks optionally lists, per partition, the racks its replicas are in
	// (Racks[p]). It is nil, or has exactly Partitions entries (an entry may
	// be empty: no rack known for that partition).
	Racks [][]string
}

func (t Topic) clone() Topic {
	if t.Racks != nil {
		rs := make([][]string, len(t.Racks))
		for i, r := range t.Racks {
			rs[i] = append([]string(nil), r...)
		}
		t.Racks = rs
	}
	return t
}

// Options configures a Catalog.
type Options struct {
	// Persist, if set, is called with the encoded snapshot (see Snapshot) of
	// the state a change would produce, before the change becomes visible.
	// If it returns an error the change is abandoned and the operation fails
	// with an error wrapping ErrPersist, except for a *Conflict, after which
	// the change is applied again to the record it carries. Calls are
	// serialised (never concurrent) and happen in the order of the changes.
	Persist func(snapshot []byte) error
	// PersistGroup is Persist for one group's configs (groups.go): their
	// snapshot (GroupConfigSnapshot), nil when they are removed, stored
	// apart from the topics'.
	PersistGroup func(group string, snapshot []byte) error
	// Shared says that other writers change the same records (cluster
	// mode, with Persist and PersistGroup comparing revisions): a change
	// that changes nothing in this catalog's view is still persisted, so
	// that a view behind the store (a change made elsewhere and not seen
	// yet) cannot report success for a change the store does not hold.
	Shared bool
	// Removed, if set, is called after a change that removed topics (a
	// Delete, or a Restore without them) with their names. It is called
	// outside the catalog's lock, once per change. (A topic deleted and
	// created again between two Restores is not seen: a name always has
	// the same ID.)
	Removed func(names []string)
}

// view is an immutable state of the catalog.
type view struct {
	version uint64  // bumped by every change
	sorted  []Topic // by name
	byName  map[string]int
	byID    map[[16]byte]int
	byKey   map[string]int // collisionKey(name) -> index
}

// Catalog is the set of topics. The zero value is not usable; call New.
type Catalog struct {
	mu           sync.Mutex // serialises changes (and Persist calls)
	persist      func([]byte) error
	persistGroup func(string, []byte) error
	shared       bool
	removed      func([]string)
	cur          atomic.Pointer[view]
	groups       atomic.Pointer[groupsView]
}

// New returns an empty catalog.
func New(opts Options) *Catalog {
	c := &Catalog{persist: opts.Persist, persistGroup: opts.PersistGroup, shared: opts.Shared, removed: opts.Removed}
	c.cur.Store(buildView(nil))
	c.groups.Store(&groupsView{})
	return c
}

func buildView(topics []Topic) *view {
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	v := &view{
		sorted: topics,
		byName: make(map[string]int, len(topics)),
		byID:   make(map[[16]byte]int, len(topics)),
		byKey:  make(map[string]int, len(topics)),
	}
	for i, t := range topics {
		v.byName[t.Name] = i
		v.byID[t.ID] = i
		v.byKey[collisionKey(t.Name)] = i
	}
	return v
}

// ValidateName reports whether name is a legal Kafka topic name: 1 to 249
// characters of [a-zA-Z0-9._-], and neither "." nor "..".
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: the name is %d characters long, the maximum is %d", ErrInvalidName, len(name), MaxNameLen)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if !ok {
			return fmt.Errorf("%w: %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", ErrInvalidName, name)
		}
	}
	return nil
}

// collisionKey maps names that Kafka considers colliding (because metric
// names replace '.' with '_') to the same key.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// TopicID returns the UUID the catalog gives the topic name: the first 16
// bytes of SHA-256("cohort/topic/" + name), shaped as a version-4-style UUID
// so that it is never the all-zero UUID nor Kafka's reserved UUID 1.
func TopicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("cohort/topic/" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x40 // version 4 nibble: never zero
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

func validateRacks(racks [][]string, partitions int32) error {
	if racks == nil {
		return nil
	}
	if int64(len(racks)) != int64(partitions) {
		return fmt.Errorf("%w: %d rack lists for %d partitions", ErrInvalidRacks, len(racks), partitions)
	}
	for p, rs := range racks {
		for _, r := range rs {
			if r == "" {
				return fmt.Errorf("%w: partition %d has an empty rack name", ErrInvalidRacks, p)
			}
		}
	}
	return nil
}

func validatePartitions(n int32) error {
	if n <= 0 {
		return fmt.Errorf("%w: %d, it must be positive", ErrInvalidPartitions, n)
	}
	if n > MaxPartitions {
		return fmt.Errorf("%w: %d, the maximum is %d", ErrInvalidPartitions, n, MaxPartitions)
	}
	return nil
}

// Lookup returns the topic called name.
func (c *Catalog) Lookup(name string) (Topic, bool) {
	v := c.cur.Load()
	i, ok := v.byName[name]
	if !ok {
		return Topic{}, false
	}
	return v.sorted[i].clone(), true
}

// LookupID returns the topic whose ID is id.
func (c *Catalog) LookupID(id [16]byte) (Topic, bool) {
	v := c.cur.Load()
	i, ok := v.byID[id]
	if !ok {
		return Topic{}, false
	}
	return v.sorted[i].clone(), true
}

// Name returns the name of the topic whose ID is id, without copying the
// topic: the request path resolves the topic IDs of OffsetCommit and
// OffsetFetch v10 with it.
func (c *Catalog) Name(id [16]byte) (string, bool) {
	v := c.cur.Load()
	i, ok := v.byID[id]
	if !ok {
		return "", false
	}
	return v.sorted[i].Name, true
}

// Len returns the number of topics.
func (c *Catalog) Len() int { return len(c.cur.Load().sorted) }

// List returns every topic, sorted by name.
func (c *Catalog) List() []Topic {
	v := c.cur.Load()
	out := make([]Topic, len(v.sorted))
	for i, t := range v.sorted {
		out[i] = t.clone()
	}
	return out
}

// Range calls fn for every topic in name order until fn returns false. The
// Topic passed to fn is shared with the catalog and must not be modified or
// retained; Range allocates nothing, which suits hot paths like Metadata.
func (c *Catalog) Range(fn func(t *Topic) bool) {
	v := c.cur.Load()
	for i := range v.sorted {
		if !fn(&v.sorted[i]) {
			return
		}
	}
}

// checkCreate validates a creation against view v.
func checkCreate(v *view, name string, partitions int32, racks [][]string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if _, ok := v.byName[name]; ok {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	if i, ok := v.byKey[collisionKey(name)]; ok {
		return fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are interchangeable in Kafka metric names)", ErrInvalidName, name, v.sorted[i].Name)
	}
	if err := validatePartitions(partitions); err != nil {
		return err
	}
	return validateRacks(racks, partitions)
}

// ValidateCreate reports the error Create would return now, without creating
// anything (CreateTopics with ValidateOnly).
func (c *Catalog) ValidateCreate(name string, partitions int32, racks [][]string) error {
	return checkCreate(c.cur.Load(), name, partitions, racks)
}

// Create adds a topic with the given partition count and optional
// per-partition racks (nil, or one entry per partition).
func (c *Catalog) Create(name string, partitions int32, racks [][]string) (Topic, error) {
	t := Topic{Name: name, ID: TopicID(name), Partitions: partitions, Racks: racks}.clone()
	err := c.change(func(v *view) ([]Topic, error) {
		if err := checkCreate(v, name, partitions, racks); err != nil {
			return nil, err
		}
		if _, ok := v.byID[t.ID]; ok { // a SHA-256 prefix collision; never expected
			return nil, fmt.Errorf("%w: %q: its topic ID collides with an existing topic", ErrExists, name)
		}
		next := make([]Topic, 0, len(v.sorted)+1)
		return append(append(next, v.sorted...), t), nil
	})
	if err != nil {
		return Topic{}, err
	}
	return t.clone(), nil
}

// Delete removes the topic called name.
func (c *Catalog) Delete(name string) error {
	return c.change(func(v *view) ([]Topic, error) {
		i, ok := v.byName[name]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		next := make([]Topic, 0, len(v.sorted)-1)
		return append(append(next, v.sorted[:i]...), v.sorted[i+1:]...), nil
	})
}

// removedTopics lists the names of old's topics that next lacks.
func removedTopics(old, next *view) []string {
	var names []string
	for _, t := range old.sorted {
		if _, ok := next.byName[t.Name]; !ok {
			names = append(names, t.Name)
		}
	}
	return names
}

func checkAdd(v *view, name string, total int32, racks [][]string) (int, error) {
	i, ok := v.byName[name]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	cur := v.sorted[i].Partitions
	if total <= cur {
		if total == cur {
			return 0, fmt.Errorf("%w: topic %q already has %d partitions", ErrInvalidPartitions, name, cur)
		}
		return 0, fmt.Errorf("%w: topic %q has %d partitions, which cannot be decreased to %d", ErrInvalidPartitions, name, cur, total)
	}
	if err := validatePartitions(total); err != nil {
		return 0, err
	}
	if racks != nil && int64(len(racks)) != int64(total-cur) {
		return 0, fmt.Errorf("%w: %d rack lists for %d new partitions", ErrInvalidRacks, len(racks), total-cur)
	}
	return i, validateRacks(racks, int32(len(racks)))
}

// ValidateAddPartitions reports the error AddPartitions would return now,
// without changing anything (CreatePartitions with ValidateOnly).
func (c *Catalog) ValidateAddPartitions(name string, total int32, racks [][]string) error {
	_, err := checkAdd(c.cur.Load(), name, total, racks)
	return err
}

// AddPartitions grows topic name to total partitions; partition counts never
// decrease. racks optionally lists the racks of the new partitions only
// (len(racks) == total - current). If the topic has racks and racks is nil,
// the new partitions get no rack; if the topic has none and racks is given,
// the existing partitions get no rack.
func (c *Catalog) AddPartitions(name string, total int32, racks [][]string) (Topic, error) {
	var t Topic
	err := c.change(func(v *view) ([]Topic, error) {
		i, err := checkAdd(v, name, total, racks)
		if err != nil {
			return nil, err
		}
		t = v.sorted[i].clone()
		if t.Racks != nil || racks != nil {
			if t.Racks == nil {
				t.Racks = make([][]string, t.Partitions)
			}
			add := racks
			if add == nil {
				add = make([][]string, total-t.Partitions)
			}
			for _, r := range add {
				t.Racks = append(t.Racks, append([]string(nil), r...))
			}
		}
		t.Partitions = total
		next := append([]Topic(nil), v.sorted...)
		next[i] = t
		return next, nil
	})
	if err != nil {
		return Topic{}, err
	}
	return t.clone(), nil
}

// change applies a change to the topics: apply returns the next topics
// given the current view (or an error that abandons the change); the result
// is persisted, then published. On a Conflict the stored record is
// installed and apply runs again on it. Options.Removed hears of every
// topic the catalog lost meanwhile: the one deleted, and any the stored
// record no longer had.
func (c *Catalog) change(apply func(v *view) ([]Topic, error)) error {
	c.mu.Lock()
	start := c.cur.Load()
	err := c.changeLocked(apply)
	end := c.cur.Load()
	c.mu.Unlock()
	c.notifyRemoved(start, end)
	return err
}

// changeLocked is change with c.mu held, leaving the notification to the
// caller.
func (c *Catalog) changeLocked(apply func(v *view) ([]Topic, error)) error {
	for conflicts := 0; ; conflicts++ {
		next, err := apply(c.cur.Load())
		if err != nil {
			return err
		}
		if c.persist != nil {
			err = c.persist(encode(next))
		}
		var cf *Conflict
		switch {
		case err == nil:
			v := buildView(next)
			v.version = c.cur.Load().version + 1
			c.cur.Store(v)
			return nil
		case !errors.As(err, &cf):
			return fmt.Errorf("%w: %w", ErrPersist, err)
		case conflicts >= MaxConflicts:
			return fmt.Errorf("%w: %d concurrent changes in a row through other nodes; try again: %w", ErrPersist, conflicts+1, err)
		}
		backOff(conflicts)
		// An empty record changes nothing (as in Sync): a missing record
		// never makes the catalog drop what it has.
		if len(cf.Current) > 0 && string(cf.Current) != string(encode(c.cur.Load().sorted)) {
			v, derr := decodeSnapshot(cf.Current)
			if derr != nil {
				return fmt.Errorf("%w: the stored catalog: %w", ErrPersist, derr)
			}
			c.install(v)
		}
		if cf.Accepted != nil {
			cf.Accepted()
		}
	}
}

// Version returns a number that changes whenever a topic is created,
// deleted or grown (or the catalog is replaced from a snapshot): consumer
// groups recompute what they subscribe to only when it changes.
func (c *Catalog) Version() uint64 { return c.cur.Load().version }
