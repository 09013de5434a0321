package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// describeConfigsReq builds a DescribeConfigs of (type, name) pairs.
func describeConfigsReq(v int16, resources ...any) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(v)
	for i := 0; i < len(resources); i += 2 {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = resources[i].(kmsg.ConfigResourceType), resources[i+1].(string)
		req.Resources = append(req.Resources, rr)
	}
	return req
}

// configCodes lists each answered resource as type/name=code, in order.
func configCodes(t *testing.T, resp *kmsg.DescribeConfigsResponse) string {
	t.Helper()
	var out []string
	for _, r := range resp.Resources {
		if len(r.Configs) != 0 && r.ResourceType != kmsg.ConfigResourceTypeGroupConfig { // groups: alterconfigs_test.go
			t.Errorf("%v %q: configs %v, cohort keeps none", r.ResourceType, r.ResourceName, r.Configs)
		}
		out = append(out, fmt.Sprintf("%d/%s=%d", r.ResourceType, r.ResourceName, r.ErrorCode))
	}
	return strings.Join(out, " ")
}

// DescribeConfigs: an existing resource is answered without configs and
// without error; missing or malformed ones get Kafka's errors; a resource
// type Kafka does not describe fails the whole request, at every version.
func TestDescribeConfigs(t *testing.T) {
	ts := startDataPlane(t) // topic dp, broker 0
	const (
		topic  = kmsg.ConfigResourceTypeTopic
		broker = kmsg.ConfigResourceTypeBroker
		logger = kmsg.ConfigResourceTypeBrokerLogger
		cm     = kmsg.ConfigResourceTypeClientMetrics
		grp    = kmsg.ConfigResourceTypeGroupConfig
	)
	for v := int16(0); v <= 4; v++ {
		resp := answer(t, ts.srv, describeConfigsReq(v,
			topic, dpTopic, topic, "missing", topic, "bad/name",
			broker, "", broker, "0", broker, "7", broker, "zero",
			logger, "0", logger, "",
			cm, "sub", cm, "",
			grp, "g", grp, "",
		)).(*kmsg.DescribeConfigsResponse)
		want := "2/dp=0 2/missing=3 2/bad/name=17 4/=0 4/0=0 4/7=42 4/zero=42 8/0=0 8/=42 16/sub=0 16/=42 32/g=0 32/=42"
		if got := configCodes(t, resp); got != want {
			t.Errorf("v%d: %s\nwant %s", v, got, want)
		}
		resp = answer(t, ts.srv, describeConfigsReq(v, topic, dpTopic, kmsg.ConfigResourceType(1), "what")).(*kmsg.DescribeConfigsResponse)
		if got := configCodes(t, resp); got != "2/dp=42 1/what=42" {
			t.Errorf("v%d with an unknown resource type: %s", v, got)
		}
	}
}

// With an authorizer each resource needs DESCRIBE_CONFIGS: on the topic
// (29), the group (30), or the cluster for brokers, loggers and client
// metrics (31); allowed resources are answered as without one.
func TestAuthzDescribeConfigs(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("mine", 1)
	e.ensureTopic("theirs", 1)
	req := describeConfigsReq(4,
		kmsg.ConfigResourceTypeTopic, "mine", kmsg.ConfigResourceTypeTopic, "theirs",
		kmsg.ConfigResourceTypeGroupConfig, "g", kmsg.ConfigResourceTypeBroker, "1")
	e.grant(allow(alice, acl.OpDescribeConfigs, acl.ResourceTopic, "mine"))
	if got := configCodes(t, e.as(alice, req).(*kmsg.DescribeConfigsResponse)); got != "2/mine=0 2/theirs=29 32/g=30 4/1=31" {
		t.Errorf("DESCRIBE_CONFIGS on mine only: %s", got)
	}
	e.grant(allow(alice, acl.OpDescribeConfigs, acl.ResourceTopic, "mine"), allow(alice, acl.OpAlterConfigs, acl.ResourceGroup, "g"),
		allow(alice, acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName))
	if got := configCodes(t, e.as(alice, req).(*kmsg.DescribeConfigsResponse)); got != "2/mine=0 2/theirs=29 32/g=0 4/1=0" {
		t.Errorf("with ALTER_CONFIGS on g and DESCRIBE_CONFIGS on the cluster: %s", got)
	}
}
