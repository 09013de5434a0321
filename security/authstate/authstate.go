// Package authstate is a node's durable security state: the SCRAM
// credentials of its users and its ACL bindings, kept as records of one
// store partition (Partition), so that they live wherever the node's other
// state lives (the embedded disk store, or etcd in cluster mode) and survive
// restarts.
//
// A State answers authentication (sasl.Credentials) and authorization
// (server.Authorizer) from immutable snapshots published atomically, so the
// request path never takes a lock, and serves the security admin APIs
// (server.SecurityAdmin) with Kafka's semantics. Every change is appended to
// the store before it becomes visible or is acknowledged.
//
// Record layout in Partition (a nil value is a tombstone):
//
//	u/<mechanism>/<user>   sasl.Credential.MarshalBinary
//	a/<acl.Binding.Key>    acl.Binding.MarshalBinary
//	k/unknown-users        32 random bytes: the key of unknown users' made-up credentials
//
// In cluster mode other nodes change the same records; Watch (etcdwatch.go)
// follows them and feeds Sync and Reload.
package authstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
)

// Partition is the store partition of the security records (the topic
// catalog uses -1, coordinator partitions are >= 0). Negative partitions
// are not fenced in cluster mode: every node may write them.
const Partition int32 = -2

// DefaultIterations is the SCRAM iteration count of credentials cohort
// derives itself (EnsureUser): that of cohort user set, so that the
// bootstrap user does not stand out among the users (sasl.DefaultIterations).
const DefaultIterations = sasl.DefaultIterations

// Record key prefixes.
const (
	userPrefix = "u/"
	aclPrefix  = "a/"
	// unknownKeyRecord holds the secret that derives the credentials made
	// up for unknown users (sasl.UnknownUsers): created once, by the first
	// node that finds none, and the same on every node and after restarts,
	// so that an unknown user's salt never changes, as a real user's does
	// not.
	unknownKeyRecord = "k/unknown-users"
	unknownKeyLen    = 32
	// keyPrefix is that of records of keys and parameters: one of a later
	// version that this one does not know is skipped, not refused (unlike
	// an unknown u/ or a/ record, skipping one loosens no rule).
	keyPrefix = "k/"
)

// mechanisms are the SCRAM mechanisms a user can have credentials for.
var mechanisms = []string{sasl.ScramSHA256, sasl.ScramSHA512}

// Options configures Open.
type Options struct {
	// Store holds the records (Partition). Required.
	Store store.Store
	// Authorizer decides requests on the current ACLs (super users,
	// allow-everyone-if-no-acl-found).
	Authorizer acl.Authorizer
	// Logger receives changes applied from elsewhere and load problems
	// (never a secret); nil means slog.Default().
	Logger *slog.Logger
	// Shared says that other nodes change the same records (cluster mode,
	// Store in etcd). Each change made through this State is then
	// published with every change the store held before it, read again
	// once the change is stored: the node never enforces a change without
	// those made before it elsewhere, which its watch may not have brought
	// yet (an ACL created through it after a DENY created through another
	// node must not take effect without that DENY).
	Shared bool
	// ErrorHint, when set, says what an operator can do about a store
	// error (cluster mode: etcd refusing a node without an etcd user);
	// a change the store refused then has it in its error, in
	// parentheses, as the catalog's refusals do. "": nothing to say.
	ErrorHint func(error) string
}

// credID names one stored credential.
type credID struct{ user, mechanism string }

func (id credID) key() string { return userPrefix + id.mechanism + "/" + id.user }

func aclKey(b acl.Binding) string { return aclPrefix + b.Key() }

