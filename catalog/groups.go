package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Group configs are Kafka's dynamic GROUP configs (consumer.session.timeout.ms
// and the like): settings an operator gives one group, kept with the topics
// because they are cluster metadata of the same kind (Kafka keeps both in its
// metadata log) and take the same way to every node: Options.Persist, the
// snapshot, Restore. The catalog stores names and values as given; what a
// name means and which values are valid is the caller's (the server checks
// them against the coordinator's settings).

// Limits on what one group may hold, so that one admin request cannot make
// the snapshot every node keeps arbitrarily large.
const (
	MaxGroupConfigs   = 16  // names per group
	MaxGroupConfigLen = 256 // bytes per name or value
	MaxGroupNameLen   = 1 << 10
)

// ErrInvalidGroupConfig is returned for a group name or config that breaks
// the catalog's limits.
var ErrInvalidGroupConfig = errors.New("catalog: invalid group config")

// checkGroupConfig checks group and cfg against the catalog's limits.
func checkGroupConfig(group string, cfg map[string]string) error {
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

// GroupConfigValue returns the value of group's config name, if set. It
// takes no lock and allocates nothing: the coordinator asks on every
// heartbeat.
func (c *Catalog) GroupConfigValue(group, name string) (string, bool) {
	gs := c.cur.Load().groups
	if len(gs) == 0 {
		return "", false
	}
	v, ok := gs[group][name]
	return v, ok
}

// GroupConfig returns a copy of group's configs, nil if it has none.
func (c *Catalog) GroupConfig(group string) map[string]string {
	return maps.Clone(c.cur.Load().groups[group])
}

// ConfiguredGroups returns the names of the groups that have configs,
// sorted.
func (c *Catalog) ConfiguredGroups() []string {
	return slices.Sorted(maps.Keys(c.cur.Load().groups))
}

// SetGroupConfig replaces group's configs with cfg (copied); an empty cfg
// removes them. The change is persisted (Options.Persist) before it is
// visible; an error leaves the catalog unchanged.
func (c *Catalog) SetGroupConfig(group string, cfg map[string]string) error {
	if err := checkGroupConfig(group, cfg); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.cur.Load()
	if len(cfg) == 0 && cur.groups[group] == nil {
		return nil
	}
	next := maps.Clone(cur.groups)
	if next == nil {
		next = map[string]map[string]string{}
	}
	if len(cfg) == 0 {
		delete(next, group)
	} else {
		next[group] = maps.Clone(cfg)
	}
	if len(next) == 0 {
		next = nil
	}
	return c.commitAll(cur.sorted, next)
}
