package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// secAdminFake is a SecurityAdmin that records its calls and answers
// what the test set.
type secAdminFake struct {
	users      map[string][]UserCredential
	acls       []acl.Binding
	createErrs []error
	deleted    [][]acl.Binding
	deleteErrs []error
	alterErrs  []error

	calls    []string
	filter   acl.Filter
	names    []string
	bindings []acl.Binding
	filters  []acl.Filter
	upserts  []UserUpsert
	dels     []UserDeletion
}

func (f *secAdminFake) Users(names []string) map[string][]UserCredential {
	f.calls = append(f.calls, "Users")
	f.names = names
	if names == nil {
		return f.users
	}
	out := map[string][]UserCredential{}
	for _, n := range names {
		if cs, ok := f.users[n]; ok {
			out[n] = cs
		}
	}
	return out
}

func (f *secAdminFake) AlterUsers(_ context.Context, ups []UserUpsert, dels []UserDeletion) []error {
	f.calls = append(f.calls, "AlterUsers")
	f.upserts, f.dels = ups, dels
	return f.alterErrs
}

func (f *secAdminFake) ACLs(flt acl.Filter) []acl.Binding {
	f.calls = append(f.calls, "ACLs")
	f.filter = flt
	return f.acls
}

func (f *secAdminFake) CreateACLs(_ context.Context, bs []acl.Binding) []error {
	f.calls = append(f.calls, "CreateACLs")
	f.bindings = bs
	return f.createErrs
}

func (f *secAdminFake) DeleteACLs(_ context.Context, fs []acl.Filter) ([][]acl.Binding, []error) {
	f.calls = append(f.calls, "DeleteACLs")
	f.filters = fs
	return f.deleted, f.deleteErrs
}

// clusterOnly allows each principal the CLUSTER operations listed for it
// and nothing else, and records the hosts it was asked about.
type clusterOnly struct {
	mu    sync.Mutex
	ops   map[string][]acl.Operation
	hosts []string
}

func (a *clusterOnly) Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	a.mu.Lock()
	a.hosts = append(a.hosts, host)
	a.mu.Unlock()
	return rt == acl.ResourceCluster && name == acl.ClusterName && slices.Contains(a.ops[principal], op)
}

func (a *clusterOnly) AuthorizedOperations(string, string, acl.ResourceType, string) int32 { return 0 }

// secAdminServer is a server with admin and authz (either may be nil),
// logging JSON into the returned buffer.
func secAdminServer(t *testing.T, admin SecurityAdmin, authz Authorizer) (*Server, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := New(Config{Listen: "127.0.0.1:0", Groups: newFakeGroups(), Topology: SingleNode(Broker{NodeID: 1}, "c"),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Security: &Security{Admin: admin, Authorizer: authz}})
	if err != nil {
		t.Fatal(err)
	}
	return s, &logs
}

var (
	adminClient  = Client{Principal: "User:admin", Host: "10.1.2.3"}
	readerClient = Client{Principal: "User:reader", Host: "10.1.2.4"}
	otherClient  = Client{Principal: "User:mallory", Host: "10.1.2.5"}
)

func secAdminAuthz() *clusterOnly {
	return &clusterOnly{ops: map[string][]acl.Operation{
		"User:admin":  {acl.OpAlter, acl.OpDescribe},
		"User:reader": {acl.OpDescribe},
	}}
}

// requests builds one request of each of the five APIs, naming users
// alice (twice) and bob.
func secAdminRequests() (*kmsg.DescribeACLsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest,
	*kmsg.DescribeUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsRequest) {
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	c := kmsg.NewPtrCreateACLsRequest()
	c.Creations = []kmsg.CreateACLsRequestCreation{kmsg.NewCreateACLsRequestCreation(), kmsg.NewCreateACLsRequestCreation()}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"alice", "bob"} {
		n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		n.Name = u
		ds.Users = append(ds.Users, n)
	}
	a := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []string{"bob", "alice"} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations = u, 1, 4096
		a.Upsertions = append(a.Upsertions, up)
	}
	dl := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	dl.Name, dl.Mechanism = "alice", 2
	a.Deletions = append(a.Deletions, dl)
	return d, c, del, ds, a
}

