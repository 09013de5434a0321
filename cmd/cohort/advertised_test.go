package main

import (
	"net"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
)

// TestWarnsAboutUnreachableAdvertisedAddress: a node whose --advertise
// names an address this host cannot reach (a container's port published
// under another number, a host name that resolves elsewhere) answers the
// bootstrap connection, and then every group request goes to the
// advertised address and fails with "connection refused" for an address
// the user never typed. The commands said only that; they now also say that
// the address is the one the node advertises, that the bootstrap answered,
// and which setting to check.
func TestWarnsAboutUnreachableAdvertisedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String() // nothing listens there once closed
	l.Close()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Advertise: dead, Group: cfg})
	c := cli{t: t, base: []string{"--bootstrap", n.Addr(), "--timeout", "2s"}}

	for _, args := range [][]string{{"groups"}, {"group", "describe", "g1"}} {
		_, errOut, code := c.run(args...)
		if code != 1 {
			t.Fatalf("%q: exit %d, want 1\n%s", args, code, errOut)
		}
		var warning string
		for _, line := range strings.Split(errOut, "\n") {
			if strings.Contains(line, "warning") {
				warning = line
			}
		}
		for _, want := range []string{"advertises " + dead, n.Addr() + " answered", "--advertise"} {
			if !strings.Contains(warning, want) {
				t.Errorf("%q: no warning naming %q:\n%s", args, want, errOut)
			}
		}
		if strings.Count(errOut, "advertises") != 1 {
			t.Errorf("%q: want the warning once:\n%s", args, errOut)
		}
	}
	// A command the bootstrap address alone can serve still succeeds; it
	// warns too if it tried the advertised address (as Kafka's tools warn
	// of every node they cannot connect to), and only then.
	if _, errOut, code := c.run("topics"); code != 0 || strings.Count(errOut, "advertises") > 1 {
		t.Errorf("topics: exit %d, stderr %q: want 0 and at most the warning", code, errOut)
	}
	good := startNode(t, "127.0.0.1:0")
	if _, errOut, code := (cli{t: t, base: []string{"--bootstrap", good.Addr(), "--timeout", "2s"}}).run("groups"); code != 0 || errOut != "" {
		t.Errorf("groups on a node advertising its own address: exit %d, stderr %q: want 0 and nothing", code, errOut)
	}
}
