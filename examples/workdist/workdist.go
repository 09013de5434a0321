// Package workdist is what the work-distribution examples share: their
// command line and their output. Each subdirectory is one worker on one
// Kafka client library (kafkajs's is a Node.js script); docs/workdist.md
// explains the idea: the partitions of a cohort catalog topic are units of
// work, and the group's rebalance callback tells each process which ones it
// owns.
//
// Every worker takes
//
//	-bootstrap host:port -group ID -topic NAME -client-id ID -session-timeout 6s -fetch-max-wait 500ms
//
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
	Bootstrap string
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

// Flags parses the command line; clientID is the default client id.
func Flags(clientID string) Config {
	var c Config
	flag.StringVar(&c.Bootstrap, "bootstrap", "127.0.0.1:9092", "cohort address")
	flag.StringVar(&c.Group, "group", "workers", "group id")
	flag.StringVar(&c.Topic, "topic", "jobs", "catalog topic whose partitions are the work")
	flag.StringVar(&c.ClientID, "client-id", clientID, "client id (unique per worker helps to tell them apart)")
	flag.DurationVar(&c.SessionTimeout, "session-timeout", 6*time.Second, "session timeout")
	flag.DurationVar(&c.FetchMaxWait, "fetch-max-wait", 500*time.Millisecond, "how long cohort holds each (empty) fetch")
	flag.Parse()
	return c
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