// secAdminCodes runs the five requests as c and returns their error codes:
// top-level for the describes, per result otherwise ("user=code" for the
// SCRAM APIs).
func secAdminCodes(s *Server, c Client) []string {
	ctx := context.Background()
	d, cr, del, ds, a := secAdminRequests()
	var out []string
	out = append(out, fmt.Sprint("describeACLs=", s.describeACLs(c, d).(*kmsg.DescribeACLsResponse).ErrorCode))
	for _, r := range s.createACLs(ctx, c, cr).(*kmsg.CreateACLsResponse).Results {
		out = append(out, fmt.Sprint("createACLs=", r.ErrorCode))
	}
	for _, r := range s.deleteACLs(ctx, c, del).(*kmsg.DeleteACLsResponse).Results {
		out = append(out, fmt.Sprint("deleteACLs=", r.ErrorCode))
	}
	dr := s.describeUserSCRAMCredentials(c, ds).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	out = append(out, fmt.Sprint("describeSCRAM=", dr.ErrorCode))
	for _, r := range dr.Results {
		out = append(out, fmt.Sprintf("describeSCRAM %s=%d", r.User, r.ErrorCode))
	}
	for _, r := range s.alterUserSCRAMCredentials(ctx, c, a).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		out = append(out, fmt.Sprintf("alterSCRAM %s=%d", r.User, r.ErrorCode))
	}
	return out
}

