package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func parseACLFlags(t *testing.T, action string, args ...string) (aclSpec, error) {
	t.Helper()
	fs := flag.NewFlagSet("acl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var af aclFlags
	af.register(fs)
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
