package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/tlsconfig"
)

func parseACLFlags(t *testing.T, action string, args ...string) (aclSpec, error) {
	t.Helper()
	fs := flag.NewFlagSet("acl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var af aclFlags
	af.register(fs, anyAction)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return af.parse(action)
}

func TestACLFlags(t *testing.T) {
	ops := func(o ...kmsg.ACLOperation) []kmsg.ACLOperation { return o }
	for _, tc := range []struct {
		name   string
		action string
		args   []string
		want   aclSpec
	}{
		{"add defaults to any host, literal", "add",
			[]string{"--principal", "User:alice", "--operation", "read,Describe", "--permission", "allow", "--group", "app"},
			aclSpec{principals: []string{"User:alice"}, hosts: []string{"*"}, ops: ops(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe),
				permission: kmsg.ACLPermissionTypeAllow, resource: kmsg.ACLResourceTypeGroup, name: "app", pattern: kmsg.ACLResourcePatternTypeLiteral}},
		{"add prefixed deny with hosts and two principals", "add",
			[]string{"--principal", "User:a", "--principal", "User:b", "--host", "10.0.0.1", "--host", "10.0.0.2",
				"--operation", "describe_configs", "--permission", "DENY", "--topic", "t-", "--prefixed"},
			aclSpec{principals: []string{"User:a", "User:b"}, hosts: []string{"10.0.0.1", "10.0.0.2"}, ops: ops(kmsg.ACLOperationDescribeConfigs),
				permission: kmsg.ACLPermissionTypeDeny, resource: kmsg.ACLResourceTypeTopic, name: "t-", pattern: kmsg.ACLResourcePatternTypePrefixed}},
		{"add on the cluster", "add",
			[]string{"--principal", "User:ops", "--operation", "alter", "--permission", "allow", "--cluster"},
			aclSpec{principals: []string{"User:ops"}, hosts: []string{"*"}, ops: ops(kmsg.ACLOperationAlter),
				permission: kmsg.ACLPermissionTypeAllow, resource: kmsg.ACLResourceTypeCluster, name: "kafka-cluster", pattern: kmsg.ACLResourcePatternTypeLiteral}},
		{"list everything", "list", nil,
			aclSpec{permission: kmsg.ACLPermissionTypeAny, resource: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeAny}},
		{"list a principal's ACLs on a topic, any pattern", "list",
			[]string{"--principal", "User:alice", "--topic", "events", "--pattern", "match"},
			aclSpec{principals: []string{"User:alice"}, permission: kmsg.ACLPermissionTypeAny, resource: kmsg.ACLResourceTypeTopic,
				name: "events", pattern: kmsg.ACLResourcePatternTypeMatch}},
		{"delete a group's allow ACLs", "delete",
			[]string{"--group", "g", "--permission", "allow", "--operation", "any"},
			aclSpec{ops: ops(kmsg.ACLOperationAny), permission: kmsg.ACLPermissionTypeAllow, resource: kmsg.ACLResourceTypeGroup,
				name: "g", pattern: kmsg.ACLResourcePatternTypeLiteral}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseACLFlags(t, tc.action, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestACLFlagErrors(t *testing.T) {
	add := []string{"--principal", "User:a", "--operation", "read", "--permission", "allow"}
	for _, tc := range []struct {
		action string
		args   []string
		want   string
	}{
		{"add", []string{"--operation", "read", "--permission", "allow", "--topic", "t"}, "--principal is required"},
		{"add", []string{"--principal", "User:a", "--permission", "allow", "--topic", "t"}, "--operation is required"},
		{"add", []string{"--principal", "User:a", "--operation", "read", "--topic", "t"}, "--permission allow|deny is required"},
		{"add", add, "a resource is required"},
		{"delete", nil, "a resource is required"},
		{"add", append(add, "--topic", "t", "--group", "g"), "one resource"},
		{"list", []string{"--cluster", "--topic", "t"}, "one resource"},
		{"add", []string{"--principal", "alice", "--operation", "read", "--permission", "allow", "--topic", "t"}, "want Type:name"},
		{"list", []string{"--principal", "User:"}, "want Type:name"},
		{"add", []string{"--principal", "User:a", "--operation", "read,fly", "--permission", "allow", "--topic", "t"}, `--operation "fly"`},
		{"add", []string{"--principal", "User:a", "--operation", "any", "--permission", "allow", "--topic", "t"}, "only filters"},
		{"list", []string{"--permission", "maybe"}, `--permission "maybe"`},
		{"add", append(add, "--topic", "t", "--pattern", "prefixed"), "use --prefixed"},
		{"list", []string{"--topic", "t", "--pattern", "glob"}, `--pattern "glob"`},
		{"list", []string{"--topic", "t", "--pattern", "literal", "--prefixed"}, "disagree"},
		{"add", append(add, "--cluster", "--prefixed"), "cannot be --prefixed"},
		{"list", []string{"--host", ""}, "empty host"},
	} {
		t.Run(strings.Join(append([]string{tc.action}, tc.args...), " "), func(t *testing.T) {
			_, err := parseACLFlags(t, tc.action, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// The command checks its arguments before connecting.
	for _, args := range [][]string{nil, {"show"}, {"add", "list"}, {"add", "--topic", "t"}} {
		if err := acl(discardEnv(), append(args, "--bootstrap", "127.0.0.1:1")); err == nil {
			t.Errorf("acl %q: no error", args)
		}
	}
}

// TestACLCommands adds, lists and deletes ACLs in kfake (SASL_SSL, ACLs
// on, as its super user), and checks that kfake enforces one of them.
func TestACLCommands(t *testing.T) {
	sc := startSecureKfake(t)
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := acl(env{stdout: &out, stderr: io.Discard}, append(args, sc.flags...)); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		return table(out.String())
	}
	const header = "RESOURCE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION"
	out := run("add", "--principal", "User:alice", "--operation", "read,describe", "--permission", "allow", "--group", "app-", "--prefixed")
	if want := "ADDED\n" + header + "\nGROUP app- PREFIXED User:alice * READ ALLOW\nGROUP app- PREFIXED User:alice * DESCRIBE ALLOW"; out != want {
		t.Fatalf("add:\n%s", out)
	}
	run("add", "--principal", "User:alice", "--host", "10.1.1.1", "--operation", "describe", "--permission", "deny", "--topic", "events")
	run("add", "--principal", "User:bob", "--operation", "describe", "--permission", "allow", "--topic", "events")
	run("add", "--principal", "User:ops", "--operation", "alter", "--permission", "allow", "--cluster")

	all := run("list")
	if want := header + "\n" +
		"TOPIC events LITERAL User:alice 10.1.1.1 DESCRIBE DENY\n" +
		"TOPIC events LITERAL User:bob * DESCRIBE ALLOW\n" +
		"GROUP app- PREFIXED User:alice * READ ALLOW\n" +
		"GROUP app- PREFIXED User:alice * DESCRIBE ALLOW\n" +
		"CLUSTER kafka-cluster LITERAL User:ops * ALTER ALLOW"; all != want {
		t.Fatalf("list:\n%s", all)
	}
	if out = run("list", "--principal", "User:alice", "--permission", "deny"); out != header+"\nTOPIC events LITERAL User:alice 10.1.1.1 DESCRIBE DENY" {
		t.Fatalf("list alice deny:\n%s", out)
	}
	if out = run("list", "--topic", "events", "--operation", "describe", "--permission", "allow"); out != header+"\nTOPIC events LITERAL User:bob * DESCRIBE ALLOW" {
		t.Fatalf("list events allow:\n%s", out)
	}
	// A literal filter on the name does not see the prefixed ACLs; any
	// does. (kfake's MATCH filter compares names exactly, unlike Kafka's,
	// so --pattern match is left to the tests against cohort.)
	if out = run("list", "--group", "app-"); out != header {
		t.Fatalf("literal app-:\n%s", out)
	}
	if out = run("list", "--group", "app-", "--pattern", "any"); out != header+"\nGROUP app- PREFIXED User:alice * READ ALLOW\nGROUP app- PREFIXED User:alice * DESCRIBE ALLOW" {
		t.Fatalf("any app-:\n%s", out)
	}

	// kfake enforces the ACLs: alice (a SCRAM user now) is authorized for
	// app-1's offsets (which do not exist), not for another group's.
	var quiet bytes.Buffer
	if err := users(env{stdin: strings.NewReader("alice-pw"), stdout: &quiet, stderr: io.Discard}, "user", append([]string{"set", "alice", "--iterations", "4096"}, sc.flags...)); err != nil {
		t.Fatal(err)
	}
	alice := []string{"--bootstrap", sc.addr, "--tls", "--tls-ca-file", sc.ca.CertFile, "--sasl-mechanism", "SCRAM-SHA-256",
		"--sasl-username", "alice", "--sasl-password-file", writeTemp(t, "alice", "alice-pw")}
	err := offsetsCmd(discardEnv(), append([]string{"app-1"}, alice...))
	if errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice may not describe app-1: %v", err)
	}
	err = offsetsCmd(discardEnv(), append([]string{"other"}, alice...))
	if !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice describing a group without an ACL: %v", err)
	}

	if out = run("delete", "--group", "app-", "--prefixed", "--operation", "read"); out != "DELETED\n"+header+"\nGROUP app- PREFIXED User:alice * READ ALLOW" {
		t.Fatalf("delete:\n%s", out)
	}
	if out = run("delete", "--topic", "events"); out != "DELETED\n"+header+"\nTOPIC events LITERAL User:alice 10.1.1.1 DESCRIBE DENY\nTOPIC events LITERAL User:bob * DESCRIBE ALLOW" {
		t.Fatalf("delete events:\n%s", out)
	}
	if out = run("list"); out != header+"\nGROUP app- PREFIXED User:alice * DESCRIBE ALLOW\nCLUSTER kafka-cluster LITERAL User:ops * ALTER ALLOW" {
		t.Fatalf("list after delete:\n%s", out)
	}
}

// startSASLNode starts a cohort node with one SASL_PLAINTEXT listener
// (ACLs enforced), whose super user admin the returned flags log in as.
func startSASLNode(t *testing.T) (addr string, admin []string) {
	t.Helper()
	ls, err := node.ParseListeners("SASL_PLAINTEXT://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeConfig(t, node.Config{Listeners: ls, Group: group.Defaults(), Security: &node.SecurityConfig{
		BootstrapUser: "admin", BootstrapPassword: "admin-pw", SuperUsers: []string{"User:admin"}, FailedAuthDelay: time.Millisecond}})
	addr = n.ListenerAddr("SASL_PLAINTEXT")
	return addr, saslFlags(t, addr, "admin", "admin-pw")
}

// saslFlags are the flags that log in to addr as user over SCRAM-SHA-256.
func saslFlags(t *testing.T, addr, user, pass string) []string {
	t.Helper()
	return []string{"--bootstrap", addr, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", user,
		"--sasl-password-file", writeTemp(t, user+"-pw", pass)}
}

// TestACLOutputOnlyOnSuccess: a refused acl command prints nothing on
// standard output (no ADDED or DELETED header, no empty list) and one
// "cohort: acl ACTION: CODE: text" line on standard error; a command that
// works prints its table.
func TestACLOutputOnlyOnSuccess(t *testing.T) {
	refused := func(c cli, action string, args []string, want string) {
		t.Helper()
		out, errOut, code := c.run(append([]string{"acl", action}, args...)...)
		if code != 1 || out != "" || errOut != want+"\n" {
			t.Fatalf("acl %s %q: exit %d, stdout %q, stderr %q; want exit 1, no output and %q", action, args, code, out, errOut, want)
		}
	}
	add := []string{"--principal", "User:x", "--operation", "read", "--permission", "allow", "--group", "g"}

	// Without an authorizer, cohort answers the ACL APIs SECURITY_DISABLED.
	open := cli{t: t, base: []string{"--bootstrap", startNode(t, "127.0.0.1:0").Addr()}}
	const disabled = "SECURITY_DISABLED: Security features are disabled. (the node enforces no ACLs: give it a listener that authenticates, or start it with --authorizer)"
	refused(open, "add", add, "cohort: acl add: "+disabled)
	refused(open, "add", append(add, "--principal", "User:y", "--operation", "read,write"), "cohort: acl add: "+disabled)
	refused(open, "delete", []string{"--group", "g"}, "cohort: acl delete: "+disabled)
	refused(open, "list", nil, "cohort: acl list: "+disabled)

	// With ACLs enforced: the super user's commands work, bob's are refused
	// until an ACL lets him describe the cluster from his IP address.
	addr, adminFlags := startSASLNode(t)
	admin := cli{t: t, base: adminFlags}
	bob := cli{t: t, base: saslFlags(t, addr, "bob", "bob-pw")}
	const header = "RESOURCE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION"
	if out := table(admin.ok(append([]string{"acl", "add"}, add...)...)); out != "ADDED\n"+header+"\nGROUP g LITERAL User:x * READ ALLOW" {
		t.Fatalf("acl add:\n%s", out)
	}
	var quiet bytes.Buffer
	if err := users(env{stdin: strings.NewReader("bob-pw"), stdout: &quiet, stderr: io.Discard}, "user", append([]string{"set", "bob"}, adminFlags...)); err != nil {
		t.Fatal(err)
	}
	const unauthorized = "CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed."
	refused(bob, "list", nil, "cohort: acl list: "+unauthorized)
	refused(bob, "add", add, "cohort: acl add: "+unauthorized)
	refused(bob, "delete", []string{"--group", "g"}, "cohort: acl delete: "+unauthorized)

	// An ACL on bob's IP address applies to him.
	admin.ok("acl", "add", "--principal", "User:bob", "--host", "127.0.0.1", "--operation", "describe", "--permission", "allow", "--cluster")
	if out := table(bob.ok("acl", "list")); out != header+"\nGROUP g LITERAL User:x * READ ALLOW\nCLUSTER kafka-cluster LITERAL User:bob 127.0.0.1 DESCRIBE ALLOW" {
		t.Fatalf("bob's acl list:\n%s", out)
	}
	if out := table(admin.ok("acl", "delete", "--group", "g")); out != "DELETED\n"+header+"\nGROUP g LITERAL User:x * READ ALLOW" {
		t.Fatalf("acl delete:\n%s", out)
	}
	// A list that matches nothing is an empty table, not an error.
	if out := table(admin.ok("acl", "list", "--group", "g")); out != header {
		t.Fatalf("acl list of nothing:\n%s", out)
	}
}

// TestACLHostIsAnAddress: --host must be * or an IP address, for add and
// for the filters of list and delete, since the server matches ACL hosts
// against the client's address; the check comes before connecting.
func TestACLHostIsAnAddress(t *testing.T) {
	c := cli{t: t, base: []string{"--bootstrap", closedAddr(t)}}
	add := []string{"acl", "add", "--principal", "User:x", "--operation", "read", "--permission", "allow", "--group", "g"}
	for _, args := range [][]string{
		append(add, "--host", "localhost"),
		append(add, "--host", "10.0.0.1", "--host", "db.example.com"),
		append(add, "--host", "10.0.0.256"),
		{"acl", "list", "--host", "localhost"},
		{"acl", "delete", "--group", "g", "--host", "localhost"},
	} {
		if out := c.fails(2, args, "want * or an IPv4 or IPv6 address", "matched against the client's IP address"); out != "" {
			t.Fatalf("%q printed %q", args, out)
		}
	}
	for _, h := range []string{"*", "127.0.0.1", "::1", "fe80::1", "0:0:0:0:0:0:0:1"} {
		if _, err := parseACLFlags(t, "add", "--principal", "User:x", "--operation", "read", "--permission", "allow", "--group", "g", "--host", h); err != nil {
			t.Errorf("--host %s: %v", h, err)
		}
	}
}

// TestACLErrors: one line when every ACL or filter failed alike, else one
// per failure naming what failed; a server message that only repeats the
// code's name is dropped.
func TestACLErrors(t *testing.T) {
	denied := withMessage(kerr.ClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED")
	a := aclFailure{"User:a from * ALLOW READ on LITERAL GROUP g", denied}
	b := aclFailure{"User:b from * ALLOW READ on LITERAL GROUP g", withMessage(kerr.InvalidRequest, "bad host")}
	for _, tc := range []struct {
		fails   []aclFailure
		results int
		want    string
	}{
		{nil, 2, ""},
		{[]aclFailure{a, a}, 2, "acl add: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed."},
		{[]aclFailure{b}, 2, "acl add User:b from * ALLOW READ on LITERAL GROUP g: INVALID_REQUEST: bad host"},
		{[]aclFailure{a, b}, 2, "acl add User:a from * ALLOW READ on LITERAL GROUP g: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed.\n" +
			"acl add User:b from * ALLOW READ on LITERAL GROUP g: INVALID_REQUEST: bad host"},
	} {
		err := aclErrors("acl add", tc.fails, tc.results)
		if got := fmt.Sprint(err); err == nil && tc.want != "" || err != nil && got != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
		if err != nil && errors.Is(tc.fails[0].err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("%v does not match its code", err)
		}
	}
}

// TestUnsupportedMechanismNamesEnabledOnes: a SASL mechanism the node does
// not enable is refused with the list of those it does (its SaslHandshake
// answer carries them; the client library's error does not).
func TestUnsupportedMechanismNamesEnabledOnes(t *testing.T) {
	addr, _ := startSASLNode(t)
	c := cli{t: t, base: []string{"--bootstrap", addr, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin",
		"--sasl-password-file", writeTemp(t, "pw", "admin-pw")}}
	c.fails(1, []string{"groups"}, "UNSUPPORTED_SASL_MECHANISM", "(the node enables SCRAM-SHA-256, SCRAM-SHA-512)")

	// Over TLS (SASL_SSL) too.
	ca := testpki.NewCA(t, "mech-ca")
	pair := ca.Server(t, "node")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := node.ParseListeners("SASL_SSL://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeConfig(t, node.Config{Listeners: ls, Group: group.Defaults(), Security: &node.SecurityConfig{TLS: srvTLS,
		Mechanisms: []string{"SCRAM-SHA-512"}, BootstrapUser: "admin", BootstrapPassword: "admin-pw", FailedAuthDelay: time.Millisecond}})
	c = cli{t: t, base: []string{"--bootstrap", n.ListenerAddr("SASL_SSL"), "--tls", "--tls-ca-file", ca.CertFile,
		"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "admin", "--sasl-password-file", writeTemp(t, "pw2", "admin-pw")}}
	c.fails(1, []string{"groups"}, "UNSUPPORTED_SASL_MECHANISM", "(the node enables SCRAM-SHA-512)")
}