func TestSecAdminWithoutAdminIsSecurityDisabled(t *testing.T) {
	s, _ := secAdminServer(t, nil, nil)
	got := strings.Join(secAdminCodes(s, adminClient), " ")
	want := "describeACLs=54 createACLs=54 createACLs=54 deleteACLs=54 describeSCRAM=54 " +
		"describeSCRAM alice=54 describeSCRAM bob=54 alterSCRAM alice=54 alterSCRAM bob=54"
	if got != want {
		t.Errorf("codes\n got %s\nwant %s", got, want)
	}
	// A server without any Security answers the same.
	s2, err := New(Config{Listen: "127.0.0.1:0", Groups: newFakeGroups(), Topology: SingleNode(Broker{NodeID: 1}, "c")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(secAdminCodes(s2, adminClient), " "); got != want {
		t.Errorf("without Security\n got %s\nwant %s", got, want)
	}
}

func TestSecAdminClusterAuthorization(t *testing.T) {
	fa := &secAdminFake{users: map[string][]UserCredential{"alice": {{Mechanism: sasl.ScramSHA256, Iterations: 4096}}}}
	az := secAdminAuthz()
	s, logs := secAdminServer(t, fa, az)

	// Not even DESCRIBE: everything refused, and the admin never asked.
	got := strings.Join(secAdminCodes(s, otherClient), " ")
	want := "describeACLs=31 createACLs=31 createACLs=31 deleteACLs=31 describeSCRAM=31 " +
		"describeSCRAM alice=31 describeSCRAM bob=31 alterSCRAM alice=31 alterSCRAM bob=31"
	if got != want {
		t.Errorf("no permission\n got %s\nwant %s", got, want)
	}
	if len(fa.calls) != 0 {
		t.Errorf("refused requests reached the admin: %v", fa.calls)
	}
	for _, h := range az.hosts {
		if h != otherClient.Host {
			t.Errorf("authorized for host %q, want the client's %q", h, otherClient.Host)
		}
	}

	// DESCRIBE only: the describes pass, the changes are refused.
	got = strings.Join(secAdminCodes(s, readerClient), " ")
	want = "describeACLs=0 createACLs=31 createACLs=31 deleteACLs=31 describeSCRAM=0 " +
		"describeSCRAM alice=0 describeSCRAM bob=91 alterSCRAM alice=31 alterSCRAM bob=31"
	if got != want {
		t.Errorf("DESCRIBE only\n got %s\nwant %s", got, want)
	}
	if !slices.Equal(fa.calls, []string{"ACLs", "Users"}) {
		t.Errorf("admin calls = %v", fa.calls)
	}
	if logs.Len() != 0 {
		t.Errorf("refused requests logged changes: %s", logs)
	}

	// ALTER and DESCRIBE: all pass.
	fa.calls = nil
	got = strings.Join(secAdminCodes(s, adminClient), " ")
	want = "describeACLs=0 createACLs=0 createACLs=0 deleteACLs=0 describeSCRAM=0 " +
		"describeSCRAM alice=0 describeSCRAM bob=91 alterSCRAM alice=0 alterSCRAM bob=0"
	if got != want {
		t.Errorf("ALTER\n got %s\nwant %s", got, want)
	}
	if !slices.Equal(fa.calls, []string{"ACLs", "CreateACLs", "DeleteACLs", "Users", "AlterUsers"}) {
		t.Errorf("admin calls = %v", fa.calls)
	}
}

func TestSecAdminDescribeACLs(t *testing.T) {
	topic := func(name string, pt acl.PatternType, principal string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: pt, Principal: principal,
			Host: "*", Operation: op, Permission: acl.PermissionAllow}
	}
	fa := &secAdminFake{acls: []acl.Binding{
		topic("orders", acl.PatternLiteral, "User:a", acl.OpRead),
		topic("orders", acl.PatternLiteral, "User:b", acl.OpWrite),
		topic("orders", acl.PatternPrefixed, "User:a", acl.OpRead),
		topic("pay", acl.PatternLiteral, "User:c", acl.OpDescribe),
	}}
	s, _ := secAdminServer(t, fa, secAdminAuthz())
	req := kmsg.NewPtrDescribeACLsRequest()
	req.SetVersion(3)
	req.ResourceType, req.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders")
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch
	req.Principal, req.Host = kmsg.StringPtr("User:a"), nil
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAllow
	resp := s.describeACLs(adminClient, req).(*kmsg.DescribeACLsResponse)
	if resp.ErrorCode != 0 || resp.GetVersion() != 3 {
		t.Fatalf("error %d, version %d", resp.ErrorCode, resp.GetVersion())
	}
	wantFilter := acl.Filter{ResourceType: acl.ResourceTopic, ResourceName: req.ResourceName, PatternType: acl.PatternMatch,
		Principal: req.Principal, Operation: acl.OpAny, Permission: acl.PermissionAllow}
	if fa.filter != wantFilter {
		t.Errorf("filter = %+v, want %+v", fa.filter, wantFilter)
	}
	var got []string
	for _, r := range resp.Resources {
		var acls []string
		for _, a := range r.ACLs {
			acls = append(acls, fmt.Sprintf("%s@%s:%v/%v", a.Principal, a.Host, a.Operation, a.PermissionType))
		}
		got = append(got, fmt.Sprintf("%v %s %v: %s", r.ResourceType, r.ResourceName, r.ResourcePatternType, strings.Join(acls, ",")))
	}
	want := []string{
		"TOPIC orders LITERAL: User:a@*:READ/ALLOW,User:b@*:WRITE/ALLOW",
		"TOPIC orders PREFIXED: User:a@*:READ/ALLOW",
		"TOPIC pay LITERAL: User:c@*:DESCRIBE/ALLOW",
	}
	if !slices.Equal(got, want) {
		t.Errorf("resources\n got %q\nwant %q", got, want)
	}

	// An UNKNOWN operation is INVALID_REQUEST, without asking the admin.
	fa.calls = nil
	req.Operation = kmsg.ACLOperationUnknown
	resp = s.describeACLs(adminClient, req).(*kmsg.DescribeACLsResponse)
	if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil || len(fa.calls) != 0 {
		t.Errorf("invalid filter: code %d, message %v, calls %v", resp.ErrorCode, resp.ErrorMessage, fa.calls)
	}
}

func TestSecAdminCreateAndDeleteACLs(t *testing.T) {
	b := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "g", PatternType: acl.PatternPrefixed,
		Principal: "User:alice", Host: "10.0.0.1", Operation: acl.OpRead, Permission: acl.PermissionDeny}
	fa := &secAdminFake{
		createErrs: []error{nil, fmt.Errorf("%w: bad", acl.ErrInvalid), fmt.Errorf("%w: disk", ErrAdminStorage), errors.New("boom")},
		deleted:    [][]acl.Binding{{b}, nil, nil},
		deleteErrs: []error{nil, fmt.Errorf("%w: bad filter", acl.ErrInvalid), nil},
	}
	s, logs := secAdminServer(t, fa, secAdminAuthz())
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.SetVersion(2)
	for range 4 {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypePrefixed
		c.Principal, c.Host = "User:alice", "10.0.0.1"
		c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny
		cr.Creations = append(cr.Creations, c)
	}
	cresp := s.createACLs(context.Background(), adminClient, cr).(*kmsg.CreateACLsResponse)
	var codes []int16
	for _, r := range cresp.Results {
		codes = append(codes, r.ErrorCode)
	}
	if !slices.Equal(codes, []int16{0, kerr.InvalidRequest.Code, kerr.KafkaStorageError.Code, kerr.UnknownServerError.Code}) {
		t.Errorf("create codes = %v", codes)
	}
	if len(fa.bindings) != 4 || fa.bindings[0] != b {
		t.Errorf("bindings given to the admin = %+v", fa.bindings)
	}
	if cresp.Results[1].ErrorMessage == nil || !strings.Contains(*cresp.Results[1].ErrorMessage, "bad") {
		t.Errorf("the admin's message is not passed on: %v", cresp.Results[1].ErrorMessage)
	}
	if n := strings.Count(logs.String(), `"msg":"ACL created"`); n != 1 || !strings.Contains(logs.String(), `"by":"User:admin"`) {
		t.Errorf("%d creation log lines: %s", n, logs)
	}

	logs.Reset()
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.SetVersion(3)
	for range 3 {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		f.Host = kmsg.StringPtr("10.0.0.1")
		dr.Filters = append(dr.Filters, f)
	}
	dresp := s.deleteACLs(context.Background(), adminClient, dr).(*kmsg.DeleteACLsResponse)
	if len(fa.filters) != 3 || fa.filters[0].Host == nil || *fa.filters[0].Host != "10.0.0.1" || fa.filters[0].ResourceName != nil {
		t.Errorf("filters given to the admin = %+v", fa.filters)
	}
	if len(dresp.Results) != 3 || dresp.Results[0].ErrorCode != 0 || dresp.Results[1].ErrorCode != kerr.InvalidRequest.Code ||
		dresp.Results[2].ErrorCode != 0 || len(dresp.Results[2].MatchingACLs) != 0 {
		t.Fatalf("delete results = %+v", dresp.Results)
	}
	m := dresp.Results[0].MatchingACLs
	if len(m) != 1 || m[0].ResourceType != kmsg.ACLResourceTypeGroup || m[0].ResourceName != "g" ||
		m[0].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed || m[0].Principal != "User:alice" ||
		m[0].Host != "10.0.0.1" || m[0].Operation != kmsg.ACLOperationRead || m[0].PermissionType != kmsg.ACLPermissionTypeDeny || m[0].ErrorCode != 0 {
		t.Errorf("matching ACLs = %+v", m)
	}
	if n := strings.Count(logs.String(), `"msg":"ACL deleted"`); n != 1 {
		t.Errorf("%d deletion log lines: %s", n, logs)
	}
}