// State is a node's credentials and ACLs. It implements sasl.Credentials,
// server.Authorizer and server.SecurityAdmin; all methods are safe for
// concurrent use.
type State struct {
	store  store.Store
	authz  acl.Authorizer
	log    *slog.Logger
	shared bool // Options.Shared
	// errorHint is Options.ErrorHint.
	errorHint func(error) string

	// mu serializes changes. A local change holds it from its Append to
	// its publication, and Apply and Reload take it too: a change another
	// node makes after ours reaches etcd is seen by the watch after ours,
	// so it is applied after our publication and the state converges to
	// etcd's order. A change another node made before ours is published
	// with ours (commitLocked reads the store again when shared), so what
	// the node enforces is always etcd's state at some revision, never a
	// later change without an earlier one.
	mu       sync.Mutex
	bindings map[string]acl.Binding // by record key (guarded by mu)
	// kRecords are the k/ record keys the store holds (guarded by mu):
	// with bindings and the credentials, every key of Partition, which
	// catchUpLocked counts.
	kRecords map[string]bool
	// rev is a store revision the state is at least as recent as (guarded
	// by mu; 0 when unknown, or when the store has no revisions): every
	// record is as the store held it at rev or at some later revision
	// (revStore, catchUpLocked). Also 0 while the store holds a key with
	// an empty value, which the store's count of keys includes but which is
	// no record: the count would no longer show a deletion.
	rev int64

	// Published snapshots, replaced whole, never modified.
	acls  atomic.Pointer[acl.Set]
	creds atomic.Pointer[map[credID]sasl.Credential]
	// aclVersion counts the ACL snapshots published (ACLVersion).
	aclVersion atomic.Uint64
	// unknownKey is the unknownKeyRecord's value (nil until there is one),
	// and shapes the typical iteration count and salt length of the stored
	// credentials, per mechanism ("" for all), published with creds.
	unknownKey atomic.Pointer[[]byte]
	shapes     atomic.Pointer[map[string]credShape]
}

// credShape is what an unknown user's made-up credential must look like.
type credShape struct{ iterations, saltLen int }

// shapesOf returns the most common iteration count and salt length of the
// credentials, per mechanism and over all ("" key); ties go to the smaller.
func shapesOf(creds map[credID]sasl.Credential) map[string]credShape {
	counts := map[string]map[credShape]int{}
	for id, c := range creds {
		sh := credShape{c.Iterations, len(c.Salt)}
		for _, m := range []string{id.mechanism, ""} {
			if counts[m] == nil {
				counts[m] = map[credShape]int{}
			}
			counts[m][sh]++
		}
	}
	out := map[string]credShape{}
	for m, byShape := range counts {
		var best credShape
		most := 0
		for sh, n := range byShape {
			if n > most || n == most && (sh.iterations < best.iterations || sh.iterations == best.iterations && sh.saltLen < best.saltLen) {
				best, most = sh, n
			}
		}
		out[m] = best
	}
	return out
}

// UnknownUser implements sasl.UnknownUsers: the stored key, and the
// typical shape of the mechanism's stored credentials (of all of them when
// the mechanism has none; zero when there are none: sasl's defaults).
func (s *State) UnknownUser(mechanism string) (key []byte, iterations, saltLength int) {
	if k := s.unknownKey.Load(); k != nil {
		key = *k
	}
	shapes := *s.shapes.Load()
	sh, ok := shapes[mechanism]
	if !ok {
		sh = shapes[""]
	}
	return key, sh.iterations, sh.saltLen
}

var (
	_ sasl.Credentials     = (*State)(nil)
	_ sasl.UnknownUsers    = (*State)(nil)
	_ server.Authorizer    = (*State)(nil)
	_ server.SecurityAdmin = (*State)(nil)
)

// revStore is a store whose reads name the revision they were made at
// (store/etcd), so that a State that read everything once need later read
// only what changed since (catchUpLocked).
type revStore interface {
	// LoadRev is store.Store's Load, returning the revision read at.
	LoadRev(ctx context.Context, p int32, fn func(store.Record) error) (int64, error)
	// LoadSince reads, at the store's current revision (returned), the
	// records of p modified after revision after, and the number of
	// records p holds.
	LoadSince(ctx context.Context, p int32, after int64, fn func(store.Record) error) (rev, count int64, err error)
}

