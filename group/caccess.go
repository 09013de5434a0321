package group

import (
	"slices"
	"strings"
)

// A SubscribedTopicRegex gives a member only the topics its principal may
// DESCRIBE, as Kafka filters a regex's matches with the authorizer: without
// this, a consumer allowed on one topic could subscribe to ".*" and be
// assigned, and so learn the names of, topics it may not see. Kafka filters
// each resolution of a group's regexes with the principal of the heartbeat
// that triggered it; cohort filters per member, with the principal and
// address of the member's own last heartbeat (cmember.principal, stored with
// its metadata so that a failover keeps the filter), so that members of one
// group authenticated differently each get what they may see. Topics
// subscribed by name are checked by the front end before the heartbeat
// reaches the group (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
//
// A filtering runs once per regex, principal and host, and again only when
// the regex's matches or the ACLs change (TopicAccess.Version): the group's
// metadata hash covers each member's share (accessHash), so a grant or a
// revocation reaches the target at the next heartbeat, as a new topic does.

// accessKey is a regex and who uses it.
type accessKey struct{ expr, principal, host string }

// accessMatch is what an accessKey may be given of its regex's matches.
type accessMatch struct {
	gen     uint64 // regexMatch.gen it was filtered from
	version uint64 // TopicAccess.Version it was filtered at
	topics  []string
}

func accessOf(m *cmember) accessKey {
	return accessKey{expr: m.regex, principal: m.principal, host: m.clientHost}
}

// topicAccess is the shard's TopicAccess, nil when regexes are not filtered.
func (cg *consumerGroup) topicAccess() TopicAccess {
	if cg.s == nil {
		return nil
	}
	return cg.s.cfg.TopicAccess
}

// accessVersion is the TopicAccess version, 0 without one.
func (cg *consumerGroup) accessVersion() uint64 {
	if acc := cg.topicAccess(); acc != nil {
		return acc.Version()
	}
	return 0
}

// memberRegexTopics returns the existing topics m's regex gives it, sorted;
// the caller must not modify the slice.
func (cg *consumerGroup) memberRegexTopics(m *cmember, topics Topics) []string {
	acc := cg.topicAccess()
	if acc == nil {
		return cg.regexTopics(m.regex, topics)
	}
	return cg.allowedTopics(accessOf(m), topics, acc)
}

// allowedTopics returns the matches of k's regex that k's principal may
// describe from k's host, sorted, kept until the matches or the ACLs
// change; the caller must not modify the slice.
func (cg *consumerGroup) allowedTopics(k accessKey, topics Topics, acc TopicAccess) []string {
	all := cg.regexTopics(k.expr, topics)
	e, v := cg.regexCache[k.expr], acc.Version()
	if f := cg.accessCache[k]; f != nil && e != nil && f.gen == e.gen && f.version == v {
		return f.topics
	}
	out := make([]string, 0, len(all))
	for _, name := range all {
		if acc.CanDescribe(k.principal, k.host, name) {
			out = append(out, name)
		}
	}
	if e != nil && cg.access[k] > 0 { // a key in use: dropped with its last member (indexMember)
		if cg.accessCache == nil {
			cg.accessCache = map[accessKey]*accessMatch{}
		}
		cg.accessCache[k] = &accessMatch{gen: e.gen, version: v, topics: out}
	}
	return out
}

// accessHash mixes into h, the metadata hash of the subscribed topics, what
// each regex user may not be given: the union of the subscribed topics does
// not change when one member is granted a topic another member already
// has, but its target must. Keys that may have all their regex's matches
// add nothing, so a group without denials keeps the hash it had without a
// TopicAccess (no new epoch when an authorizer is turned on).
func (cg *consumerGroup) accessHash(h uint64, topics Topics) uint64 {
	acc := cg.topicAccess()
	if acc == nil || len(cg.access) == 0 {
		return h
	}
	keys := make([]accessKey, 0, len(cg.access))
	for k := range cg.access {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b accessKey) int {
		if c := strings.Compare(a.expr, b.expr); c != 0 {
			return c
		}
		if c := strings.Compare(a.principal, b.principal); c != 0 {
			return c
		}
		return strings.Compare(a.host, b.host)
	})
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	for _, k := range keys {
		all, allowed := cg.regexTopics(k.expr, topics), cg.allowedTopics(k, topics, acc)
		if len(allowed) == len(all) {
			continue
		}
		mix(k.expr)
		mix(k.principal)
		mix(k.host)
		for _, name := range allowed {
			mix(name)
		}
	}
	return h
}
