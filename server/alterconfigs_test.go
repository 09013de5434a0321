package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// iac builds an IncrementalAlterConfigs of one resource; ops are
// (name, op, value) triples, a value "<nil>" sent as null.
func iac(v int16, rt kmsg.ConfigResourceType, name string, ops ...any) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(v)
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rt, name
	for i := 0; i < len(ops); i += 3 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = ops[i].(string), ops[i+1].(kmsg.IncrementalAlterConfigOp)
		if v := ops[i+2].(string); v != "<nil>" {
			c.Value = kmsg.StringPtr(v)
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

// iacResult is the one resource's code and message.
func iacResult(t *testing.T, resp kmsg.Response) string {
	t.Helper()
	var code int16
	var msg *string
	switch r := resp.(type) {
	case *kmsg.IncrementalAlterConfigsResponse:
		code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
	case *kmsg.AlterConfigsResponse:
		code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
	}
	if msg == nil {
		return fmt.Sprint(code)
	}
	return fmt.Sprintf("%d %s", code, *msg)
}

// groupDescribed is DescribeConfigs' answer for group g as
// name=value/source lines, with synonyms.
func groupDescribed(t *testing.T, s *Server, g string) string {
	t.Helper()
	req := describeConfigsReq(4, kmsg.ConfigResourceTypeGroupConfig, g)
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	resp := answer(t, s, req).(*kmsg.DescribeConfigsResponse)
	if resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %d", g, resp.Resources[0].ErrorCode)
	}
	var out []string
	for _, c := range resp.Resources[0].Configs {
		line := fmt.Sprintf("%s=%s/%d", c.Name, *c.Value, c.Source)
		for _, syn := range c.ConfigSynonyms {
			line += fmt.Sprintf(" %s=%s/%d", syn.Name, *syn.Value, syn.Source)
		}
		if c.ConfigType != kmsg.ConfigTypeInt || c.Documentation == nil || c.ReadOnly {
			t.Errorf("%s: type %v, documentation %v, read-only %v", c.Name, c.ConfigType, c.Documentation, c.ReadOnly)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

const (
	set = kmsg.IncrementalAlterConfigOpSet
	del = kmsg.IncrementalAlterConfigOpDelete
	grp = kmsg.ConfigResourceTypeGroupConfig
)

// A group's configs are set, shown and removed through the admin APIs, at
// every version; DescribeConfigs shows the node's value (a flag's, or
// Kafka's default) where the group sets none, with the broker-level name as
// a synonym.
func TestGroupConfigsAltered(t *testing.T) {
	ts := startDataPlane(t, func(c *Config) {
		c.Group = group.Defaults()
		c.Group.ConsumerHeartbeatInterval = 4 * time.Second // as cohort serve --consumer-heartbeat-interval 4s
	})
	s := ts.srv
	want := `consumer.session.timeout.ms=45000/5 group.consumer.session.timeout.ms=45000/5
consumer.heartbeat.interval.ms=4000/4 group.consumer.heartbeat.interval.ms=4000/4 group.consumer.heartbeat.interval.ms=5000/5
consumer.assignment.interval.ms=1000/5 group.consumer.assignment.interval.ms=1000/5`
	if got := groupDescribed(t, s, "g"); got != want {
		t.Fatalf("before any change:\n%s\nwant\n%s", got, want)
	}
	for v, session := range []string{"50000", "060000"} { // v0 stores one value, v1 replaces it
		if got := iacResult(t, answer(t, s, iac(int16(v), grp, "g", group.ConfigSessionTimeout, set, session, group.ConfigAssignmentInterval, set, "0"))); got != "0" {
			t.Fatalf("v%d set: %s", v, got)
		}
		if got := s.Catalog().GroupConfig("g")[group.ConfigSessionTimeout]; got != strings.TrimLeft(session, "0") {
			t.Fatalf("v%d stored %s, want %s", v, got, session)
		}
	}
	want = `consumer.session.timeout.ms=60000/8 consumer.session.timeout.ms=60000/8 group.consumer.session.timeout.ms=45000/5
consumer.heartbeat.interval.ms=4000/4 group.consumer.heartbeat.interval.ms=4000/4 group.consumer.heartbeat.interval.ms=5000/5
consumer.assignment.interval.ms=0/8 consumer.assignment.interval.ms=0/8 group.consumer.assignment.interval.ms=1000/5`
	if got := groupDescribed(t, s, "g"); got != want {
		t.Fatalf("after setting:\n%s\nwant\n%s", got, want)
	}
	if got := s.Catalog().GroupConfig("g"); len(got) != 2 || got[group.ConfigSessionTimeout] != "60000" {
		t.Fatalf("stored %v (canonical values)", got)
	}
	// Only the names asked for.
	req := describeConfigsReq(4, grp, "g")
	req.Resources[0].ConfigNames = []string{group.ConfigHeartbeatInterval}
	if cs := answer(t, s, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs; len(cs) != 1 || cs[0].Name != group.ConfigHeartbeatInterval {
		t.Fatalf("asked for one name: %v", cs)
	}

	// Refusals change nothing.
	before := groupDescribed(t, s, "g")
	for _, c := range []struct {
		req  kmsg.Request
		want string
	}{
		{iac(1, grp, "g", group.ConfigSessionTimeout, set, "500"), "40 consumer.session.timeout.ms must be in the range 1000 to 3600000 inclusive, not 500"},
		{iac(1, grp, "g", group.ConfigHeartbeatInterval, set, "60000"), "40 consumer.session.timeout.ms (60000) must be greater than consumer.heartbeat.interval.ms (60000; a value the group does not set is the node's)"},
		{iac(1, grp, "g", group.ConfigSessionTimeout, del, "<nil>", group.ConfigHeartbeatInterval, set, "50000"), "40 consumer.session.timeout.ms (45000) must be greater than consumer.heartbeat.interval.ms (50000; a value the group does not set is the node's)"},
		{iac(1, grp, "g", group.ConfigAssignmentInterval, set, "15001"), "40 consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive, not 15001"},
		{iac(1, grp, "g", group.ConfigSessionTimeout, set, "1m"), `40 invalid value "1m" for configuration consumer.session.timeout.ms: not an integer (milliseconds)`},
		{iac(1, grp, "g", "share.session.timeout.ms", set, "50000"), "40 unknown group config name: share.session.timeout.ms (cohort keeps consumer.session.timeout.ms, consumer.heartbeat.interval.ms, consumer.assignment.interval.ms)"},
		{iac(1, grp, "g", group.ConfigSessionTimeout, kmsg.IncrementalAlterConfigOpAppend, "1"), "40 Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."},
		{iac(1, grp, "g", group.ConfigSessionTimeout, set, "<nil>"), "42 Null value not supported for consumer.session.timeout.ms"},
		{iac(1, grp, "g", group.ConfigSessionTimeout, set, "50000", group.ConfigSessionTimeout, del, "<nil>"), "42 Error due to duplicate config keys: consumer.session.timeout.ms"},
		{iac(1, grp, "", group.ConfigSessionTimeout, set, "50000"), "42 Default group resources are not allowed."},
		{iac(1, kmsg.ConfigResourceTypeTopic, dpTopic, "retention.ms", set, "1"), "40 cohort keeps no topic configs: it stores no records (only a consumer group's configs can be altered)"},
		{iac(1, kmsg.ConfigResourceTypeTopic, "missing", "retention.ms", set, "1"), "3 UNKNOWN_TOPIC_OR_PARTITION"},
		{iac(1, kmsg.ConfigResourceTypeBroker, "", "log.retention.ms", set, "1"), "40 cohort keeps no broker or client-metrics configs: its settings are cohort serve's flags (only a consumer group's configs can be altered)"},
		{iac(1, kmsg.ConfigResourceType(99), "x", "a", set, "1"), "42 Unknown resource type 99"},
	} {
		if got := iacResult(t, answer(t, s, c.req)); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	if got := groupDescribed(t, s, "g"); got != before {
		t.Fatalf("a refused change changed the configs:\n%s", got)
	}

	// ValidateOnly checks and changes nothing.
	vo := iac(1, grp, "g", group.ConfigHeartbeatInterval, set, "2000")
	vo.ValidateOnly = true
	if got := iacResult(t, answer(t, s, vo)); got != "0" || groupDescribed(t, s, "g") != before {
		t.Fatalf("validate only: %s", got)
	}
	vo = iac(1, grp, strings.Repeat("g", 2000), group.ConfigHeartbeatInterval, set, "2000")
	vo.ValidateOnly = true
	if got := iacResult(t, answer(t, s, vo)); !strings.HasPrefix(got, "42 catalog: invalid group config: a group name of 2000 bytes") {
		t.Fatalf("validate only, a name too long to store: %s", got)
	}
	vo = iac(1, grp, "g", group.ConfigHeartbeatInterval, set, "90000")
	vo.ValidateOnly = true
	if got := iacResult(t, answer(t, s, vo)); !strings.HasPrefix(got, "40 consumer.session.timeout.ms (60000) must be greater") {
		t.Fatalf("validate only, an invalid change: %s", got)
	}

	// A resource named twice in one request: both refused.
	twice := iac(1, grp, "g", group.ConfigHeartbeatInterval, set, "2000")
	twice.Resources = append(twice.Resources, twice.Resources[0])
	for i, rr := range answer(t, s, twice).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if rr.ErrorCode != errInvalidRequest {
			t.Errorf("resource %d of a request naming g twice: %d", i, rr.ErrorCode)
		}
	}
	if groupDescribed(t, s, "g") != before {
		t.Fatal("a request naming g twice changed it")
	}

	// DELETE goes back to the node's value; the last one removes the group.
	if got := iacResult(t, answer(t, s, iac(1, grp, "g", group.ConfigSessionTimeout, del, "<nil>", group.ConfigAssignmentInterval, del, "<nil>"))); got != "0" {
		t.Fatalf("delete: %s", got)
	}
	if s.Catalog().GroupConfig("g") != nil || len(s.Catalog().ConfiguredGroups()) != 0 {
		t.Fatalf("configs left: %v", s.Catalog().GroupConfig("g"))
	}

	// AlterConfigs replaces the whole set.
	legacy := func(cfg map[string]string) *kmsg.AlterConfigsRequest {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(2)
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = grp, "g"
		for k, v := range cfg {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		return req
	}
	for _, cfg := range []map[string]string{{group.ConfigSessionTimeout: "50000"}, {group.ConfigHeartbeatInterval: "3000"}} {
		if got := iacResult(t, answer(t, s, legacy(cfg))); got != "0" {
			t.Fatalf("AlterConfigs %v: %s", cfg, got)
		}
	}
	if got := s.Catalog().GroupConfig("g"); len(got) != 1 || got[group.ConfigHeartbeatInterval] != "3000" {
		t.Fatalf("after AlterConfigs: %v (the session timeout left out is removed)", got)
	}
}

// Altering a group's configs needs ALTER_CONFIGS on the group; a topic's,
// ALTER_CONFIGS on the topic; a broker's, on the cluster.
func TestAuthzAlterConfigs(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("mine", 1)
	req := iac(1, grp, "g", group.ConfigSessionTimeout, set, "50000")
	if got := iacResult(t, e.as(alice, req)); got != "30 GROUP_AUTHORIZATION_FAILED" {
		t.Errorf("without ALTER_CONFIGS: %s", got)
	}
	e.grant(allow(alice, acl.OpDescribeConfigs, acl.ResourceGroup, "g"))
	if got := iacResult(t, e.as(alice, req)); !strings.HasPrefix(got, "30 ") {
		t.Errorf("with DESCRIBE_CONFIGS only: %s", got)
	}
	if e.cat.GroupConfig("g") != nil {
		t.Fatal("a refused change was stored")
	}
	e.grant(allow(alice, acl.OpAlterConfigs, acl.ResourceGroup, "g"))
	if got := iacResult(t, e.as(alice, req)); got != "0" || e.cat.GroupConfig("g")[group.ConfigSessionTimeout] != "50000" {
		t.Errorf("with ALTER_CONFIGS: %s, %v", got, e.cat.GroupConfig("g"))
	}
	if got := iacResult(t, e.as(alice, iac(1, kmsg.ConfigResourceTypeTopic, "mine", "retention.ms", set, "1"))); !strings.HasPrefix(got, "29 ") {
		t.Errorf("topic: %s", got)
	}
	if got := iacResult(t, e.as(alice, iac(1, kmsg.ConfigResourceTypeBroker, "", "x", set, "1"))); !strings.HasPrefix(got, "31 ") {
		t.Errorf("broker: %s", got)
	}
	// A resource type Kafka does not alter is refused as such, with or
	// without ACLs (not as a cluster resource).
	if got := iacResult(t, e.as(alice, iac(1, kmsg.ConfigResourceType(99), "x", "a", set, "1"))); !strings.HasPrefix(got, "42 Unknown resource type 99") {
		t.Errorf("unknown type: %s", got)
	}
}

// configResources is ListConfigResources' answer: the top-level code, then
// type/name per resource.
func configResources(t *testing.T, resp kmsg.Response) string {
	t.Helper()
	r := resp.(*kmsg.ListConfigResourcesResponse)
	out := []string{fmt.Sprint(r.ErrorCode)}
	for _, c := range r.ConfigResources {
		out = append(out, fmt.Sprintf("%d/%s", c.Type, c.Name))
	}
	return strings.Join(out, " ")
}

func listConfigResourcesReq(v int16, types ...kmsg.ConfigResourceType) *kmsg.ListConfigResourcesRequest {
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.SetVersion(v)
	for _, tp := range types {
		req.ResourceTypes = append(req.ResourceTypes, int8(tp))
	}
	return req
}

// ListConfigResources names the groups that have configs (what
// kafka-configs --describe --entity-type groups adds to ListGroups), the
// brokers and the topics; v0 only client-metrics subscriptions (none).
func TestListConfigResources(t *testing.T) {
	ts := startDataPlane(t) // topic dp, broker 0
	s := ts.srv
	for _, g := range []string{"zeta", "alpha"} {
		if got := iacResult(t, answer(t, s, iac(1, grp, g, group.ConfigSessionTimeout, set, "50000"))); got != "0" {
			t.Fatal(got)
		}
	}
	for _, c := range []struct {
		req  *kmsg.ListConfigResourcesRequest
		want string
	}{
		{listConfigResourcesReq(1), "0 32/alpha 32/zeta 8/0 4/0 2/dp"},
		{listConfigResourcesReq(1, grp), "0 32/alpha 32/zeta"},
		{listConfigResourcesReq(1, kmsg.ConfigResourceTypeTopic, grp), "0 32/alpha 32/zeta 2/dp"},
		{listConfigResourcesReq(1, kmsg.ConfigResourceTypeClientMetrics), "0"},
		{listConfigResourcesReq(1, grp, kmsg.ConfigResourceType(1)), "35"},
		{listConfigResourcesReq(0), "0"},
	} {
		if got := configResources(t, answer(t, s, c.req)); got != c.want {
			t.Errorf("types %v v%d: %s, want %s", c.req.ResourceTypes, c.req.Version, got, c.want)
		}
	}
}

// With ACLs, ListConfigResources needs DESCRIBE_CONFIGS on the cluster.
func TestAuthzListConfigResources(t *testing.T) {
	e := newAuthzEnv(t)
	if got := configResources(t, e.as(alice, listConfigResourcesReq(1, grp))); got != "31" {
		t.Errorf("without DESCRIBE_CONFIGS on the cluster: %s", got)
	}
	e.grant(allow(alice, acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName))
	if got := configResources(t, e.as(alice, listConfigResourcesReq(1, grp))); got != "0" {
		t.Errorf("with it: %s", got)
	}
}

// A value with blanks around the number is the number, as Kafka parses an
// INT config after trimming it (kafka-configs passes "name= 50000" so):
// it is accepted and stored without them.
func TestGroupConfigValueTrimmed(t *testing.T) {
	ts := startDataPlane(t, func(c *Config) { c.Group = group.Defaults() })
	s := ts.srv
	if got := iacResult(t, answer(t, s, iac(1, grp, "g", group.ConfigSessionTimeout, set, " 50000\t", group.ConfigAssignmentInterval, set, "0 "))); got != "0" {
		t.Fatalf("set with blanks: %s", got)
	}
	if got := s.Catalog().GroupConfig("g"); got[group.ConfigSessionTimeout] != "50000" || got[group.ConfigAssignmentInterval] != "0" {
		t.Fatalf("stored %q", got)
	}
	if o := group.ParseOverrides(map[string]string{group.ConfigSessionTimeout: " 50000 "}); o.SessionTimeout != 50*time.Second {
		t.Fatalf("a stored value with blanks is used: %v", o.SessionTimeout)
	}
}

// AlterConfigs (the legacy API) does not alter broker loggers: Kafka
// refuses that resource type with INVALID_REQUEST before anything else, as
// any type it does not know, where IncrementalAlterConfigs accepts it.
func TestLegacyAlterConfigsRefusesBrokerLoggers(t *testing.T) {
	ts := startDataPlane(t, func(c *Config) { c.Group = group.Defaults() })
	for _, rt := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBrokerLogger, 99} {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(2)
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = rt, "0"
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "kafka.server", kmsg.StringPtr("DEBUG")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		want := fmt.Sprintf("42 Unknown resource type %d", rt)
		if got := iacResult(t, answer(t, ts.srv, req)); got != want {
			t.Errorf("AlterConfigs of type %d: %s, want %s", rt, got, want)
		}
	}
	// IncrementalAlterConfigs knows the type (cohort keeps no logger levels).
	if got := iacResult(t, answer(t, ts.srv, iac(1, kmsg.ConfigResourceTypeBrokerLogger, "0", "kafka.server", set, "DEBUG"))); !strings.HasPrefix(got, "40 ") {
		t.Errorf("IncrementalAlterConfigs of a broker logger: %s", got)
	}
}