// Open loads the security records of opts.Store. A record it cannot
// decode is an error: skipping it could drop a DENY binding, so the node
// refuses to start rather than enforce less than it was told to.
func Open(ctx context.Context, opts Options) (*State, error) {
	if opts.Store == nil {
		return nil, errors.New("authstate: Options.Store is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &State{store: opts.Store, authz: opts.Authorizer, log: opts.Logger, shared: opts.Shared, errorHint: opts.ErrorHint, bindings: map[string]acl.Binding{}, kRecords: map[string]bool{}}
	empty := map[credID]sasl.Credential{}
	s.creds.Store(&empty)
	noShapes := map[string]credShape{}
	s.shapes.Store(&noShapes)
	if err := s.Reload(ctx); err != nil {
		return nil, err
	}
	// A store with users from before the key existed gets one now; one
	// without users gets one with its first credential (commitLocked), so
	// that a node that never had users writes no record an earlier cohort
	// could not read.
	if len(*s.creds.Load()) > 0 && s.unknownKey.Load() == nil {
		s.mu.Lock()
		es, err := s.withUnknownKey(nil, true)
		if err == nil {
			err = s.commitLocked(ctx, es)
		}
		s.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("authstate: storing the unknown-user key: %w", err)
		}
	}
	return s, nil
}

// withUnknownKey returns es with a new random unknownKeyRecord added when
// there is none yet and es stores a credential (or force). Two nodes may
// both write one; every node then follows the record etcd keeps (the
// watch), so they agree again at once.
func (s *State) withUnknownKey(es []entry, force bool) ([]entry, error) {
	if s.unknownKey.Load() != nil {
		return es, nil
	}
	need := force
	for _, e := range es {
		need = need || e.cred != nil
	}
	if !need {
		return es, nil
	}
	k := make([]byte, unknownKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("authstate: no randomness for the unknown-user key: %w", err)
	}
	return append(es, entry{key: unknownKeyRecord, unknownKey: k}), nil
}

// Reload re-reads every record from the store and replaces the state with
// them (after a broken watch in cluster mode). On error the state is left
// as it was.
func (s *State) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(ctx)
}

// reloadLocked is Reload; the caller holds s.mu. The ACL snapshot (and
// ACLVersion) changes only if the bindings read differ from those held.
func (s *State) reloadLocked(ctx context.Context) error {
	creds := map[credID]sasl.Credential{}
	bindings := map[string]acl.Binding{}
	kRecords := map[string]bool{}
	var key []byte
	empty := false // a key holds an empty value: no record, yet etcd counts it
	fn := func(r store.Record) error {
		empty = empty || len(r.Value) == 0
		e, err := decode(r.Key, r.Value)
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.key, keyPrefix) && e.stored() {
			kRecords[e.key] = true
		}
		switch {
		case e.skip:
		case e.key == unknownKeyRecord:
			key = e.unknownKey
		default:
			e.fold(creds, bindings)
		}
		return nil
	}
	var rev int64
	var err error
	if rs, ok := s.store.(revStore); ok {
		rev, err = rs.LoadRev(ctx, Partition, fn)
	} else {
		err = s.store.Load(ctx, Partition, fn)
	}
	if err != nil {
		return fmt.Errorf("authstate: loading: %w", err)
	}
	if empty {
		rev = 0 // catchUpLocked's count would take the key for one the state holds
	}
	changed := !maps.Equal(bindings, s.bindings)
	s.bindings, s.kRecords, s.rev = bindings, kRecords, rev
	s.creds.Store(&creds)
	shapes := shapesOf(creds)
	s.shapes.Store(&shapes)
	if key != nil {
		s.unknownKey.Store(&key)
	}
	if changed || s.acls.Load() == nil {
		s.acls.Store(acl.NewSet(slices.Collect(maps.Values(bindings))))
		s.aclVersion.Add(1)
	}
	return nil
}

// Apply applies one record changed elsewhere (another node, seen through
// etcd): key is the record key within Partition, an empty value a
// deletion. A record it cannot decode is logged and ignored, leaving the
// key's previous value.
func (s *State) Apply(key, value []byte) {
	e, err := decode(key, value)
	if err != nil {
		s.log.Error("authstate: ignoring a security record from the store", "err", err)
		return
	}
	s.mu.Lock()
	s.applyLocked([]entry{e})
	s.rev = 0 // the event's value may be older than what the state holds
	s.mu.Unlock()
	s.log.Debug("authstate: security record applied", "key", e.key, "deleted", e.deleted())
}

