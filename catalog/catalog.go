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
// through Options.PersistTopic, which receives the one record a change
// touches (a topic's, keyed by TopicKey) before the change becomes visible:
// a change costs the same whatever the catalog's size, and no record grows
// with the number of topics.
package catalog

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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
	// ErrLimit: the change would take the catalog past
	// Options.MaxTotalPartitions.
	ErrLimit = errors.New("catalog: limit reached")
	// ErrPersist wraps an error returned by Options.PersistTopic or
	// PersistGroup; the change it
	// was for did not happen.
	ErrPersist = errors.New("catalog: persisting the change failed")
	// ErrUnavailable, returned by a PersistTopic or PersistGroup (and
	// then wrapped with ErrPersist), says that changes cannot be made
	// through this node right now but may be through another (cluster
	// mode: the node has no valid lease).
	ErrUnavailable = errors.New("catalog: changes cannot be made through this node right now")
)

// Advised is an error of a PersistTopic or PersistGroup that comes with
// what an operator can do about it (cluster mode: etcd refusing a node
// without an etcd user). Its text is the error's followed by the advice in
// parentheses. Where an answer gives a short message rather than the whole
// error (AlterConfigs), the server gives the advice alone.
type Advised struct {
	Err    error
	Advice string
}

func (a *Advised) Error() string { return fmt.Sprintf("%v (%s)", a.Err, a.Advice) }

// Unwrap returns the error advised on.
func (a *Advised) Unwrap() error { return a.Err }

// Conflict is the error a PersistTopic or PersistGroup returns when it writes
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
	// PersistTopic, if set, is called with the record a change produces
	// for the topic it creates, grows or deletes: key is TopicKey of the
	// topic's name, record its encoding (TopicRecords), nil when the topic
	// is deleted. It is called before the change becomes visible. If it
	// returns an error the change is abandoned and the operation fails with
	// an error wrapping ErrPersist, except for a *Conflict, whose Current is
	// then the stored record of key: the catalog takes it and applies the
	// change again. Calls are serialised (never concurrent) and happen in
	// the order of the changes.
	PersistTopic func(key string, record []byte) error
	// PersistGroup is PersistTopic for one group's configs (groups.go):
	// their snapshot (GroupConfigSnapshot), nil when they are removed.
	PersistGroup func(group string, snapshot []byte) error
	// Shared says that other writers change the same records (cluster
	// mode, with PersistTopic and PersistGroup comparing revisions): a change
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
	// MaxTotalPartitions, if positive, bounds the partitions of all
	// topics together: a create or grow that would pass it fails with
	// ErrLimit. Every Metadata answer for all topics lists every
	// partition, so without a bound a few small requests could make each
	// such answer hundreds of megabytes. Topics already stored are loaded
	// whatever their number.
	MaxTotalPartitions int64
}

// view is an immutable state of the catalog. Its topics are shared with the
// views after it that did not change them: a change copies the slice of
// pointers and the maps (withTopic), not the topics, and indexes nothing
// again, so it costs little even with many topics.
type view struct {
	version    uint64   // bumped by every change
	partitions int64    // of all topics
	sorted     []*Topic // by name
	byName     map[string]*Topic
	byID       map[[16]byte]*Topic
	byKey      map[string]*Topic // collisionKey(name) -> topic
}

// Catalog is the set of topics. The zero value is not usable; call New.
type Catalog struct {
	mu           sync.Mutex // serialises changes (and the persist calls)
	persistTopic func(string, []byte) error
	persistGroup func(string, []byte) error
	shared       bool
	removed      func([]string)
	maxTotal     int64
	cur          atomic.Pointer[view]
	groups       atomic.Pointer[groupsView]
}

// New returns an empty catalog.
func New(opts Options) *Catalog {
	c := &Catalog{persistTopic: opts.PersistTopic, persistGroup: opts.PersistGroup, shared: opts.Shared, removed: opts.Removed,
		maxTotal: opts.MaxTotalPartitions}
	c.cur.Store(buildView(nil))
	c.groups.Store(&groupsView{})
	return c
}

