package node

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
)

// groupOverrides serves group.Config.GroupOverrides from the catalog's
// group configs, parsed once per change of them rather than at every
// heartbeat, and says in the log when a group's stored session timeout and
// heartbeat interval cannot be used together with this node's settings
// (group.Shard.consumerTimes then runs the group on the node's).
type groupOverrides struct {
	cat *catalog.Catalog
	cfg group.Config
	log *slog.Logger
	mu  sync.Mutex // one rebuild at a time
	cur atomic.Pointer[parsedOverrides]
	// warned holds the unusable pairs already logged, per group (under
	// mu): a rebuild for another group's change does not log them again.
	warned map[string]group.Overrides
}

type parsedOverrides struct {
	version uint64 // the catalog's GroupConfigsVersion they were read at
	m       map[string]group.Overrides
}

func newGroupOverrides(cat *catalog.Catalog, cfg group.Config, log *slog.Logger) *groupOverrides {
	return &groupOverrides{cat: cat, cfg: cfg, log: log}
}

// get returns group g's overrides (none if it has no configs).
func (o *groupOverrides) get(g string) group.Overrides {
	p := o.cur.Load()
	if p == nil || p.version != o.cat.GroupConfigsVersion() {
		p = o.rebuild()
	}
	return p.m[g]
}

func (o *groupOverrides) rebuild() *parsedOverrides {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.cat.GroupConfigsVersion() // before the configs: a newer read is rebuilt again
	if p := o.cur.Load(); p != nil && p.version == v {
		return p
	}
	p := &parsedOverrides{version: v, m: map[string]group.Overrides{}}
	warned := map[string]group.Overrides{}
	for _, g := range o.cat.ConfiguredGroups() {
		ov := group.ParseOverrides(o.cat.GroupConfig(g))
		if o.cfg.Consistent(ov) {
			p.m[g] = ov
			continue
		}
		warned[g] = ov
		if prev, ok := o.warned[g]; !ok || prev != ov {
			o.log.Warn("group config: the group's session timeout is not above its heartbeat interval with this node's settings; the group runs on the node's session timeout and heartbeat interval until its configs or the node's flags change",
				"group", g, "group_session", ov.SessionTimeout, "group_heartbeat", ov.HeartbeatInterval,
				"node_session", o.cfg.ConsumerSessionTimeout, "node_heartbeat", o.cfg.ConsumerHeartbeatInterval)
		}
		p.m[g] = ov
	}
	o.warned = warned
	o.cur.Store(p)
	return p
}
