package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestSafeWriter: control characters other than newline and tab are
// printed as escapes; other bytes, UTF-8 included, pass unchanged.
func TestSafeWriter(t *testing.T) {
	for in, want := range map[string]string{
		"plain\tcolumns\n":           "plain\tcolumns\n",
		"grüße, 組":                   "grüße, 組",
		"\x1b]0;pwned\x07\x1b[2J":    `\x1b]0;pwned\x07\x1b[2J`,
		"cr\rdel\x7fnul\x00":         `cr\x0ddel\u007fnul\x00`,
		"c1 \u009b31m and \u0085end": `c1 \u009b31m and \u0085end`,
	} {
		var b bytes.Buffer
		if n, err := (safeWriter{&b}).Write([]byte(in)); err != nil || n != len(in) {
			t.Errorf("%q: wrote %d, %v", in, n, err)
		}
		if b.String() != want {
			t.Errorf("%q printed as %q, want %q", in, b.String(), want)
		}
	}
	if got := cell("ok-id"); got != "ok-id" {
		t.Errorf("cell of a plain id: %q", got)
	}
	if got := cell("evil\nfake-group\tStable"); got != `"evil\nfake-group\tStable"` {
		t.Errorf("cell of an id with a newline and a tab: %q", got)
	}
}

// TestGroupIDsCannotForgeOutput: a group id holding a terminal escape
// sequence, a newline and tabs (any client may commit under one: Kafka
// restricts no character) is printed quoted by `cohort groups`, on one
// row, with no escape byte reaching the terminal.
func TestGroupIDsCannotForgeOutput(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	const evil = "\x1b]0;pwned\x07\x1b[2Jevil\nfake-group\tStable\tclassic\tconsumer"
	commit(t, n.Addr(), evil, "events", map[int32]int64{0: 1})
	out := c.ok("groups")
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("an escape byte reached the output:\n%q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], `"\x1b]0;pwned\a\x1b[2Jevil\nfake-group\tStable\tclassic\tconsumer"`) {
		t.Errorf("output:\n%s", out)
	}
}

// TestIDsCannotForgeLines: outside tables too, a newline or tab in a group
// id, or in a name the user typed, stays inside its line: free-text lines
// (total lag, committed offsets, the history's "no recorded rebalance")
// quote such an id, and an error is printed as one line with the newline
// spelled \n. Before, only the tables were safe: `cohort offsets` printed
// "total lag of evil" and then a line "fake-group: ..." of the id's own.
func TestIDsCannotForgeLines(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	const evil = "evil\nfake-group\tforged"
	commit(t, n.Addr(), evil, "events", map[int32]int64{0: 1})
	forged := func(what, out string) {
		t.Helper()
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, "fake-group") || strings.HasPrefix(line, "forged") {
				t.Errorf("%s: the id made a line of its own:\n%s", what, out)
				return
			}
		}
	}
	forged("offsets", c.ok("offsets", evil))
	// A member's client id is the client's to choose too: a consumer
	// named "evil\nFAKE-ROW\tx" made describe and offsets print a row
	// of its own.
	stop := consumer(t, n.Addr(), "g1", "events", "evil\nforged\tx", "")
	defer stop()
	forged("group describe", c.ok("group", "describe", "g1"))
	forged("offsets of a group with members", c.ok("offsets", "g1"))
	forged("offsets reset", c.ok("offsets", "reset", evil, "--topic", "events:0", "--to-offset", "0", "--execute"))
	out, errOut, code := c.run("group", "why", evil)
	forged("group why", out+errOut)
	if code != 0 && code != 1 {
		t.Errorf("group why: exit %d", code)
	}
	// Errors joined together: one line each, each with its prefix.
	var b strings.Builder
	exitCode(errors.Join(errors.New("reset g: topic a: no\nforged"), errors.Join(errors.New("reset g: topic b"))), &b)
	if b.String() != "cohort: reset g: topic a: no\\nforged\ncohort: reset g: topic b\n" {
		t.Errorf("joined errors printed as %q", b.String())
	}
	// Errors: one line, whatever the id or name holds.
	for _, args := range [][]string{
		{"group", "describe", "nope\nfake-group"},
		{"topic", "delete", "no\nforged"},
		{"group", "delete", "nope\tforged"},
	} {
		_, errOut, code := c.run(args...)
		if code != 1 {
			t.Errorf("%q: exit %d, want 1", args, code)
		}
		if strings.Count(strings.TrimSuffix(errOut, "\n"), "\n") != 0 || !strings.HasPrefix(errOut, "cohort: ") {
			t.Errorf("%q: the error is not one line:\n%s", args, errOut)
		}
		forged(strings.Join(args, " "), errOut)
	}
}

