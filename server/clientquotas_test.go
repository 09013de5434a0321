package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// quotaFilter builds a DescribeClientQuotas request: each component is
// "type/match-type/name", a name of "-" being null.
func quotaFilter(v int16, strict bool, components ...string) *kmsg.DescribeClientQuotasRequest {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(v)
	req.Strict = strict
	for _, c := range components {
		parts := strings.SplitN(c, "/", 3)
		rc := kmsg.NewDescribeClientQuotasRequestComponent()
		rc.EntityType = parts[0]
		fmt.Sscan(parts[1], &rc.MatchType)
		if parts[2] != "-" {
			rc.Match = kmsg.StringPtr(parts[2])
		}
		req.Components = append(req.Components, rc)
	}
	return req
}

// quotaResult is a DescribeClientQuotas answer as Java's admin client reads
// it: the error code, and "entries" when the entry list is present (Java
// iterates it unchecked when there is no error) or "null" when it is not.
func quotaResult(t *testing.T, resp kmsg.Response) string {
	t.Helper()
	r := resp.(*kmsg.DescribeClientQuotasResponse)
	list := "null"
	if r.Entries != nil {
		list = fmt.Sprintf("entries=%d", len(r.Entries))
	}
	return fmt.Sprintf("%d %s", r.ErrorCode, list)
}

// kafka-configs.sh --describe --entity-type users (or clients, ips) asks
// DescribeClientQuotas first and only then describes the users' SCRAM
// credentials: a broker that does not advertise the API fails the whole
// command. cohort keeps no quotas: it answers no entries, as a Kafka broker
// with none configured, with Kafka's refusals of malformed filters.
func TestDescribeClientQuotasAsKafkaConfigs(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial(t)
	av := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	advertised := false
	for _, k := range av.ApiKeys {
		if k.ApiKey == kmsg.DescribeClientQuotas.Int16() {
			advertised = k.MinVersion == 0 && k.MaxVersion == 1
		}
	}
	if !advertised {
		t.Fatal("DescribeClientQuotas 0-1 not advertised: kafka-configs --describe --entity-type users fails")
	}
	for _, c := range []struct {
		req  *kmsg.DescribeClientQuotasRequest
		want string
	}{
		// What ConfigCommand sends: --entity-name alice; no name; --entity-default;
		// a user and a client together; an IP.
		{quotaFilter(1, true, "user/0/alice"), "0 entries=0"},
		{quotaFilter(0, true, "user/0/alice"), "0 entries=0"},
		{quotaFilter(1, true, "user/2/-"), "0 entries=0"},
		{quotaFilter(1, true, "user/1/-"), "0 entries=0"},
		{quotaFilter(1, true, "user/0/alice", "client-id/0/app"), "0 entries=0"},
		{quotaFilter(1, true, "ip/0/10.0.0.1"), "0 entries=0"},
		{quotaFilter(1, false), "0 entries=0"},
		// Kafka's refusals (ClientQuotasImage.describe), no entry list.
		{quotaFilter(1, true, "/0/x"), "42 null"},
		{quotaFilter(1, true, "user/0/a", "user/0/b"), "42 null"},
		{quotaFilter(1, true, "group/0/g"), "35 null"},
		{quotaFilter(1, true, "user/0/-"), "42 null"},
		{quotaFilter(1, true, "user/1/x"), "42 null"},
		{quotaFilter(1, true, "user/2/x"), "42 null"},
		{quotaFilter(1, true, "user/3/-"), "42 null"},
		{quotaFilter(1, true, "ip/2/-", "user/0/a"), "42 null"},
	} {
		if got := quotaResult(t, rc.roundTrip(c.req)); got != c.want {
			t.Errorf("v%d %+v: %s, want %s", c.req.Version, c.req.Components, got, c.want)
		}
	}
}

// With ACLs, DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster.
func TestAuthzDescribeClientQuotas(t *testing.T) {
	e := newAuthzEnv(t)
	if got := quotaResult(t, e.as(alice, quotaFilter(1, true, "user/0/alice"))); got != "31 null" {
		t.Errorf("without DESCRIBE_CONFIGS on the cluster: %s", got)
	}
	e.grant(allow(alice, acl.OpDescribeConfigs, acl.ResourceCluster, acl.ClusterName))
	if got := quotaResult(t, e.as(alice, quotaFilter(1, true, "user/0/alice"))); got != "0 entries=0" {
		t.Errorf("with it: %s", got)
	}
}
