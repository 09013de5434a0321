package main

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestArgumentLongerThanAKafkaString: a name or id argument of more bytes
// than a Kafka string holds (32,767) is a usage error that gives its length
// and the limit, not the id, before anything is sent. It was sent on; the
// node refused the request and closed the connection, and the command
// failed asking whether SASL was missing.
func TestArgumentLongerThanAKafkaString(t *testing.T) {
	c := cli{t: t, base: []string{"--bootstrap", startNode(t, "127.0.0.1:0").Addr(), "--timeout", "5s"}}
	long := strings.Repeat("x", 32768)
	for _, args := range [][]string{{"group", "describe", long}, {"offsets", long}, {"group", "history", long}} {
		_, errOut, code := c.run(args...)
		if code != 2 || !strings.Contains(errOut, "32768 bytes") || !strings.Contains(errOut, "32767") || strings.Contains(errOut, long[:100]) {
			t.Errorf("%s %s …: exit %d, stderr %.300q; want 2 and the length, not the id", args[0], args[1], code, errOut)
		}
	}
}

// countingListener is a listener on 127.0.0.1 that counts the connections
// made to it (and closes them), to show that a command sent nothing.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

// short names a command line with its long arguments given by length.
func short(args []string) string {
	var b strings.Builder
	for _, a := range args {
		if len(a) > 40 {
			a = a[:10] + "…(" + strconv.Itoa(len(a)) + " bytes)"
		}
		b.WriteString(" " + a)
	}
	return b.String()
}

// usageCase is a command line and a piece of its usage error.
type usageCase struct {
	args []string
	msg  string
}

// wantRefused runs each case (with --bootstrap addr, for the commands that
// take it) and wants exit 2, the message, and not the long argument back.
func wantRefused(t *testing.T, addr string, cases []usageCase) {
	t.Helper()
	c := cli{t: t}
	for _, tc := range cases {
		args := tc.args
		if !slices.Contains([]string{"version", "store"}, args[0]) {
			args = append(args, "--bootstrap", addr)
		}
		_, errOut, code := c.run(args...)
		if code != 2 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 2 and %q", short(tc.args), code, errOut, tc.msg)
		}
		if len(errOut) > 1000 {
			t.Errorf("%s: a %d-byte message repeats the argument", short(tc.args), len(errOut))
		}
	}
}

// TestOverlongFlagRefused: a name, id or value given by flag that a Kafka
// string cannot hold is refused as a usage error naming the flag, before
// any connection, and is not repeated in the message; one that fits is
// let through.
func TestOverlongFlagRefused(t *testing.T) {
	addr, accepted := countingListener(t)
	c := cli{t: t}
	long := strings.Repeat("x", maxKafkaString+1)
	wantRefused(t, addr, []usageCase{
		{[]string{"acl", "add", "--principal", "User:" + long, "--operation", "read", "--permission", "allow", "--topic", "t"},
			"--principal holds a string of 32773 bytes"},
		{[]string{"acl", "add", "--principal", "User:a", "--operation", "read", "--permission", "allow", "--topic", long},
			"--topic holds a string of 32768 bytes"},
		{[]string{"acl", "list", "--group", long}, "--group holds a string of 32768 bytes"},
		{[]string{"acl", "delete", "--topic", "t", "--host", long}, "--host holds a string of 32768 bytes"},
		{[]string{"group", "config", "g", "--set", long + "=1"}, "--set holds a string of 32768 bytes"},
		{[]string{"group", "config", "g", "--set", "a=" + long}, "--set holds a string of 32768 bytes"},
		{[]string{"group", "config", "g", "--delete", long}, "--delete holds a string of 32768 bytes"},
		{[]string{"offsets", "reset", "g", "--topic", long + ":0", "--to-offset", "1"}, "--topic holds a string of 32768 bytes"},
		{[]string{"offsets", "delete", "g", "--topic", long}, "--topic holds a string of 32768 bytes"},
		// Given before the action: the family's first pass refuses it.
		{[]string{"offsets", "--topic", long, "delete", "g"}, "--topic holds a string of 32768 bytes"},
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for refused command lines", n)
	}
	// At the limit: parsed and sent (the listener hangs up, so the
	// command fails later, with exit 1, after connecting).
	fits := strings.Repeat("x", maxKafkaString)
	for _, args := range [][]string{
		{"offsets", "delete", "g", "--topic", fits + ":0"},
		{"group", "config", "g", "--set", fits + "=" + fits},
		{"acl", "list", "--principal", "User:" + fits[5:]},
	} {
		_, errOut, code := c.run(append(args, "--bootstrap", addr, "--timeout", "300ms")...)
		if code != 1 || strings.Contains(errOut, "Kafka strings") {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 1 from the connection", short(args), code, errOut)
		}
	}
	if accepted.Load() == 0 {
		t.Error("values that fit were not sent")
	}
}

// TestStrayOverlongArgument: an over-long argument to a command that takes
// none is refused as an argument it does not take; to a command that takes
// names, for its length.
func TestStrayOverlongArgument(t *testing.T) {
	addr, accepted := countingListener(t)
	c := cli{t: t}
	long := strings.Repeat("x", maxKafkaString+1)
	wantRefused(t, addr, []usageCase{
		{[]string{"version", long}, "version: unexpected argument of 32768 bytes: cohort version takes no arguments"},
		{[]string{"topics", long}, "topics: unexpected argument of 32768 bytes: cohort topics takes no arguments"},
		{[]string{"groups", "--state", "Empty", long}, "cohort groups takes no arguments"},
		{[]string{"bench", long}, "cohort bench takes no arguments"},
		{[]string{"store", "copy", long}, "cohort store copy takes no arguments"},
		{[]string{"acl", "list", long}, "cohort acl list takes no arguments"},
		{[]string{"acl", "add", "--topic", "t", long}, "cohort acl add takes no arguments"},
		{[]string{"acl", long}, "acl: want add, list or delete"},
		// Commands that take names: the length is what is wrong.
		{[]string{"group", "describe", "g", long}, "argument 2 is 32768 bytes long: names and ids are sent as Kafka strings"},
		{[]string{"topic", "create", long}, "argument 1 is 32768 bytes long"},
		{[]string{"offsets", long}, "argument 1 is 32768 bytes long"},
		{[]string{"users", long}, "argument 1 is 32768 bytes long"},
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for refused command lines", n)
	}
	// Short stray arguments keep their message, which names them.
	c.fails(2, []string{"acl", "list", "x", "--bootstrap", addr}, `acl list: unexpected arguments ["x"]`)
}
