package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/clock"
)

// terminalInput is standard input that says it is a terminal, with the
// answer a person would type.
type terminalInput struct{ io.Reader }

func (terminalInput) terminal() bool { return true }

// runInput runs cohort with args and base, with stdin as standard input.
func runInput(stdin io.Reader, base []string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(append(args, base...), env{stdin: stdin, stdout: &out, stderr: &errOut, clock: clock.Real{}})
	return out.String(), errOut.String(), code
}

// TestDeleteDryRunAndConfirm: acl, topic, group and user delete show what
// they would delete with --dry-run and delete nothing; on a terminal they
// show it and ask, deleting only on "y"; --yes, or an input that is not a
// terminal (scripts), deletes without asking.
func TestDeleteDryRunAndConfirm(t *testing.T) {
	_, adminFlags := startSASLNode(t)
	admin := cli{t: t, base: adminFlags}
	tty := func(answer string) io.Reader { return terminalInput{strings.NewReader(answer)} }
	const header = "RESOURCE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION"

	// ACLs: --pattern match on topic events matches the literal, the
	// prefixed and the wildcard ACLs, not the group's.
	for _, a := range [][]string{{"--principal", "User:a", "--topic", "events"}, {"--principal", "User:b", "--topic", "ev", "--prefixed"},
		{"--principal", "User:c", "--topic", "*"}, {"--principal", "User:d", "--group", "g"}} {
		admin.ok(append([]string{"acl", "add", "--operation", "read", "--permission", "allow"}, a...)...)
	}
	all := table(admin.ok("acl", "list"))
	const matched = header + "\nTOPIC * LITERAL User:c * READ ALLOW\nTOPIC ev PREFIXED User:b * READ ALLOW\nTOPIC events LITERAL User:a * READ ALLOW"
	del := []string{"acl", "delete", "--topic", "events", "--pattern", "match"}
	if out := table(admin.ok(append(del, "--dry-run")...)); out != "TO DELETE\n"+matched+"\ndry run: nothing deleted; run again without --dry-run to delete" {
		t.Fatalf("acl delete --dry-run:\n%s", out)
	}
	out, errOut, code := runInput(tty("n\n"), adminFlags, del...)
	if code != 1 || out != "" || !strings.Contains(table(errOut), "TO DELETE\n"+matched+"\ndelete these ACLs? [y/N] cohort: acl delete: not confirmed: nothing deleted") {
		t.Fatalf("acl delete answered n: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if now := table(admin.ok("acl", "list")); now != all {
		t.Fatalf("acl list after a dry run and a refusal:\n%s\nwant\n%s", now, all)
	}
	admin.fails(2, append(del, "--dry-run", "--yes"), "acl delete: --dry-run and --yes exclude each other")
	out, errOut, code = runInput(tty("y\n"), adminFlags, del...)
	if code != 0 || table(out) != "DELETED\n"+matched {
		t.Fatalf("acl delete answered y: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if now := table(admin.ok("acl", "list")); now != header+"\nGROUP g LITERAL User:d * READ ALLOW" {
		t.Fatalf("acl list after the delete:\n%s", now)
	}

	// Topics: the preview names the groups whose offsets go with it.
	admin.ok("topic", "create", "events", "--partitions", "3")
	admin.ok("offsets", "reset", "og", "--topic", "events", "--to-offset", "5", "--execute")
	if out := admin.ok("topic", "delete", "events", "--dry-run"); out != "to delete: topic events (3 partitions); with it the committed offsets of 1 group: og\n"+
		"dry run: nothing deleted; run again without --dry-run to delete\n" {
		t.Fatalf("topic delete --dry-run:\n%s", out)
	}
	var preview topicDeletePreview
	admin.jsonOf(&preview, "topic", "delete", "events", "--dry-run")
	if preview.Topic != "events" || preview.Partitions != 3 || strings.Join(preview.Groups, ",") != "og" || preview.Deleted {
		t.Fatalf("topic delete --dry-run --output json: %+v", preview)
	}
	if _, errOut, code = runInput(tty("\n"), adminFlags, "topic", "delete", "events"); code != 1 || !strings.Contains(errOut, "delete topic events? [y/N]") {
		t.Fatalf("topic delete answered nothing: exit %d\n%s", code, errOut)
	}
	admin.fails(1, []string{"topic", "delete", "nope", "--dry-run"}, "delete nope: UNKNOWN_TOPIC_OR_PARTITION")
	if out := table(admin.ok("topics")); out != "TOPIC PARTITIONS\nevents 3" {
		t.Fatalf("topics after a dry run and a refusal:\n%s", out)
	}
	if out, errOut, code = runInput(tty("yes\n"), adminFlags, "topic", "delete", "events"); code != 0 || out != "deleted events\n" {
		t.Fatalf("topic delete answered yes: exit %d\n%s%s", code, out, errOut)
	}

	// Groups: which can be deleted, and why the others cannot.
	admin.ok("topic", "create", "work")
	admin.ok("offsets", "reset", "idle", "--topic", "work", "--to-offset", "1", "--execute")
	out = admin.fails(1, []string{"group", "delete", "idle", "nope", "--dry-run"}, "cohort: delete nope: GROUP_ID_NOT_FOUND")
	if table(out) != "GROUP STATE MEMBERS OFFSETS TO DELETE\nidle Empty 0 1 yes\nnope - - 0 no: GROUP_ID_NOT_FOUND: group nope not found\n"+
		"dry run: nothing deleted; run again without --dry-run to delete" {
		t.Fatalf("group delete --dry-run:\n%s", out)
	}
	if out := table(admin.ok("offsets", "idle")); !strings.Contains(out, "idle work 0 1") {
		t.Fatalf("offsets of idle after a dry run:\n%s", out)
	}
	if out := admin.ok("group", "delete", "idle", "--yes"); table(out) != "GROUP RESULT\nidle deleted" {
		t.Fatalf("group delete --yes:\n%s", out)
	}

	// Users.
	if _, errOut, code := runInput(strings.NewReader("carol-pw"), adminFlags, "user", "set", "carol"); code != 0 {
		t.Fatal(errOut)
	}
	if out := table(admin.ok("user", "delete", "carol", "--dry-run")); out != "USER MECHANISM ITERATIONS TO DELETE\ncarol SCRAM-SHA-256 8192 yes\n"+
		"carol SCRAM-SHA-512 8192 yes\ndry run: nothing deleted; run again without --dry-run to delete" {
		t.Fatalf("user delete --dry-run:\n%s", out)
	}
	admin.fails(1, []string{"user", "delete", "nobody", "--dry-run"}, "user delete: nobody has no SCRAM credentials")
	if _, errOut, code = runInput(tty("n\n"), adminFlags, "user", "delete", "carol", "--mechanism", "SCRAM-SHA-512"); code != 1 ||
		!strings.Contains(table(errOut), "carol SCRAM-SHA-512 8192 yes\ndelete carol's credentials? [y/N] cohort: user delete: not confirmed") {
		t.Fatalf("user delete answered n: exit %d\n%s", code, errOut)
	}
	if out := table(admin.ok("users", "carol")); out != "USER MECHANISM ITERATIONS\ncarol SCRAM-SHA-256 8192\ncarol SCRAM-SHA-512 8192" {
		t.Fatalf("users carol after a dry run and a refusal:\n%s", out)
	}
	if out := table(admin.ok("user", "delete", "carol")); out != "USER MECHANISM RESULT\ncarol SCRAM-SHA-256 deleted\ncarol SCRAM-SHA-512 deleted" {
		t.Fatalf("user delete without a terminal:\n%s", out)
	}
}

// TestScriptFacingErrors: errors name what failed ("users: ..."); group
// describe --output json has an entry with the error of each group it
// could not describe; users named that have no credential are errors;
// offsets reset without a mode says what is missing.
func TestScriptFacingErrors(t *testing.T) {
	addr, adminFlags := startSASLNode(t)
	admin := cli{t: t, base: adminFlags}
	if _, errOut, code := runInput(strings.NewReader("bob-pw"), adminFlags, "user", "set", "bob"); code != 0 {
		t.Fatal(errOut)
	}
	bob := cli{t: t, base: saslFlags(t, addr, "bob", "bob-pw")}
	if out := bob.fails(1, []string{"users"}, "cohort: users: CLUSTER_AUTHORIZATION_FAILED"); out != "" {
		t.Fatalf("users refused printed %q", out)
	}
	out := admin.fails(1, []string{"users", "bob", "nobody"}, "cohort: users: nobody has no SCRAM credentials")
	if table(out) != "USER MECHANISM ITERATIONS\nbob SCRAM-SHA-256 8192\nbob SCRAM-SHA-512 8192" {
		t.Fatalf("users bob nobody:\n%s", out)
	}

	admin.ok("offsets", "reset", "idle", "--topic", "events", "--to-offset", "1", "--execute", "--data-bootstrap", startData(t, 1, "events").addr)
	out = admin.fails(1, []string{"group", "describe", "nope", "idle", "--output", "json"}, "cohort: describe nope: GROUP_ID_NOT_FOUND: group nope not found")
	var doc struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := decodeStrict(out, &doc); err != nil || len(doc.Groups) != 2 {
		t.Fatalf("group describe --output json: %v\n%s", err, out)
	}
	nope, idle := doc.Groups[0], doc.Groups[1]
	if nope["group"] != "nope" || nope["error"] != "GROUP_ID_NOT_FOUND: group nope not found" || nope["state"] != nil || nope["members"] != nil ||
		len(nope) != len(idle) {
		t.Fatalf("the entry of a missing group: %v (a described one: %v)", nope, idle)
	}
	if idle["group"] != "idle" || idle["error"] != nil || idle["state"] != "Empty" {
		t.Fatalf("the entry of a described group: %v", idle)
	}

	admin.fails(2, []string{"offsets", "reset", "idle", "--all-topics"},
		"cohort: offsets reset: say what offset to reset to: give one of --to-offset N, --shift-by N, --to-earliest, --to-latest, --to-datetime T, --by-duration D or --from-file CSV")
}
