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
// log) and take the same way to every node, but in a snapshot of their own
// (Options.PersistGroups, GroupConfigsSnapshot, RestoreGroupConfigs): a node
// that predates them never reads it, so it can neither drop them nor be made
// to roll back the topics by them, and a config change does not bump the
// topics' Version (which makes every consumer group re-read its topics).
// The catalog stores names and values as given; what a name means and which
// values are valid is the caller's (the server checks them against the
// coordinator's settings).

// Limits, so that admin requests cannot make the snapshot every node keeps
// (one etcd value in cluster mode, etcd's default limit being 1.5 MiB)
// arbitrarily large: at most MaxConfiguredGroups groups with configs (a
// snapshot restored with more is kept, and only new groups are refused), at
// most MaxGroupConfigs names per group, names and values of at most
// MaxGroupConfigLen bytes, group names of at most MaxGroupNameLen.
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
// persisted (Options.PersistGroups) before it is visible. An error from
// update, a check or the persist leaves everything unchanged.
func (c *Catalog) UpdateGroupConfig(group string, dryRun bool, update func(cur map[string]string) (map[string]string, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	if dryRun || maps.Equal(next, cur.m[group]) {
		return nil
	}
	m := maps.Clone(cur.m)
	if m == nil {
		m = map[string]map[string]string{}
	}
	if len(next) == 0 {
		delete(m, group)
	} else {
		m[group] = maps.Clone(next)
	}
	if c.persistGroups != nil {
		if err := c.persistGroups(encodeGroups(m)); err != nil {
			return fmt.Errorf("%w: %w", ErrPersist, err)
		}
	}
	c.groups.Store(&groupsView{version: cur.version + 1, m: m})
	return nil
}

// groupsSnapshotVersion is the version of the group configs' snapshot.
const groupsSnapshotVersion = 1

type groupsDoc struct {
	Version int                          `json:"version"`
	Groups  map[string]map[string]string `json:"groups"`
}

func encodeGroups(m map[string]map[string]string) []byte {
	if m == nil {
		m = map[string]map[string]string{}
	}
	b, err := json.Marshal(groupsDoc{Version: groupsSnapshotVersion, Groups: m})
	if err != nil { // cannot happen: strings only
		panic("catalog: encoding group configs: " + err.Error())
	}
	return b
}

// GroupConfigsSnapshot returns the group configs encoded as
// Options.PersistGroups receives them and RestoreGroupConfigs reads them.
func (c *Catalog) GroupConfigsSnapshot() []byte { return encodeGroups(c.groups.Load().m) }

// RestoreGroupConfigs replaces the group configs with the decoded snapshot
// (at start-up, and in cluster mode for a change made through another
// node). It does not call Options.PersistGroups. Invalid data leaves them
// unchanged and returns an error wrapping ErrBadSnapshot.
func (c *Catalog) RestoreGroupConfigs(data []byte) error {
	var doc groupsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: group configs: %w", ErrBadSnapshot, err)
	}
	if doc.Version != groupsSnapshotVersion {
		return fmt.Errorf("%w: group configs version %d, this build reads version %d", ErrBadSnapshot, doc.Version, groupsSnapshotVersion)
	}
	for g, cfg := range doc.Groups {
		if err := CheckGroupConfig(g, cfg); err != nil {
			return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
		if len(cfg) == 0 {
			return fmt.Errorf("%w: group %q: an empty config set", ErrBadSnapshot, g)
		}
	}
	if len(doc.Groups) == 0 {
		doc.Groups = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups.Store(&groupsView{version: c.groups.Load().version + 1, m: doc.Groups})
	return nil
}
