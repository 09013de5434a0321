package server

import (
	"context"
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// IncrementalAlterConfigs (v0–1) and AlterConfigs (v0–2) change the one kind
// of config cohort keeps: a consumer group's own session timeout, heartbeat
// interval and assignment interval (Kafka's GROUP resource,
// group.GroupConfigNames). They are kept in the catalog, so they reach every
// node of a cluster, and the coordinator reads them at each heartbeat.
//
// As Kafka does: the group need not exist (a config may be set before the
// group's first member joins) and stays when the group is deleted; an empty
// group name is INVALID_REQUEST; a name given twice in one resource, or SET
// without a value, is INVALID_REQUEST; APPEND and SUBTRACT are INVALID_CONFIG
// (no group config is a list); the configs the group would have after the
// change are checked together (group.Config.CheckGroupConfig: a session
// timeout above the heartbeat interval) and a violation is INVALID_CONFIG;
// ValidateOnly checks without changing anything. AlterConfigs replaces all of
// a group's configs with the ones given (those left out are removed).
//
// Other resources get an error that says why: cohort keeps no topic configs
// (it stores no records; CreateTopics drops them too) and no broker configs
// (its settings are cohort serve's flags), so altering them is INVALID_CONFIG
// once the resource is found to exist, rather than a success that changes
// nothing; a type Kafka does not alter is INVALID_REQUEST (for
// AlterConfigs, broker loggers too: only the incremental API sets them).
//
// With an authorizer each resource needs ALTER_CONFIGS: on the group
// (GROUP_AUTHORIZATION_FAILED), the topic (TOPIC_AUTHORIZATION_FAILED) or
// the cluster (CLUSTER_AUTHORIZATION_FAILED).

// configChange is one resource of either request.
type configChange struct {
	rtype kmsg.ConfigResourceType
	name  string
	// replace: AlterConfigs (the given set replaces the group's);
	// otherwise ops apply to the current set.
	replace bool
	ops     []configOp
}

type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// alterConfigsOutcome is one resource's answer.
type alterConfigsOutcome struct {
	code int16
	msg  string
}

func (s *Server) incrementalAlterConfigs(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.IncrementalAlterConfigsRequest)
	changes := make([]configChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := configChange{rtype: rr.ResourceType, name: rr.ResourceName}
		for _, cf := range rr.Configs {
			ch.ops = append(ch.ops, configOp{name: cf.Name, op: cf.Op, value: cf.Value})
		}
		changes[i] = ch
	}
	out := s.alterConfigs(c, r, changes, req.ValidateOnly)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for i, rr := range req.Resources {
		a := kmsg.NewIncrementalAlterConfigsResponseResource()
		a.ResourceType, a.ResourceName = rr.ResourceType, rr.ResourceName
		a.ErrorCode, a.ErrorMessage = out[i].code, configMessage(out[i])
		resp.Resources = append(resp.Resources, a)
	}
	return resp
}

func (s *Server) legacyAlterConfigs(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.AlterConfigsRequest)
	changes := make([]configChange, len(req.Resources))
	for i, rr := range req.Resources {
		ch := configChange{rtype: rr.ResourceType, name: rr.ResourceName, replace: true}
		for _, cf := range rr.Configs {
			ch.ops = append(ch.ops, configOp{name: cf.Name, op: kmsg.IncrementalAlterConfigOpSet, value: cf.Value})
		}
		changes[i] = ch
	}
	out := s.alterConfigs(c, r, changes, req.ValidateOnly)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for i, rr := range req.Resources {
		a := kmsg.NewAlterConfigsResponseResource()
		a.ResourceType, a.ResourceName = rr.ResourceType, rr.ResourceName
		a.ErrorCode, a.ErrorMessage = out[i].code, configMessage(out[i])
		resp.Resources = append(resp.Resources, a)
	}
	return resp
}

// configMessage is the answer's message: the outcome's, or the code's
// description for an error without one.
func configMessage(o alterConfigsOutcome) *string {
	switch {
	case o.code == errNone:
		return nil
	case o.msg != "":
		return kmsg.StringPtr(o.msg)
	}
	return errorMessage(o.code)
}