// Sync brings the records at keys (within Partition) up to date with what
// read returns for each (nil: none), reading under the state's lock: no
// change made through this State can fall between a read and its use, so a
// read that sees every change already made (a linearizable read of the
// shared store, in cluster mode) never takes the state back past one of
// them. Applying an event's value instead could: the late event of an older
// write, say the ACL this node has just deleted, would restore it until the
// event of the deletion came. Every key is read before any is applied, and
// they are published together: the records of one change (a DeleteACLs
// removing a DENY and the ALLOW it overrode) are never decided on half
// applied. An undecodable record is logged and ignored, as by Apply; an
// error of read stops the sync, applies nothing and is returned.
func (s *State) Sync(keys [][]byte, read func(key []byte) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	es := make([]entry, 0, len(keys))
	for _, key := range keys {
		value, err := read(key)
		if err != nil {
			return err
		}
		e, err := decode(key, value)
		if err != nil {
			s.log.Error("authstate: ignoring a security record from the store", "err", err)
			s.rev = 0 // the key keeps a value the store no longer holds
			continue
		}
		es = append(es, e)
	}
	s.applyLocked(es)
	for _, e := range es {
		s.log.Debug("authstate: security record applied", "key", e.key, "deleted", e.deleted())
	}
	return nil
}

// entry is one decoded record: a credential, a binding, or (neither) the
// deletion of key.
type entry struct {
	key        string
	id         credID // u/ keys
	cred       *sasl.Credential
	binding    *acl.Binding // a/ keys with a value
	unknownKey []byte       // the unknownKeyRecord's value
	skip       bool         // a k/ record of a later version
	present    bool         // decoded from a value (not a deletion)
}

func (e entry) deleted() bool { return e.cred == nil && e.binding == nil && e.unknownKey == nil }

// stored reports whether the store holds e's key once e is applied.
func (e entry) stored() bool { return e.present || !e.deleted() }

// errBadRecord wraps every decoding failure.
var errBadRecord = errors.New("malformed security record")

// decode parses one record; the result shares nothing with key and value.
func decode(key, value []byte) (entry, error) {
	e := entry{key: string(key), present: len(value) > 0}
	switch {
	case strings.HasPrefix(e.key, userPrefix):
		mech, user, ok := strings.Cut(e.key[len(userPrefix):], "/")
		if !ok || !slices.Contains(mechanisms, mech) {
			return e, fmt.Errorf("%w: key %q", errBadRecord, e.key)
		}
		e.id = credID{user: user, mechanism: mech}
		if len(value) == 0 {
			return e, nil
		}
		var c sasl.Credential
		if err := c.UnmarshalBinary(value); err != nil || c.Mechanism != mech {
			return e, fmt.Errorf("%w: key %q: bad credential", errBadRecord, e.key)
		}
		e.cred = &c
	case strings.HasPrefix(e.key, aclPrefix):
		if len(value) == 0 {
			return e, nil
		}
		var b acl.Binding
		if err := b.UnmarshalBinary(value); err != nil {
			return e, fmt.Errorf("%w: key %q: %v", errBadRecord, e.key, err)
		}
		if aclKey(b) != e.key {
			return e, fmt.Errorf("%w: key %q does not match its binding", errBadRecord, e.key)
		}
		e.binding = &b
	case strings.HasPrefix(e.key, keyPrefix) && e.key != unknownKeyRecord:
		e.skip = true
	case e.key == unknownKeyRecord && len(value) == 0:
		e.skip = true // deleted: a new key is drawn
	case e.key == unknownKeyRecord:
		if len(value) != unknownKeyLen {
			return e, fmt.Errorf("%w: key %q: %d bytes, want %d", errBadRecord, e.key, len(value), unknownKeyLen)
		}
		e.unknownKey = bytes.Clone(value)
	default:
		return e, fmt.Errorf("%w: unknown key %q", errBadRecord, e.key)
	}
	return e, nil
}

// record encodes e for the store.
func (e entry) record() (store.Record, error) {
	r := store.Record{Key: []byte(e.key)}
	var err error
	switch {
	case e.cred != nil:
		r.Value, err = e.cred.MarshalBinary()
	case e.binding != nil:
		r.Value, err = e.binding.MarshalBinary()
	case e.unknownKey != nil:
		r.Value = bytes.Clone(e.unknownKey)
	}
	return r, err
}

// fold applies e to the maps.
func (e entry) fold(creds map[credID]sasl.Credential, bindings map[string]acl.Binding) {
	switch {
	case e.cred != nil:
		creds[e.id] = *e.cred
	case e.binding != nil:
		bindings[e.key] = *e.binding
	case strings.HasPrefix(e.key, userPrefix):
		delete(creds, e.id)
	default:
		delete(bindings, e.key)
	}
}

