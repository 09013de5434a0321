// Package testpar sets how many parallel tests a package's test binary runs
// at once when the command line does not say.
//
// go test's -parallel defaults to GOMAXPROCS: 2 on the CI machine. That fits
// tests that keep a core busy, but the wall-clock suites (stock Kafka
// clients, embedded etcd, child processes) spend most of their time waiting
// on session and rebalance timeouts and on other processes: ./clients used
// about 83 s of CPU (its children's included) in 391 s of wall time. Such a
// package's TestMain calls Default to let more of its parallel tests wait at
// the same time. An explicit -parallel (or -test.parallel) still wins, and
// -p, the number of packages go test runs at once, is untouched.
package testpar

import (
	"flag"
	"strconv"
)

// Default parses the command line (if TestMain has not) and, unless
// -test.parallel was given there, raises it to at least n. Call it from
// TestMain before m.Run.
func Default(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	raise(flag.CommandLine, n)
}

// raise sets fs's test.parallel to n when the flag was not set explicitly
// and its value is below n.
func raise(fs *flag.FlagSet, n int) {
	f := fs.Lookup("test.parallel")
	if f == nil {
		return
	}
	explicit := false
	fs.Visit(func(v *flag.Flag) {
		if v.Name == "test.parallel" {
			explicit = true
		}
	})
	if explicit {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur >= n {
		return
	}
	fs.Set("test.parallel", strconv.Itoa(n))
}