// alterConfigs checks (ACLs first when they are on, after the request's
// shape: a resource type Kafka does not alter, a resource named twice) and
// applies each change in order.
func (s *Server) alterConfigs(c Client, r *request, changes []configChange, validateOnly bool) []alterConfigsOutcome {
	out := make([]alterConfigsOutcome, len(changes))
	type resource struct {
		t    kmsg.ConfigResourceType
		name string
	}
	count := map[resource]int{}
	for _, ch := range changes {
		count[resource{ch.rtype, ch.name}]++
	}
	for i := range changes {
		ch := &changes[i]
		switch ch.rtype {
		case kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker,
			kmsg.ConfigResourceTypeClientMetrics:
		case kmsg.ConfigResourceTypeBrokerLogger:
			if !ch.replace {
				break
			}
			// The legacy AlterConfigs never altered loggers: Kafka
			// refuses the type as one it does not know.
			fallthrough
		default:
			out[i] = alterConfigsOutcome{errInvalidRequest, "Unknown resource type " + strconv.Itoa(int(ch.rtype))}
			continue
		}
		if count[resource{ch.rtype, ch.name}] > 1 {
			out[i] = alterConfigsOutcome{errInvalidRequest, "the request names this resource more than once: each may appear at most once"}
			continue
		}
		if msg := opsProblem(ch.ops); msg != "" {
			out[i] = alterConfigsOutcome{errInvalidRequest, msg}
			continue
		}
		if s.authz != nil {
			rt, name, code := configACL(ch.rtype, ch.name)
			if !s.authorize(c, r.key, acl.OpAlterConfigs, rt, name) {
				out[i] = alterConfigsOutcome{code: code}
				continue
			}
		}
		out[i] = s.alterOne(ch, validateOnly)
	}
	return out
}