// applyLocked publishes entries: new credential and ACL snapshots. The
// caller holds s.mu.
func (s *State) applyLocked(es []entry) {
	creds := *s.creds.Load()
	credsCopied := false
	before := map[string]*acl.Binding{} // ACL keys touched -> binding before, nil if absent
	for _, e := range es {
		if strings.HasPrefix(e.key, keyPrefix) {
			if e.stored() {
				s.kRecords[e.key] = true
			} else {
				delete(s.kRecords, e.key)
			}
		}
		if e.skip {
			continue
		}
		if e.key == unknownKeyRecord {
			k := e.unknownKey
			s.unknownKey.Store(&k)
			continue
		}
		if strings.HasPrefix(e.key, aclPrefix) {
			if _, seen := before[e.key]; !seen {
				before[e.key] = nil
				if b, ok := s.bindings[e.key]; ok {
					before[e.key] = &b
				}
			}
		} else if !credsCopied {
			creds, credsCopied = maps.Clone(creds), true
		}
		e.fold(creds, s.bindings)
	}
	if credsCopied {
		s.creds.Store(&creds)
		shapes := shapesOf(creds)
		s.shapes.Store(&shapes)
	}
	if len(before) == 0 {
		return
	}
	var add, del []acl.Binding
	for k, old := range before {
		now, ok := s.bindings[k]
		if old != nil && (!ok || now != *old) {
			del = append(del, *old)
		}
		if ok && (old == nil || now != *old) {
			add = append(add, now)
		}
	}
	if len(add)+len(del) > 0 {
		s.acls.Store(s.acls.Load().Without(del...).With(add...))
		s.aclVersion.Add(1)
	}
}

// ACLVersion changes whenever the ACLs do (a binding created, deleted or
// replaced, here or, in a cluster, by another node): what was decided under
// an older version may be decided differently now.
func (s *State) ACLVersion() uint64 { return s.aclVersion.Load() }

// storageError is the error of a change the store refused with err
// (server.ErrAdminStorage), with Options.ErrorHint's advice if it has one.
func (s *State) storageError(err error) error {
	if s.errorHint != nil {
		if h := s.errorHint(err); h != "" {
			return fmt.Errorf("%w: %w (%s)", server.ErrAdminStorage, err, h)
		}
	}
	return fmt.Errorf("%w: %w", server.ErrAdminStorage, err)
}

// commitLocked makes es durable, then visible, with the unknown-user key
// when es stores the first credential. The caller holds s.mu.
//
// In a shared store the state is then brought up to the store's current
// revision, es with it (catchUpLocked): other nodes' changes stored before
// es (those a client may have made, and seen answered, before this one)
// become visible with es, not after it when the watch brings them. Should
// that read fail, es is durable all the same: it is published alone, and
// the watch brings the others.
func (s *State) commitLocked(ctx context.Context, es []entry) error {
	if len(es) == 0 {
		return nil
	}
	es, err := s.withUnknownKey(es, false)
	if err != nil {
		return err
	}
	recs := make([]store.Record, len(es))
	for i, e := range es {
		r, err := e.record()
		if err != nil {
			return fmt.Errorf("authstate: encoding %q: %w", e.key, err)
		}
		recs[i] = r
	}
	if err := s.store.Append(ctx, Partition, recs); err != nil {
		return s.storageError(err)
	}
	if s.shared {
		err := s.catchUpLocked(ctx, es)
		if err == nil {
			return nil
		}
		s.log.Warn("authstate: reading the security records again after a change; the changes of other nodes follow through the watch", "err", err)
	}
	s.applyLocked(es)
	return nil
}

