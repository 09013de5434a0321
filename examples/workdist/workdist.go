// Package workdist is what the work-distribution examples share: their
// command line and their output. Each subdirectory is one worker on one
// Kafka client library (kafkajs's is a Node.js script); docs/workdist.md
// explains the idea: the partitions of a cohort catalog topic are units of
// work, and the group's rebalance callback tells each process which ones it
// owns.
//
// Every worker takes
//
//	-bootstrap host:port[,host:port...] -group ID -topic NAME -client-id ID -session-timeout 6s -fetch-max-wait 500ms
//
// (-bootstrap: one address, or a comma-separated list such as the nodes of
// a cohort cluster; any one that answers is enough to start)
// and prints one line on stdout per change of ownership,
//
//	assigned 0,2 [member=<id>] [generation=<n>] at=<t>  partitions gained: start their work
//	revoked 0,2 [...] at=<t>                           partitions given up: their work stopped
//	lost 0,2 [...] at=<t>                              partitions taken away (the session expired):
//	                                                   another worker may own them already
//	stopped                                            after leaving the group on SIGINT or SIGTERM
//
// (the partitions sorted, "none" for none; <t> is the wall-clock time of the
// callback in Unix nanoseconds, taken before the callback returns, so that
// the lines of several workers on one machine can be put in order). Errors
// and the libraries' warnings go to stderr, the examples' own as "error: ...".
package workdist

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Config is a worker's command line.
type Config struct {
	// Bootstrap is the addresses (host:port) the client first asks for
	// the cluster's metadata, in the order given.
	Bootstrap []string
	Group     string
	Topic     string // a catalog topic: its partitions are the work
	ClientID  string
	// SessionTimeout: a worker that stops heartbeating (crashed, frozen)
	// loses its partitions this long after its last heartbeat.
	SessionTimeout time.Duration
	// FetchMaxWait: cohort holds each Fetch of an (always empty) catalog
	// partition this long, so an idle worker polls about once per it.
	FetchMaxWait time.Duration
}

// Flags parses the command line (see Parse); clientID is the default
// client id. A bad flag ends the process with status 2.
func Flags(clientID string) Config {
	c, err := Parse(flag.CommandLine, os.Args[1:], clientID)
	if err != nil {
		Errorf("%v", err)
		os.Exit(2)
	}
	return c
}

// Parse defines the shared flags on fs, which may hold the worker's own
// flags already, and parses args with it.
func Parse(fs *flag.FlagSet, args []string, clientID string) (Config, error) {
	var c Config
	var bootstrap string
	fs.StringVar(&bootstrap, "bootstrap", "127.0.0.1:9092", "cohort address, or a comma-separated list of them (the nodes of a cluster)")
	fs.StringVar(&c.Group, "group", "workers", "group id")
	fs.StringVar(&c.Topic, "topic", "jobs", "catalog topic whose partitions are the work")
	fs.StringVar(&c.ClientID, "client-id", clientID, "client id (unique per worker helps to tell them apart)")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", 6*time.Second, "session timeout")
	fs.DurationVar(&c.FetchMaxWait, "fetch-max-wait", 500*time.Millisecond, "how long cohort holds each (empty) fetch")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Bootstrap = SplitList(bootstrap)
	if len(c.Bootstrap) == 0 {
		return c, fmt.Errorf("-bootstrap %q: no address", bootstrap)
	}
	return c, nil
}

// SplitList splits a comma-separated list, trimming the spaces around each
// entry and dropping the empty ones: " a:1, b:2 ," is [a:1 b:2].
func SplitList(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Report prints one change of ownership: what ("assigned", "revoked",
// "lost"), the partitions, key=value pairs from kv (key, value, ...) and
// at=<now in Unix nanoseconds>.
func Report[P int | int32](what string, parts []P, kv ...any) {
	at := time.Now().UnixNano()
	s := make([]string, 0, len(parts))
	for _, p := range slices.Sorted(slices.Values(parts)) {
		s = append(s, fmt.Sprint(p))
	}
	line := what + " " + strings.Join(s, ",")
	if len(s) == 0 {
		line = what + " none"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		line += fmt.Sprintf(" %v=%v", kv[i], kv[i+1])
	}
	fmt.Println(line + fmt.Sprintf(" at=%d", at))
}

// Stopped reports that the worker left the group and stops.
func Stopped() { fmt.Println("stopped") }

// Errorf reports an error on stderr.
func Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
}