func TestSecAdminDescribeUserSCRAMCredentials(t *testing.T) {
	fa := &secAdminFake{users: map[string][]UserCredential{
		"bob":   {{Mechanism: sasl.ScramSHA512, Iterations: 8192}},
		"alice": {{Mechanism: sasl.ScramSHA256, Iterations: 4096}, {Mechanism: sasl.ScramSHA512, Iterations: 4096}},
	}}
	s, _ := secAdminServer(t, fa, nil)
	describe := func(users ...string) []string {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			n.Name = u
			req.Users = append(req.Users, n)
		}
		resp := s.describeUserSCRAMCredentials(adminClient, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("top-level error %d", resp.ErrorCode)
		}
		var out []string
		for _, r := range resp.Results {
			var infos []string
			for _, i := range r.CredentialInfos {
				infos = append(infos, fmt.Sprintf("%d/%d", i.Mechanism, i.Iterations))
			}
			out = append(out, fmt.Sprintf("%s=%d[%s]", r.User, r.ErrorCode, strings.Join(infos, ",")))
		}
		return out
	}
	if got, want := describe(), []string{"alice=0[1/4096,2/4096]", "bob=0[2/8192]"}; !slices.Equal(got, want) {
		t.Errorf("all users = %v, want %v", got, want)
	}
	if fa.names != nil {
		t.Errorf("listing all asked for %v", fa.names)
	}
	got := describe("bob", "nobody", "alice", "bob", "bob")
	want := []string{"bob=92[]", "nobody=91[]", "alice=0[1/4096,2/4096]"}
	if !slices.Equal(got, want) {
		t.Errorf("named users = %v, want %v", got, want)
	}
}