// catchUpLocked publishes the store's current state, own (this node's
// change, just stored) included; the caller holds s.mu. Where the store has
// revisions and the state is known to be at least as recent as s.rev, it
// reads only the records modified since s.rev, with the number of records
// the store holds: a record deleted since (which such a read does not
// show; the etcd store deletes a key, it keeps no tombstone) leaves that
// number below the state's, and then, as without revisions, everything is
// read again (reloadLocked). Nothing is published before the state is
// known to be the store's.
func (s *State) catchUpLocked(ctx context.Context, own []entry) error {
	rs, ok := s.store.(revStore)
	if !ok || s.rev == 0 {
		return s.reloadLocked(ctx)
	}
	changed := map[string]entry{} // by key: own, then what the store holds now
	for _, e := range own {
		changed[e.key] = e
	}
	var read []entry
	empty := false
	rev, count, err := rs.LoadSince(ctx, Partition, s.rev, func(r store.Record) error {
		empty = empty || len(r.Value) == 0
		e, err := decode(r.Key, r.Value)
		if err != nil {
			return err
		}
		changed[e.key] = e
		read = append(read, e)
		return nil
	})
	if err != nil {
		if errors.Is(err, errBadRecord) {
			return s.reloadLocked(ctx) // says which, or finds it gone
		}
		return fmt.Errorf("authstate: loading: %w", err)
	}
	if empty {
		// A key holding an empty value (written by something other than
		// cohort, which deletes keys) is no record, but etcd counts it: it
		// could make up for a deletion in the count.
		return s.reloadLocked(ctx)
	}
	n := int64(len(s.bindings) + len(*s.creds.Load()) + len(s.kRecords))
	for _, e := range changed {
		if was := s.holds(e); was != e.stored() {
			if was {
				n--
			} else {
				n++
			}
		}
	}
	if n != count {
		return s.reloadLocked(ctx) // a record deleted since s.rev is still held
	}
	s.applyLocked(append(slices.Clone(own), read...))
	s.rev = rev
	return nil
}

// holds reports whether the state holds a record of e's key. The caller
// holds s.mu.
func (s *State) holds(e entry) bool {
	switch {
	case strings.HasPrefix(e.key, userPrefix):
		return hasKey(*s.creds.Load(), e.id)
	case strings.HasPrefix(e.key, aclPrefix):
		return hasKey(s.bindings, e.key)
	default:
		return s.kRecords[e.key]
	}
}

// Lookup implements sasl.Credentials: lock-free, on the current snapshot.
func (s *State) Lookup(user, mechanism string) (sasl.Credential, bool) {
	c, ok := (*s.creds.Load())[credID{user: user, mechanism: mechanism}]
	return c, ok
}

// Authorize implements server.Authorizer on the current ACLs (lock-free).
func (s *State) Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.authz.Authorize(s.acls.Load(), principal, host, op, rt, name)
}

// AuthorizedOperations implements server.Authorizer.
func (s *State) AuthorizedOperations(principal, host string, rt acl.ResourceType, name string) int32 {
	return s.authz.AuthorizedOperations(s.acls.Load(), principal, host, rt, name)
}

// Users implements server.SecurityAdmin: each named user's credentials
// (every user's when names is nil), mechanisms in order, without keys.
func (s *State) Users(names []string) map[string][]server.UserCredential {
	creds := *s.creds.Load()
	out := map[string][]server.UserCredential{}
	add := func(id credID, c sasl.Credential) {
		out[id.user] = append(out[id.user], server.UserCredential{Mechanism: id.mechanism, Iterations: c.Iterations})
	}
	if names == nil {
		for id, c := range creds {
			add(id, c)
		}
		for _, cs := range out {
			slices.SortFunc(cs, func(a, b server.UserCredential) int { return strings.Compare(a.Mechanism, b.Mechanism) })
		}
		return out
	}
	for _, u := range names {
		if _, done := out[u]; done {
			continue
		}
		for _, m := range mechanisms {
			if c, ok := creds[credID{user: u, mechanism: m}]; ok {
				add(credID{user: u, mechanism: m}, c)
			}
		}
	}
	return out
}

