package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Group configs are Kafka's dynamic GROUP configs (consumer.session.timeout.ms
// and the like): settings an operator gives one group. They are cluster
// metadata of the same kind as the topics (Kafka keeps both in its metadata
// log) and take the same way to every node, but one record per group
// (Options.PersistGroup, GroupConfigSnapshot, RestoreGroupConfig), apart
// from the topics' snapshot: a node that predates them never reads them, so
// it can neither drop them nor be made to roll back the topics by them;
// changes of two groups through two nodes do not overwrite each other; and
// a config change does not bump the topics' Version (which makes every
// consumer group re-read its topics). The catalog stores names and values
// as given; what a name means and which values are valid is the caller's
// (the server checks them against the coordinator's settings).

// Limits, so that admin requests cannot make what every node keeps
// arbitrarily large: at most MaxConfiguredGroups groups with configs
// (records restored beyond it are kept, and only new groups are refused), at
// most MaxGroupConfigs names per group, names and values of at most
// MaxGroupConfigLen bytes, group names of at most MaxGroupNameLen (one
// group's record stays under 10 KiB).
const (
	MaxConfiguredGroups = 4096
	MaxGroupConfigs     = 16
	MaxGroupConfigLen   = 256
	MaxGroupNameLen     = 1 << 10
)

// ErrInvalidGroupConfig is returned for a group name or config that breaks
// the catalog's limits.
var ErrInvalidGroupConfig = errors.New("catalog: invalid group config")

// groupsView is an immutable state of the group configs: group -> name ->
// value, never an empty inner map.
type groupsView struct {
	version uint64
	m       map[string]map[string]string
}

// CheckGroupConfig checks group and cfg against the catalog's limits on one
// group (not the number of configured groups).
func CheckGroupConfig(group string, cfg map[string]string) error {
	if group == "" || len(group) > MaxGroupNameLen {
		return fmt.Errorf("%w: a group name of %d bytes (1 to %d)", ErrInvalidGroupConfig, len(group), MaxGroupNameLen)
	}
	if len(cfg) > MaxGroupConfigs {
		return fmt.Errorf("%w: group %q: %d configs (at most %d)", ErrInvalidGroupConfig, group, len(cfg), MaxGroupConfigs)
	}
	for k, v := range cfg {
		if k == "" || len(k) > MaxGroupConfigLen || len(v) > MaxGroupConfigLen {
			return fmt.Errorf("%w: group %q: a config name or value outside 1 to %d bytes", ErrInvalidGroupConfig, group, MaxGroupConfigLen)
		}
	}
	return nil
}

// GroupConfigsVersion changes whenever a group's configs change (or are
// restored). A reader that caches what it derives from them reads the
// version first, then the configs.
func (c *Catalog) GroupConfigsVersion() uint64 { return c.groups.Load().version }

// GroupConfigValue returns the value of group's config name, if set,
// without locking or allocating.
func (c *Catalog) GroupConfigValue(group, name string) (string, bool) {
	m := c.groups.Load().m
	if len(m) == 0 {
		return "", false
	}
	v, ok := m[group][name]
	return v, ok
}

// GroupConfig returns a copy of group's configs, nil if it has none.
func (c *Catalog) GroupConfig(group string) map[string]string {
	return maps.Clone(c.groups.Load().m[group])
}

// ConfiguredGroups returns the names of the groups that have configs,
// sorted.
func (c *Catalog) ConfiguredGroups() []string {
	return slices.Sorted(maps.Keys(c.groups.Load().m))
}

// SetGroupConfig replaces group's configs with cfg (copied); an empty cfg
// removes them.
func (c *Catalog) SetGroupConfig(group string, cfg map[string]string) error {
	return c.UpdateGroupConfig(group, false, func(map[string]string) (map[string]string, error) { return cfg, nil })
}