func TestSecAdminAlterUserSCRAMCredentials(t *testing.T) {
	salt, salted := []byte("pepper-salt"), []byte("salted-password-bytes-32-long!!!")
	fa := &secAdminFake{}
	s, logs := secAdminServer(t, fa, nil)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name string
		mech int8
	}{{"alice", 1}, {"bob", 2}, {"carol", 3}, {"dave", 1}, {"bob", 1}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, 8192, salt, salted
		req.Upsertions = append(req.Upsertions, up)
	}
	for _, u := range []string{"erin", "frank"} {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = u, 2
		req.Deletions = append(req.Deletions, d)
	}
	fa.alterErrs = []error{
		nil, // alice
		fmt.Errorf("%w", ErrAdminDuplicate),
		fmt.Errorf("%w: mechanism", ErrUnsupportedMechanism),
		fmt.Errorf("%w: too few iterations", ErrUnacceptableCredential),
		fmt.Errorf("%w", ErrAdminDuplicate),
		fmt.Errorf("%w: no such credential", ErrAdminNotFound), // erin
		nil, // frank
	}
	resp := s.alterUserSCRAMCredentials(context.Background(), adminClient, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	var got []string
	for _, r := range resp.Results {
		got = append(got, fmt.Sprintf("%s=%d", r.User, r.ErrorCode))
	}
	want := []string{"erin=91", "frank=0", "alice=0", "bob=92", "carol=33", "dave=93"}
	if !slices.Equal(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}
	wantUps := []UserUpsert{
		{User: "alice", Mechanism: sasl.ScramSHA256, Iterations: 8192, Salt: salt, SaltedPassword: salted},
		{User: "bob", Mechanism: sasl.ScramSHA512, Iterations: 8192, Salt: salt, SaltedPassword: salted},
		{User: "carol", Mechanism: "", Iterations: 8192, Salt: salt, SaltedPassword: salted},
	}
	for i, w := range wantUps {
		u := fa.upserts[i]
		if u.User != w.User || u.Mechanism != w.Mechanism || u.Iterations != w.Iterations ||
			!bytes.Equal(u.Salt, w.Salt) || !bytes.Equal(u.SaltedPassword, w.SaltedPassword) {
			t.Errorf("upsert %d = %+v, want %+v", i, u, w)
		}
	}
	if !slices.Equal(fa.dels, []UserDeletion{{User: "erin", Mechanism: sasl.ScramSHA512}, {User: "frank", Mechanism: sasl.ScramSHA512}}) {
		t.Errorf("deletions = %+v", fa.dels)
	}
	out := logs.String()
	if strings.Count(out, `"msg":"SCRAM credential set"`) != 1 || !strings.Contains(out, `"user":"alice"`) ||
		strings.Count(out, `"msg":"SCRAM credential deleted"`) != 1 || !strings.Contains(out, `"user":"frank"`) ||
		!strings.Contains(out, `"by":"User:admin"`) {
		t.Errorf("change log lines:\n%s", out)
	}
	for _, secret := range [][]byte{salt, salted} {
		for _, enc := range []string{string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret)} {
			if strings.Contains(out, enc) {
				t.Errorf("the log holds a salt or salted password: %s", out)
			}
		}
	}
}