// userOf returns the user's stored credential IDs.
func userOf(creds map[credID]sasl.Credential, user string) []credID {
	var ids []credID
	for _, m := range mechanisms {
		if id := (credID{user: user, mechanism: m}); hasKey(creds, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// checkName is Kafka's check of every credential change's user and
// mechanism.
func checkName(user, mechanism string) error {
	if user == "" {
		return fmt.Errorf("%w: the user name must not be empty", server.ErrUnacceptableCredential)
	}
	if !slices.Contains(mechanisms, mechanism) {
		return fmt.Errorf("%w %q", server.ErrUnsupportedMechanism, mechanism)
	}
	return nil
}

// checkUpsert is Kafka's check of a credential to store.
func checkUpsert(user, mechanism string, iterations int) error {
	if err := checkName(user, mechanism); err != nil {
		return err
	}
	if iterations < sasl.MinIterations {
		return fmt.Errorf("%w: too few iterations (%d, the minimum is %d)", server.ErrUnacceptableCredential, iterations, sasl.MinIterations)
	}
	if iterations > sasl.MaxIterations {
		return fmt.Errorf("%w: too many iterations (%d, the maximum is %d)", server.ErrUnacceptableCredential, iterations, sasl.MaxIterations)
	}
	return nil
}

// AlterUsers implements server.SecurityAdmin with the rules of Kafka's
// ScramControlManager: deletions are checked first, then upserts; a user
// whose first change is invalid gets that error for all its changes, and a
// user with a second change gets DUPLICATE for all of them (whatever the
// mechanisms: Kafka allows one change per user and request). Deleting a
// credential that does not exist is ErrAdminNotFound. The valid changes
// are stored together in one Append; if it fails they all get its error.
func (s *State) AlterUsers(ctx context.Context, upserts []server.UserUpsert, deletions []server.UserDeletion) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	creds := *s.creds.Load()
	userErr := map[string]error{}
	valid := map[string]entry{} // user -> its one valid change
	// first reports whether a change of user is to be checked: not if
	// the user failed already, nor if it has a valid change (then it is a
	// duplicate).
	first := func(user string) bool {
		if _, bad := userErr[user]; bad {
			return false
		}
		if _, dup := valid[user]; dup {
			delete(valid, user)
			userErr[user] = server.ErrAdminDuplicate
			return false
		}
		return true
	}
	for _, d := range deletions {
		if !first(d.User) {
			continue
		}
		id := credID{user: d.User, mechanism: d.Mechanism}
		switch err := checkName(d.User, d.Mechanism); {
		case err != nil:
			userErr[d.User] = err
		case !hasKey(creds, id):
			userErr[d.User] = fmt.Errorf("%w: user %q has no %s credential", server.ErrAdminNotFound, d.User, d.Mechanism)
		default:
			valid[d.User] = entry{key: id.key(), id: id}
		}
	}
	for _, u := range upserts {
		if !first(u.User) {
			continue
		}
		if err := checkUpsert(u.User, u.Mechanism, u.Iterations); err != nil {
			userErr[u.User] = err
			continue
		}
		c, err := sasl.CredentialFromSalted(u.Mechanism, u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			userErr[u.User] = fmt.Errorf("%w: %v", server.ErrUnacceptableCredential, err)
			continue
		}
		id := credID{user: u.User, mechanism: u.Mechanism}
		valid[u.User] = entry{key: id.key(), id: id, cred: &c}
	}
	es := make([]entry, 0, len(valid))
	for _, e := range valid {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	if err := s.commitLocked(ctx, es); err != nil {
		for u := range valid {
			userErr[u] = err
		}
	}
	errs := make([]error, 0, len(upserts)+len(deletions))
	for _, u := range upserts {
		errs = append(errs, userErr[u.User])
	}
	for _, d := range deletions {
		errs = append(errs, userErr[d.User])
	}
	return errs
}

// SetPassword stores user's credential for mechanism, derived from
// password (which is not kept) with a fresh salt: an operator's way to set
// a password without a Kafka admin client.
func (s *State) SetPassword(ctx context.Context, user, mechanism, password string, iterations int) error {
	if err := checkUpsert(user, mechanism, iterations); err != nil {
		return err
	}
	c, err := sasl.NewCredential(mechanism, password, iterations)
	if err != nil {
		return fmt.Errorf("%w: %v", server.ErrUnacceptableCredential, err)
	}
	id := credID{user: user, mechanism: mechanism}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.commitLocked(ctx, []entry{{key: id.key(), id: id, cred: &c}}); err != nil {
		return err
	}
	s.log.Info("SCRAM credential set", "user", user, "mechanism", mechanism, "iterations", iterations)
	return nil
}

// EnsureUser gives user SCRAM-SHA-256 and SCRAM-SHA-512 credentials for
// password (DefaultIterations) unless the user has a credential already,
// which it leaves alone: the bootstrap user of a new node, whose password
// an operator may have changed since. created reports whether it wrote.
func (s *State) EnsureUser(ctx context.Context, user, password string) (created bool, err error) {
	if err := checkName(user, sasl.ScramSHA256); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(userOf(*s.creds.Load(), user)) > 0 {
		return false, nil
	}
	var es []entry
	for _, m := range mechanisms {
		c, err := sasl.NewCredential(m, password, DefaultIterations)
		if err != nil {
			return false, fmt.Errorf("%w: %v", server.ErrUnacceptableCredential, err)
		}
		id := credID{user: user, mechanism: m}
		es = append(es, entry{key: id.key(), id: id, cred: &c})
	}
	if err := s.commitLocked(ctx, es); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteUser deletes every credential of user (ErrAdminNotFound if it has
// none). Connections it authenticated stay open until they re-authenticate
// (KIP-368), which then fails.
func (s *State) DeleteUser(ctx context.Context, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := userOf(*s.creds.Load(), user)
	if len(ids) == 0 {
		return fmt.Errorf("%w: user %q has no credential", server.ErrAdminNotFound, user)
	}
	es := make([]entry, len(ids))
	for i, id := range ids {
		es[i] = entry{key: id.key(), id: id}
	}
	if err := s.commitLocked(ctx, es); err != nil {
		return err
	}
	s.log.Info("SCRAM credentials deleted", "user", user)
	return nil
}

// ACLs implements server.SecurityAdmin.
func (s *State) ACLs(f acl.Filter) []acl.Binding { return s.acls.Load().Match(f) }

// CreateACLs implements server.SecurityAdmin as Kafka's AclControlManager
// does: an invalid binding is acl.ErrInvalid, one that exists (or appears
// twice) succeeds without a write, and the new ones are stored together.
// Whether one exists is taken from the store, read again when this node
// holds one of them: in a cluster another node may have deleted it a
// moment ago, unseen here yet, and the request would be answered success
// for a binding that no longer exists.
func (s *State) CreateACLs(ctx context.Context, bs []acl.Binding) []error {
	errs := make([]error, len(bs))
	s.mu.Lock()
	defer s.mu.Unlock()
	held := slices.ContainsFunc(bs, func(b acl.Binding) bool { return b.Validate() == nil && hasKey(s.bindings, aclKey(b)) })
	if held {
		if err := s.catchUpLocked(ctx, nil); err != nil {
			for i, b := range bs {
				if errs[i] = b.Validate(); errs[i] == nil {
					errs[i] = s.storageError(err)
				}
			}
			return errs
		}
	}
	var es []entry
	pending := map[string]bool{}
	for i, b := range bs {
		if err := b.Validate(); err != nil {
			errs[i] = err // acl.ErrInvalid
			continue
		}
		k := aclKey(b)
		if hasKey(s.bindings, k) || pending[k] {
			continue
		}
		pending[k] = true
		es = append(es, entry{key: k, binding: &bs[i]})
	}
	if err := s.commitLocked(ctx, es); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// DeleteACLs implements server.SecurityAdmin as Kafka's AclControlManager
// does: each valid filter reports every binding it matches in the state
// before the request (a binding two filters match is reported by both);
// all of them are deleted together. The filters are matched against the
// bindings read from the store at once, not those this node holds: in a
// cluster another node may have created one a moment ago, unseen here yet,
// which a deletion made after it must remove.
func (s *State) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, []error) {
	deleted := make([][]acl.Binding, len(fs))
	errs := make([]error, len(fs))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.catchUpLocked(ctx, nil); err != nil {
		for i, f := range fs {
			if errs[i] = f.Validate(); errs[i] == nil {
				errs[i] = s.storageError(err)
			}
		}
		return deleted, errs
	}
	cur := s.acls.Load()
	var es []entry
	pending := map[string]bool{}
	for i, f := range fs {
		if err := f.Validate(); err != nil {
			errs[i] = err // acl.ErrInvalid
			continue
		}
		deleted[i] = cur.Match(f)
		for _, b := range deleted[i] {
			if k := aclKey(b); !pending[k] {
				pending[k] = true
				es = append(es, entry{key: k})
			}
		}
	}
	if err := s.commitLocked(ctx, es); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i], deleted[i] = err, nil
			}
		}
	}
	return deleted, errs
}