// alterOne checks and applies one resource's change.
func (s *Server) alterOne(ch *configChange, validateOnly bool) alterConfigsOutcome {
	invalid := func(msg string) alterConfigsOutcome { return alterConfigsOutcome{errInvalidRequest, msg} }
	badConfig := func(msg string) alterConfigsOutcome { return alterConfigsOutcome{errInvalidConfig, msg} }
	switch ch.rtype {
	case kmsg.ConfigResourceTypeGroupConfig:
	case kmsg.ConfigResourceTypeTopic:
		if err := catalog.ValidateName(ch.name); err != nil {
			return alterConfigsOutcome{errInvalidTopic, err.Error()}
		}
		if _, ok := s.catalog.Lookup(ch.name); !ok {
			return alterConfigsOutcome{errUnknownTopicOrPartition, ""}
		}
		return badConfig("cohort keeps no topic configs: it stores no records (only a consumer group's configs can be altered)")
	default:
		return badConfig("cohort keeps no broker or client-metrics configs: its settings are cohort serve's flags (only a consumer group's configs can be altered)")
	}
	if ch.name == "" {
		return invalid("Default group resources are not allowed.")
	}
	// The group's configs change under the catalog's lock: a concurrent
	// change of the same group is applied before or after this one, never
	// lost.
	var refused *alterConfigsOutcome
	err := s.catalog.UpdateGroupConfig(ch.name, validateOnly, func(cur map[string]string) (map[string]string, error) {
		next := cur
		if next == nil || ch.replace {
			next = map[string]string{}
		}
		for _, op := range ch.ops {
			switch op.op {
			case kmsg.IncrementalAlterConfigOpSet:
				next[op.name] = *op.value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(next, op.name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				o := badConfig("Can't " + op.op.String() + " to key " + op.name + " because its type is not LIST.")
				refused = &o
			default:
				o := invalid("Unknown config operation " + strconv.Itoa(int(op.op)) + " for " + op.name)
				refused = &o
			}
			if refused != nil {
				return nil, errRefused
			}
		}
		if err := s.cfg.Group.CheckGroupConfig(next); err != nil {
			o := badConfig(err.Error())
			refused = &o
			return nil, errRefused
		}
		for k, v := range next { // stored in canonical form: "060000" and " 60000" are 60000
			n, _ := group.ParseGroupConfigInt(v) // checked above
			next[k] = strconv.FormatInt(n, 10)
		}
		return next, nil
	})
	switch {
	case refused != nil:
		return *refused
	case errors.Is(err, catalog.ErrInvalidGroupConfig):
		return invalid(err.Error())
	case errors.Is(err, catalog.ErrUnavailable):
		return alterConfigsOutcome{errNotController, err.Error()}
	case err != nil:
		s.log.Warn("group config not stored", "group", ch.name, "err", err)
		msg := "the group's configs could not be stored; nothing changed"
		if adv := (*catalog.Advised)(nil); errors.As(err, &adv) {
			// What to do, not the store's error (the log has it).
			msg += ": " + adv.Advice
		}
		// The store refused the write: KAFKA_STORAGE_ERROR (retriable),
		// as CreateTopics, DeleteTopics, CreatePartitions and the
		// ACL and credential changes answer the same refusal
		// (catalogError, adminErrorCode). Anything else is unexpected.
		code := errUnknownServerError
		if errors.Is(err, catalog.ErrPersist) {
			code = errKafkaStorageError
		}
		return alterConfigsOutcome{code, msg}
	}
	return alterConfigsOutcome{}
}

// errRefused ends a group config update that alterOne refused (the reason is
// its outcome).
var errRefused = errors.New("refused")

// groupConfigs fills a DescribeConfigs answer for group name: every config
// cohort keeps (or those asked for; an empty list asks for all, as a null
// one), the group's value or the node's.
func (s *Server) groupConfigs(req *kmsg.DescribeConfigsRequest, rr *kmsg.DescribeConfigsRequestResource, a *kmsg.DescribeConfigsResponseResource) {
	want := func(name string) bool {
		if len(rr.ConfigNames) == 0 { // null or empty: all, as Kafka
			return true
		}
		for _, n := range rr.ConfigNames {
			if n == name {
				return true
			}
		}
		return false
	}
	for _, e := range s.cfg.Group.DescribeGroupConfig(s.catalog.GroupConfig(rr.ResourceName)) {
		if !want(e.Name) {
			continue
		}
		nodeSource := kmsg.ConfigSourceStaticBrokerConfig // a cohort serve flag
		if e.NodeDefault {
			nodeSource = kmsg.ConfigSourceDefaultConfig
		}
		cf := kmsg.NewDescribeConfigsResponseResourceConfig()
		cf.Name, cf.Value = e.Name, kmsg.StringPtr(e.Value)
		cf.ConfigType = kmsg.ConfigTypeInt
		cf.Source, cf.IsDefault = nodeSource, e.NodeDefault && !e.Set
		if e.Set {
			cf.Source = kmsg.ConfigSourceGroupConfig
		}
		if req.IncludeSynonyms {
			if e.Set {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = e.Name, kmsg.StringPtr(e.Value), kmsg.ConfigSourceGroupConfig
				cf.ConfigSynonyms = append(cf.ConfigSynonyms, syn)
			}
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = e.NodeName, kmsg.StringPtr(e.NodeValue), nodeSource
			cf.ConfigSynonyms = append(cf.ConfigSynonyms, syn)
			if !e.NodeDefault {
				// The chain goes on to the setting's default, as Kafka
				// lists a broker setting's static value and then its
				// default under the same name.
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = e.NodeName, kmsg.StringPtr(e.DefaultValue), kmsg.ConfigSourceDefaultConfig
				cf.ConfigSynonyms = append(cf.ConfigSynonyms, syn)
			}
		}
		if req.IncludeDocumentation {
			cf.Documentation = kmsg.StringPtr(e.Doc)
		}
		a.Configs = append(a.Configs, cf)
	}
}

// authzAlterConfigs and authzIncrementalAlterConfigs: the ACLs are checked
// per resource inside alterConfigs.
func (s *Server) authzAlterConfigs(_ context.Context, c Client, r *request) kmsg.Response {
	if r.key == keyAlterConfigs {
		return s.legacyAlterConfigs(c, r)
	}
	return s.incrementalAlterConfigs(c, r)
}

// opsProblem is what makes a resource's config operations malformed (a name
// given twice, SET without a value), "" if nothing: checked before the
// ACLs, as Kafka does.
func opsProblem(ops []configOp) string {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.name] {
			return "Error due to duplicate config keys: " + op.name
		}
		seen[op.name] = true
		if op.value == nil && op.op != kmsg.IncrementalAlterConfigOpDelete {
			return "Null value not supported for " + op.name
		}
	}
	return ""
}