// Without an authorizer the three ACL APIs answer SECURITY_DISABLED, as in
// Kafka: ACLs are managed only where they are enforced. (cohort stored them
// from any client of an open node; turning the authorizer on later would
// have honoured them.) The SCRAM APIs still work, as in Kafka.
func TestACLAdminWithoutAuthorizerIsSecurityDisabled(t *testing.T) {
	fa := &secAdminFake{}
	s, _ := secAdminServer(t, fa, nil)
	d, cr, del, ds, _ := secAdminRequests()
	c := Client{Principal: Anonymous, Host: "127.0.0.1"}
	got := []int16{s.describeACLs(c, d).(*kmsg.DescribeACLsResponse).ErrorCode,
		s.createACLs(context.Background(), c, cr).(*kmsg.CreateACLsResponse).Results[0].ErrorCode,
		s.deleteACLs(context.Background(), c, del).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode}
	for i, code := range got {
		if code != kerr.SecurityDisabled.Code {
			t.Errorf("ACL API %d (describe, create, delete) without an authorizer: error %d, want SECURITY_DISABLED", i, code)
		}
	}
	if len(fa.bindings) != 0 || len(fa.filters) != 0 {
		t.Errorf("the admin was given %d bindings and %d filters without an authorizer", len(fa.bindings), len(fa.filters))
	}
	if code := s.describeUserSCRAMCredentials(c, ds).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; code != 0 {
		t.Errorf("DescribeUserScramCredentials without an authorizer: %d, want 0", code)
	}
}

// Without an authorizer a client that authenticated no one may not change
// SCRAM credentials (Kafka lets it): on an open node anyone could otherwise
// set the password of a user the operator later makes a super user, and
// --bootstrap-user would keep it. An authenticated client may, and anyone
// may still describe them.
func TestAnonymousMayNotChangeCredentialsWithoutAuthorizer(t *testing.T) {
	fa := &secAdminFake{}
	s, _ := secAdminServer(t, fa, nil)
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "admin", 2, 8192, []byte("salt"), []byte("salted-password-bytes-32-long!!!")
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "ops", 2
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions, req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up}, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del}

	anon := Client{Principal: Anonymous, Host: "192.0.2.7"}
	resp := s.alterUserSCRAMCredentials(context.Background(), anon, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 {
		t.Fatalf("%d results, want 2", len(resp.Results))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "--bootstrap-user") {
			t.Errorf("%s: error %d %v, want CLUSTER_AUTHORIZATION_FAILED saying why", r.User, r.ErrorCode, r.ErrorMessage)
		}
	}
	if len(fa.upserts)+len(fa.dels) != 0 {
		t.Fatalf("an anonymous client changed credentials: %d upserts, %d deletions", len(fa.upserts), len(fa.dels))
	}
	_, _, _, ds, _ := secAdminRequests()
	if code := s.describeUserSCRAMCredentials(anon, ds).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode; code != 0 {
		t.Errorf("anonymous DescribeUserScramCredentials: %d, want 0", code)
	}

	fa.alterErrs = []error{nil, nil}
	alice := Client{Principal: "User:alice", Host: "192.0.2.7"}
	resp = s.alterUserSCRAMCredentials(context.Background(), alice, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Errorf("authenticated %s: error %d, want 0", r.User, r.ErrorCode)
		}
	}
	if len(fa.upserts) != 1 || len(fa.dels) != 1 {
		t.Errorf("authenticated change: %d upserts, %d deletions, want 1 and 1", len(fa.upserts), len(fa.dels))
	}
}