// TestDescribeCellsCannotForgeRows: every cell of the describe and offsets
// tables that a client chooses (leader and member ids, instance and client
// ids, hosts, racks, protocol names, subscribed topics and regex, topic
// names in assignments, commit metadata) is printed quoted when it holds a
// newline or a tab, so each table keeps one row per member or partition.
func TestDescribeCellsCannotForgeRows(t *testing.T) {
	const evil = "e\nforged\tx"
	tps := []topicPartitions{{Topic: evil, Partitions: []int32{0}}}
	m := memberDesc{MemberID: evil, InstanceID: ptr(evil), ClientID: evil, Host: evil, Assignment: tps,
		Rack: ptr(evil), MemberEpoch: ptr(int32(1)), SubscribedTopics: []string{evil}, SubscribedTopicRegex: ptr(evil),
		Revoking: tps, Target: tps}
	row := offsetRow{Topic: evil, CurrentOffset: ptr(int64(1)), Metadata: evil, MemberID: ptr(evil), ClientID: evil, Host: evil}
	descs := []*groupDesc{
		{Group: "c", Type: "classic", State: "Stable", ProtocolType: evil, Protocol: evil, Leader: ptr(evil),
			Generation: ptr(int32(1)), MemberCount: 1, Members: []memberDesc{m}, Offsets: []offsetRow{row}},
		{Group: "k", Type: "consumer", State: "Stable", Assignor: ptr(evil), MemberCount: 1,
			Members: []memberDesc{m}, Offsets: []offsetRow{row}},
	}
	var b bytes.Buffer
	all := describeFlags{members: true, offsets: true, state: true, verbose: true}
	if err := writeDescribe(&b, descs, all, true); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "forged") {
			t.Fatalf("a client-chosen value made a row of its own:\n%s", b.String())
		}
	}
	// Four tables and two offset rows: 2 + 2 + 2 + 2 + 3 lines, blank
	// lines between tables, and the two total-lag lines.
	if n := strings.Count(b.String(), "\n"); n != 2+2+2+2+3+4+2 {
		t.Errorf("%d lines:\n%s", n, b.String())
	}
}

// TestJSONOutputKeepsControlCharacters: --output json stays valid JSON
// that decodes to the ids as the server holds them, whatever control
// characters a client put in them. encoding/json writes DEL (and C1
// characters) raw inside strings; the CLI's output filter spelled DEL
// \x7f, which is no JSON escape, so a script reading `cohort groups
// --output json` failed on the whole document because of one group id.
func TestJSONOutputKeepsControlCharacters(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	ids := []string{"del\x7fgroup", "c1\u009b31m-group", "esc\x1b[2J-group", "bidi\u202egroup"}
	for _, id := range ids {
		commit(t, n.Addr(), id, "events", map[int32]int64{0: 1})
	}
	got := map[string]bool{}
	for _, g := range c.listGroups() {
		got[g.Group] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("group %q missing from the JSON list; got %v", id, got)
		}
	}
}

// TestBidiAndNonUTF8CannotReorderOutput: a bidirectional control in an id
// (U+202E shows the rest of its line backwards wherever the line is laid
// out for bidirectional text) and a byte that is not UTF-8 (0x9b alone is
// CSI to a terminal reading Latin-1) reach no output raw: table cells
// holding them are quoted, and sentences spell them as escapes.
func TestBidiAndNonUTF8CannotReorderOutput(t *testing.T) {
	for in, want := range map[string]string{
		"rlo\u202eevil \u2066x\u2069": `rlo\u202eevil \u2066x\u2069`,
		"lone \x9b31m c1":             `lone \x9b31m c1`,
		"grüße, 組 \xe2\x80":           "grüße, 組 \xe2\x80", // a character the next Write ends
	} {
		var b bytes.Buffer
		if n, err := (safeWriter{&b}).Write([]byte(in)); err != nil || n != len(in) {
			t.Errorf("%q: wrote %d, %v", in, n, err)
		}
		if b.String() != want {
			t.Errorf("%q printed as %q, want %q", in, b.String(), want)
		}
	}
	for in, want := range map[string]string{
		"bidi\u202eevil": `"bidi\u202eevil"`,
		"lone\x9b":       `"lone\x9b"`,
		"nb\u00a0space":  `"nb\u00a0space"`,
		"grüße 組 🙂":      "grüße 組 🙂",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}

	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	c.ok("topic", "create", "events", "--partitions", "1")
	const evil = "payments\u202e0 gal latot"
	commit(t, n.Addr(), evil, "events", map[int32]int64{0: 1})
	for _, args := range [][]string{{"groups"}, {"offsets", evil}, {"group", "describe", evil}} {
		out := c.ok(args...)
		if strings.Contains(out, "\u202e") {
			t.Errorf("%q: U+202E reached the output:\n%s", args, out)
		}
		if !strings.Contains(out, `payments\u202e0 gal latot`) {
			t.Errorf("%q: the id is not spelled with its escape:\n%s", args, out)
		}
	}
}