// UpdateGroupConfig changes group's configs to what update returns when
// given a copy of the current ones (nil for none), under the catalog's lock,
// so that concurrent updates of one group do not lose each other's changes.
// An empty result removes them. The result is checked (CheckGroupConfig, and
// MaxConfiguredGroups for a group that had none) and, unless dryRun,
// persisted (Options.PersistGroup) before it is visible. An error from
// update, a check or the persist leaves everything unchanged.
func (c *Catalog) UpdateGroupConfig(group string, dryRun bool, update func(cur map[string]string) (map[string]string, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conflicts := 0; ; conflicts++ {
		cur := c.groups.Load()
		next, err := update(maps.Clone(cur.m[group]))
		if err != nil {
			return err
		}
		if err := CheckGroupConfig(group, next); err != nil {
			return err
		}
		if _, had := cur.m[group]; !had && len(next) > 0 && len(cur.m) >= MaxConfiguredGroups {
			return fmt.Errorf("%w: %d groups have configs already (at most %d): remove some first", ErrInvalidGroupConfig, len(cur.m), MaxConfiguredGroups)
		}
		if dryRun || maps.Equal(next, cur.m[group]) && !c.shared {
			return nil
		}
		if c.persistGroup != nil {
			err = c.persistGroup(group, encodeGroup(next))
		}
		var cf *Conflict
		switch {
		case err == nil:
			c.groups.Store(&groupsView{version: cur.version + 1, m: withGroup(cur.m, group, next)})
			return nil
		case !errors.As(err, &cf):
			return fmt.Errorf("%w: %w", ErrPersist, err)
		case conflicts >= MaxConflicts:
			return fmt.Errorf("%w: %d concurrent changes of group %q in a row through other nodes; try again: %w", ErrPersist, conflicts+1, group, err)
		}
		backOff(conflicts)
		// Another node changed the group's record: apply update again to
		// it (a record removed there is removed here too).
		cfg, derr := decodeGroup(group, cf.Current)
		if derr != nil {
			return fmt.Errorf("%w: the stored configs: %w", ErrPersist, derr)
		}
		c.installGroup(group, cfg)
		if cf.Accepted != nil {
			cf.Accepted()
		}
	}
}

// groupSnapshotVersion is the version of a group's config snapshot.
const groupSnapshotVersion = 1

type groupDoc struct {
	Version int               `json:"version"`
	Configs map[string]string `json:"configs"`
}

func encodeGroup(cfg map[string]string) []byte {
	if len(cfg) == 0 {
		return nil
	}
	b, err := json.Marshal(groupDoc{Version: groupSnapshotVersion, Configs: cfg})
	if err != nil { // cannot happen: strings only
		panic("catalog: encoding group configs: " + err.Error())
	}
	return b
}

// GroupConfigSnapshot returns group's configs encoded as
// Options.PersistGroup receives them and RestoreGroupConfig reads them; nil
// if it has none.
func (c *Catalog) GroupConfigSnapshot(group string) []byte {
	return encodeGroup(c.groups.Load().m[group])
}

// RestoreGroupConfig replaces group's configs with the decoded snapshot, or
// removes them for empty data (at start-up, and in cluster mode for a change
// made through another node). It does not call Options.PersistGroup and
// does not apply MaxConfiguredGroups. Invalid data leaves the configs
// unchanged and returns an error wrapping ErrBadSnapshot.
func (c *Catalog) RestoreGroupConfig(group string, data []byte) error {
	cfg, err := decodeGroup(group, data)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.installGroup(group, cfg)
	return nil
}

// SyncGroupConfig is RestoreGroupConfig of what read returns, read under
// the catalog's lock (see Sync): a read of the shared store that sees every
// change already made can never roll group's configs back past one.
func (c *Catalog) SyncGroupConfig(group string, read func() ([]byte, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := read()
	if err != nil {
		return err
	}
	cfg, err := decodeGroup(group, data)
	if err != nil {
		return err
	}
	c.installGroup(group, cfg)
	return nil
}

// installGroup publishes group's configs (c.mu held), bumping the version
// if they changed.
func (c *Catalog) installGroup(group string, cfg map[string]string) {
	cur := c.groups.Load()
	if maps.Equal(cfg, cur.m[group]) {
		return
	}
	c.groups.Store(&groupsView{version: cur.version + 1, m: withGroup(cur.m, group, cfg)})
}

// decodeGroup checks and decodes one group's record (nil for none).
func decodeGroup(group string, data []byte) (map[string]string, error) {
	var cfg map[string]string
	if len(data) > 0 {
		var doc groupDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%w: group %q configs: %w", ErrBadSnapshot, group, err)
		}
		if doc.Version != groupSnapshotVersion {
			return nil, fmt.Errorf("%w: group %q configs version %d, this build reads version %d", ErrBadSnapshot, group, doc.Version, groupSnapshotVersion)
		}
		if len(doc.Configs) == 0 {
			return nil, fmt.Errorf("%w: group %q: an empty config set", ErrBadSnapshot, group)
		}
		cfg = doc.Configs
	}
	if err := CheckGroupConfig(group, cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	return cfg, nil
}

// withGroup returns a copy of m with group's configs set to cfg (removed if
// empty); nil if nothing is left.
func withGroup(m map[string]map[string]string, group string, cfg map[string]string) map[string]map[string]string {
	next := maps.Clone(m)
	if next == nil {
		next = map[string]map[string]string{}
	}
	if len(cfg) == 0 {
		delete(next, group)
	} else {
		next[group] = maps.Clone(cfg)
	}
	if len(next) == 0 {
		return nil
	}
	return next
}
