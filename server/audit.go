package server

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// audit logs, at INFO, each change an administrative request made, with the
// principal it came from and its host ("by", "host"): topics created,
// deleted or grown, groups deleted, committed offsets deleted, configs
// altered, static members removed by their instance id. Only what the
// answer reports done is logged (a refused or validate-only change is not),
// and of a config change only the names, never the values (a broker config
// may hold a password). ACL and SCRAM
// credential changes are logged where they are made (secadmin.go). In
// cluster mode a change is logged by the node that made it: a group's
// deletion by its coordinator, a topic's by the node that wrote the catalog.
func (s *Server) audit(c Client, req kmsg.Request, resp kmsg.Response) {
	who := []any{"by", c.Principal, "host", c.Host}
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if req.ValidateOnly {
			return
		}
		for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if t.ErrorCode == errNone {
				n := int32(-1)
				if cur, ok := s.catalog.Lookup(t.Topic); ok {
					n = cur.Partitions
				}
				s.log.Info("topic created", append([]any{"topic", t.Topic, "partitions", n}, who...)...)
			}
		}
	case *kmsg.DeleteTopicsRequest:
		for _, t := range resp.(*kmsg.DeleteTopicsResponse).Topics {
			if t.ErrorCode == errNone && t.Topic != nil {
				s.log.Info("topic deleted", append([]any{"topic", *t.Topic}, who...)...)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		if req.ValidateOnly {
			return
		}
		counts := make(map[string]int32, len(req.Topics))
		for _, t := range req.Topics {
			counts[t.Topic] = t.Count
		}
		for _, t := range resp.(*kmsg.CreatePartitionsResponse).Topics {
			if t.ErrorCode == errNone {
				s.log.Info("partitions added", append([]any{"topic", t.Topic, "partitions", counts[t.Topic]}, who...)...)
			}
		}
	case *kmsg.LeaveGroupRequest:
		// A member named by its instance id alone is an administrator's
		// removal (KIP-345: the admin client's removeMembersFromConsumerGroup);
		// a member leaving names its member id.
		r := resp.(*kmsg.LeaveGroupResponse)
		if r.ErrorCode != errNone {
			return
		}
		for _, m := range r.Members {
			if m.ErrorCode == errNone && m.MemberID == "" && m.InstanceID != nil {
				s.log.Info("member removed", append([]any{"group", req.Group, "instance", *m.InstanceID}, who...)...)
			}
		}
	case *kmsg.DeleteGroupsRequest:
		for _, g := range resp.(*kmsg.DeleteGroupsResponse).Groups {
			if g.ErrorCode == errNone {
				s.log.Info("group deleted", append([]any{"group", g.Group}, who...)...)
			}
		}
	case *kmsg.OffsetDeleteRequest:
		r := resp.(*kmsg.OffsetDeleteResponse)
		if r.ErrorCode != errNone {
			return
		}
		var b strings.Builder
		for _, t := range r.Topics {
			n := 0
			for _, p := range t.Partitions {
				if p.ErrorCode != errNone {
					continue
				}
				if n == 0 {
					if b.Len() > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(t.Topic)
					b.WriteByte('/')
				} else {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(int(p.Partition)))
				n++
			}
		}
		if b.Len() > 0 {
			s.log.Info("committed offsets deleted", append([]any{"group", req.Group, "topic_partitions", b.String()}, who...)...)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		if req.ValidateOnly {
			return
		}
		names := map[configResource][]string{}
		for _, rr := range req.Resources {
			for _, cfg := range rr.Configs {
				k := configResource{rr.ResourceType, rr.ResourceName}
				names[k] = append(names[k], cfg.Name+"("+strings.ToLower(cfg.Op.String())+")")
			}
		}
		for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			s.auditConfigs("configs altered", r.ErrorCode, configResource{r.ResourceType, r.ResourceName}, names, who)
		}
	case *kmsg.AlterConfigsRequest:
		if req.ValidateOnly {
			return
		}
		names := map[configResource][]string{}
		for _, rr := range req.Resources {
			for _, cfg := range rr.Configs {
				k := configResource{rr.ResourceType, rr.ResourceName}
				names[k] = append(names[k], cfg.Name)
			}
		}
		for _, r := range resp.(*kmsg.AlterConfigsResponse).Resources {
			s.auditConfigs("configs replaced", r.ErrorCode, configResource{r.ResourceType, r.ResourceName}, names, who)
		}
	}
}

// configResource is a config resource a request names.
type configResource struct {
	t    kmsg.ConfigResourceType
	name string
}

// auditConfigs logs one resource's config change, if done (code), naming
// the configs the request changed for it.
func (s *Server) auditConfigs(msg string, code int16, r configResource, names map[configResource][]string, who []any) {
	if code != errNone {
		return
	}
	s.log.Info(msg, append([]any{"resource_type", resourceTypeName(r.t), "resource", r.name, "configs", strings.Join(names[r], ",")}, who...)...)
}

// resourceTypeName names a config resource type as Kafka's admin tools do
// (topic, broker, broker_logger, group, client_metrics).
func resourceTypeName(t kmsg.ConfigResourceType) string {
	return strings.ToLower(strings.TrimSuffix(t.String(), "_CONFIG"))
}

// audited reports whether requests of key may change something audit logs.
func audited(key int16) bool {
	switch key {
	case keyCreateTopics, keyDeleteTopics, keyCreatePartitions, keyDeleteGroups, keyOffsetDelete, keyIncrementalAlterConfigs, keyAlterConfigs,
		keyLeaveGroup:
		return true
	}
	return false
}