// buildView indexes topics (which it takes over) into a view.
func buildView(topics []Topic) *view {
	v := &view{
		sorted: make([]*Topic, len(topics)),
		byName: make(map[string]*Topic, len(topics)),
		byID:   make(map[[16]byte]*Topic, len(topics)),
		byKey:  make(map[string]*Topic, len(topics)),
	}
	for i := range topics {
		t := &topics[i]
		v.sorted[i] = t
		v.byName[t.Name], v.byID[t.ID], v.byKey[collisionKey(t.Name)] = t, t, t
		v.partitions += int64(t.Partitions)
	}
	slices.SortFunc(v.sorted, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// withTopic returns a view of v's topics with key's topic (if any) replaced
// by a copy of t (nil: removed). Its version is set by install.
func withTopic(v *view, key string, t *Topic) *view {
	next := cloneView(v)
	setTopic(next, key, t)
	return next
}

// cloneView copies v's indexes (not its topics) into a view not yet
// published, which setTopic may then change in place.
func cloneView(v *view) *view {
	sorted := make([]*Topic, len(v.sorted), len(v.sorted)+1)
	copy(sorted, v.sorted)
	return &view{partitions: v.partitions, sorted: sorted, byName: maps.Clone(v.byName), byID: maps.Clone(v.byID), byKey: maps.Clone(v.byKey)}
}

// setTopic replaces, in v (a view no reader has), key's topic (if any) by
// a copy of t (nil: removed).
func setTopic(v *view, key string, t *Topic) {
	if old, ok := v.byKey[key]; ok {
		delete(v.byName, old.Name)
		delete(v.byID, old.ID)
		delete(v.byKey, key)
		i, _ := slices.BinarySearchFunc(v.sorted, old.Name, byName)
		v.sorted = slices.Delete(v.sorted, i, i+1)
		v.partitions -= int64(old.Partitions)
	}
	if t != nil {
		nt := t.clone()
		v.byName[nt.Name], v.byID[nt.ID], v.byKey[key] = &nt, &nt, &nt
		i, _ := slices.BinarySearchFunc(v.sorted, nt.Name, byName)
		v.sorted = slices.Insert(v.sorted, i, &nt)
		v.partitions += int64(nt.Partitions)
	}
}

// draft is the view a change works on: base until the change sets a
// topic, then a copy of it (made once) that the change alters in place and
// publishes at its end. A change that fails before setting anything copies
// nothing.
type draft struct {
	base, v *view
}

func (d *draft) view() *view {
	if d.v != nil {
		return d.v
	}
	return d.base
}

func (d *draft) set(key string, t *Topic) {
	if d.v == nil {
		d.v = cloneView(d.base)
	}
	setTopic(d.v, key, t)
}

// checkLimit refuses adding add partitions to v past the catalog's bound.
func (c *Catalog) checkLimit(v *view, add int64) error {
	if c.maxTotal > 0 && v.partitions+add > c.maxTotal {
		return fmt.Errorf("%w: the topics would have %d partitions together, more than the node's limit of %d (--max-partitions)", ErrLimit, v.partitions+add, c.maxTotal)
	}
	return nil
}

func byName(t *Topic, name string) int { return strings.Compare(t.Name, name) }

// MaxTotalPartitions is the bound on the partitions of all topics together
// (Options.MaxTotalPartitions; 0: none).
func (c *Catalog) MaxTotalPartitions() int64 { return c.maxTotal }

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

// TopicKey is the key of the record that holds topic name
// (Options.PersistTopic): the name with '.' as '_', so that two names Kafka
// considers colliding share one record, and two nodes creating them at the
// same moment meet on it (a Conflict) rather than both succeed.
func TopicKey(name string) string { return collisionKey(name) }

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
	t, ok := c.cur.Load().byName[name]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// LookupID returns the topic whose ID is id.
func (c *Catalog) LookupID(id [16]byte) (Topic, bool) {
	t, ok := c.cur.Load().byID[id]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// Name returns the name of the topic whose ID is id, without copying the
// topic: the request path resolves the topic IDs of OffsetCommit and
// OffsetFetch v10 with it.
func (c *Catalog) Name(id [16]byte) (string, bool) {
	t, ok := c.cur.Load().byID[id]
	if !ok {
		return "", false
	}
	return t.Name, true
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
	for _, t := range v.sorted {
		if !fn(t) {
			return
		}
	}
}

// Sorted returns the topics in name order as they are at one version of the
// catalog, and that version (Range and Version, read separately, may see two
// different ones). The slice and its topics are shared with the catalog, which
// never changes them once published: the caller must not modify them. It
// costs no copy, so holding on to it keeps that version's topics alive for as
// long as it is held (a regex matching done in slices goes on with the
// topics it started with).
func (c *Catalog) Sorted() ([]*Topic, uint64) {
	v := c.cur.Load()
	return v.sorted, v.version
}

// checkCreate validates a creation against view v.
func checkCreate(v *view, name string, partitions int32, racks [][]string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if _, ok := v.byName[name]; ok {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	if t, ok := v.byKey[collisionKey(name)]; ok {
		return fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are interchangeable in Kafka metric names)", ErrInvalidName, name, t.Name)
	}
	if err := validatePartitions(partitions); err != nil {
		return err
	}
	return validateRacks(racks, partitions)
}

// ValidateCreate reports the error Create would return now, without creating
// anything (CreateTopics with ValidateOnly).
func (c *Catalog) ValidateCreate(name string, partitions int32, racks [][]string) error {
	v := c.cur.Load()
	if err := checkCreate(v, name, partitions, racks); err != nil {
		return err
	}
	return c.checkLimit(v, int64(partitions))
}

// ValidateMany reports the errors CreateMany(topics) would return now,
// without creating anything (CreateTopics with ValidateOnly): each topic is
// checked against the catalog and the topics before it in the list (a name
// or a colliding name already listed, the partitions of all of them against
// the node's bound), so a validation passes exactly where the same request
// would create. Unlike CreateMany it copies nothing.
func (c *Catalog) ValidateMany(topics []NewTopic) []error {
	v := c.cur.Load()
	errs := make([]error, len(topics))
	listed := make(map[string]string, len(topics)) // collision key → name
	var added int64
	for i, t := range topics {
		if err := checkCreate(v, t.Name, t.Partitions, t.Racks); err != nil {
			errs[i] = err
			continue
		}
		if other, ok := listed[collisionKey(t.Name)]; ok {
			if other == t.Name {
				errs[i] = fmt.Errorf("%w: %q", ErrExists, t.Name)
			} else {
				errs[i] = fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are interchangeable in Kafka metric names)", ErrInvalidName, t.Name, other)
			}
			continue
		}
		if err := c.checkLimit(v, added+int64(t.Partitions)); err != nil {
			errs[i] = err
			continue
		}
		listed[collisionKey(t.Name)] = t.Name
		added += int64(t.Partitions)
	}
	return errs
}

// Create adds a topic with the given partition count and optional
// per-partition racks (nil, or one entry per partition).
func (c *Catalog) Create(name string, partitions int32, racks [][]string) (Topic, error) {
	t := Topic{Name: name, ID: TopicID(name), Partitions: partitions, Racks: racks}.clone()
	if err := c.change(TopicKey(name), c.creation(&t)); err != nil {
		return Topic{}, err
	}
	return t.clone(), nil
}

// creation is the change that creates t.
func (c *Catalog) creation(t *Topic) func(v *view) (*Topic, error) {
	return func(v *view) (*Topic, error) {
		if err := checkCreate(v, t.Name, t.Partitions, t.Racks); err != nil {
			return nil, err
		}
		if _, ok := v.byID[t.ID]; ok { // a SHA-256 prefix collision; never expected
			return nil, fmt.Errorf("%w: %q: its topic ID collides with an existing topic", ErrExists, t.Name)
		}
		if err := c.checkLimit(v, int64(t.Partitions)); err != nil {
			return nil, err
		}
		return t, nil
	}
}

// NewTopic is one topic of CreateMany: its name, partition count and
// optional per-partition racks, as Create takes them.
type NewTopic struct {
	Name       string
	Partitions int32
	Racks      [][]string
}

// CreateMany creates topics as Create does, one after the other (each
// checked against the catalog with the ones before it, each persisted
// through Options.PersistTopic before the next), and returns each one's
// error (nil: created). A new view is published once per createBatch
// topics: a Create copies the catalog's indexes, so creating N topics one
// Create at a time on a catalog of M costs O(N·M), and a CreateTopics
// request of thousands of topics kept a core busy for tens of seconds; here
// the copies cost O(M·N/createBatch). The catalog's lock is let go between
// batches, so other changes (and a cluster node following the others) do
// not wait for a whole request.
func (c *Catalog) CreateMany(topics []NewTopic) []error {
	errs := make([]error, 0, len(topics))
	for len(topics) > 0 {
		n := min(len(topics), createBatch)
		errs = append(errs, c.createBatch(topics[:n])...)
		topics = topics[n:]
	}
	return errs
}

// createBatch is the most topics CreateMany creates under one hold of the
// catalog's lock and publishes in one view.
const createBatch = 1000

func (c *Catalog) createBatch(topics []NewTopic) []error {
	errs := make([]error, len(topics))
	c.mu.Lock()
	start := c.cur.Load()
	d := draft{base: start}
	for i, nt := range topics {
		t := Topic{Name: nt.Name, ID: TopicID(nt.Name), Partitions: nt.Partitions, Racks: nt.Racks}.clone()
		errs[i] = c.changeIn(&d, TopicKey(nt.Name), c.creation(&t))
	}
	if d.v != nil {
		c.install(d.v)
	}
	end := c.cur.Load()
	c.mu.Unlock()
	c.notifyRemoved(start, end)
	return errs
}

// Delete removes the topic called name.
func (c *Catalog) Delete(name string) error {
	return c.change(TopicKey(name), func(v *view) (*Topic, error) {
		if _, ok := v.byName[name]; !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return nil, nil
	})
}

// removedTopics lists the names of old's topics that next lacks.
func removedTopics(old, next *view) []string {
	var names []string
	for _, t := range old.sorted {
		if next.byName[t.Name] == nil {
			names = append(names, t.Name)
		}
	}
	return names
}

func checkAdd(v *view, name string, total int32, racks [][]string) (*Topic, error) {
	t, ok := v.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	cur := t.Partitions
	if total <= cur {
		if total == cur {
			return nil, fmt.Errorf("%w: topic %q already has %d partitions", ErrInvalidPartitions, name, cur)
		}
		return nil, fmt.Errorf("%w: topic %q has %d partitions, which cannot be decreased to %d", ErrInvalidPartitions, name, cur, total)
	}
	if err := validatePartitions(total); err != nil {
		return nil, err
	}
	if racks != nil && int64(len(racks)) != int64(total-cur) {
		return nil, fmt.Errorf("%w: %d rack lists for %d new partitions", ErrInvalidRacks, len(racks), total-cur)
	}
	return t, validateRacks(racks, int32(len(racks)))
}

// ValidateAddPartitions reports the error AddPartitions would return now,
// without changing anything (CreatePartitions with ValidateOnly).
func (c *Catalog) ValidateAddPartitions(name string, total int32, racks [][]string) error {
	v := c.cur.Load()
	t, err := checkAdd(v, name, total, racks)
	if err != nil {
		return err
	}
	return c.checkLimit(v, int64(total-t.Partitions))
}

// AddPartitions grows topic name to total partitions; partition counts never
// decrease. racks optionally lists the racks of the new partitions only
// (len(racks) == total - current). If the topic has racks and racks is nil,
// the new partitions get no rack; if the topic has none and racks is given,
// the existing partitions get no rack.
func (c *Catalog) AddPartitions(name string, total int32, racks [][]string) (Topic, error) {
	var t Topic
	err := c.change(TopicKey(name), func(v *view) (*Topic, error) {
		cur, err := checkAdd(v, name, total, racks)
		if err != nil {
			return nil, err
		}
		if err := c.checkLimit(v, int64(total-cur.Partitions)); err != nil {
			return nil, err
		}
		t = cur.clone()
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
		return &t, nil
	})
	if err != nil {
		return Topic{}, err
	}
	return t.clone(), nil
}

// change applies a change to the topic whose record is key: apply returns
// that topic's next state given the current view (nil: there is none), or an
// error that abandons the change; the record is persisted, then the view
// published. On a Conflict the stored record of key is installed and apply
// runs again on it. Options.Removed hears of every topic the catalog lost
// meanwhile: the one deleted, and one the stored record no longer had.
func (c *Catalog) change(key string, apply func(v *view) (*Topic, error)) error {
	c.mu.Lock()
	start := c.cur.Load()
	err := c.changeLocked(key, apply)
	end := c.cur.Load()
	c.mu.Unlock()
	c.notifyKeyRemoved(start, end, key)
	return err
}

// notifyKeyRemoved is notifyRemoved after a change of key's record alone:
// only its topic can have gone.
func (c *Catalog) notifyKeyRemoved(old, v *view, key string) {
	if t := old.byKey[key]; t != nil && v.byName[t.Name] == nil && c.removed != nil {
		c.removed([]string{t.Name})
	}
}

// changeLocked is change with c.mu held, leaving the notification to the
// caller.
func (c *Catalog) changeLocked(key string, apply func(v *view) (*Topic, error)) error {
	d := draft{base: c.cur.Load()}
	err := c.changeIn(&d, key, apply)
	if d.v != nil {
		c.install(d.v)
	}
	return err
}

// changeIn applies a change of key's record to d (see change): on success
// d holds the change; on a Conflict, the stored record whatever the
// outcome. The caller publishes d.
func (c *Catalog) changeIn(d *draft, key string, apply func(v *view) (*Topic, error)) error {
	for conflicts := 0; ; conflicts++ {
		t, err := apply(d.view())
		if err != nil {
			return err
		}
		if c.persistTopic != nil {
			err = c.persistTopic(key, encodeRecord(t))
		}
		var cf *Conflict
		switch {
		case err == nil:
			d.set(key, t)
			return nil
		case !errors.As(err, &cf):
			return fmt.Errorf("%w: %w", ErrPersist, err)
		case conflicts >= MaxConflicts:
			return fmt.Errorf("%w: %d concurrent changes in a row through other nodes; try again: %w", ErrPersist, conflicts+1, err)
		}
		backOff(conflicts)
		stored, derr := decodeRecord(key, cf.Current)
		if derr != nil {
			return fmt.Errorf("%w: the stored record of topic key %q: %w", ErrPersist, key, derr)
		}
		if cur := d.view().byKey[key]; !(stored == nil && cur == nil || stored != nil && cur != nil && string(encodeRecord(cur)) == string(encodeRecord(stored))) {
			d.set(key, stored)
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
