// Command cohort runs a cohort node: a group coordination service that speaks
// the Kafka wire protocol.
//
//	cohort serve [flags]   run a node (see cohort serve -h)
//	cohort bench [flags]   measure rebalance latency and throughput against
//	                       any Kafka-protocol group coordinator
//	cohort topics|topic ...            the topic catalog
//	cohort groups|group|offsets ...    groups, their members, offsets and lag
//	cohort user|users ...  SCRAM credentials
//	cohort acl ...         ACLs
//	cohort store copy ...  move a stopped node's state between --data-dir and etcd
//	cohort version         the build (also cohort --version)
//
// Every command that connects to cohort takes --bootstrap, --timeout and the
// client security flags of package security/clientconfig (--tls, --sasl-*,
// --command-config). docs/cli.md describes every command, its output (table
// and JSON) and the exit codes: 0 success, 1 error, 2 usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cohort-dev/cohort/internal/clock"
)

// Exit codes: scripts can rely on them (docs/cli.md).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a mistake in the command line (an unknown flag, a missing or
// extra argument, flags that do not go together): exit code 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// loggedError is an error the command has reported in its own log already
// (cohort serve --log-format json, whose every line is JSON): exitCode gives
// its exit code without printing it again.
type loggedError struct{ err error }

func (l loggedError) Error() string { return l.err.Error() }
func (l loggedError) Unwrap() error { return l.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// env is what a command reads and writes besides its arguments, so that
// tests run commands in-process and see their output and exit code.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	clock          clock.Clock // --by-duration counts back from its Now
}

func main() {
	os.Exit(run(os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, clock: clock.Real{}}))
}

// run runs the command line args (without the program name) and returns
// the exit code.
func run(args []string, e env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	// Everything a command prints may hold client-chosen strings (safeWriter).
	e.stdout, e.stderr = safeWriter{e.stdout}, safeWriter{e.stderr}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = serve(rest)
	case "bench":
		err = bench(rest)
	case "topics", "topic":
		err = topicsCmd(e, cmd, rest)
	case "groups", "group":
		err = groupsCmd(e, cmd, rest)
	case "offsets":
		err = offsetsCmd(e, rest)
	case "user", "users":
		err = users(e, cmd, rest)
	case "acl":
		err = acl(e, rest)
	case "store":
		err = storeCmd(e, rest)
	case "version", "--version", "-version":
		err = version(e, rest)
	case "-h", "--help", "help":
		usage(e.stdout)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "cohort: unknown command %q\n", cmd)
		usage(e.stderr)
		return exitUsage
	}
	var errOut io.Writer = e.stderr
	if err != nil {
		// A long value quoted by an error from deeper down is given by
		// its length.
		if long := longValues(commandValues(args[0], args[1:])); len(long) > 0 {
			errOut = elidingWriter{e.stderr, long}
		}
	}
	return exitCode(err, errOut)
}

// exitCode prints err (if any) and maps it to the exit code: help asked for
// is success, a usageError is 2, anything else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if logged := (loggedError{}); !errors.As(err, &logged) {
		for _, line := range errorLines(err) {
			fmt.Fprintln(stderr, "cohort:", line)
		}
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: cohort <command> [flags]

commands:
  serve     run a cohort node (Kafka-protocol group coordinator)
  bench     benchmark a group coordinator at a bootstrap address
  topics, topic create|grow|delete NAME     the topic catalog
  groups [--state S] [--type T]             list groups
  group describe ID...|--all-groups         state, members, assignments, offsets, lag
  group delete ID...                        delete empty groups and their offsets
  group history ID [--last N]               the group's rebalances: causes, durations, moves
  group why ID [--last N]                   the last rebalances, and what one in progress waits for
  group config ID [--set N=V] [--delete N]  a consumer group's own session, heartbeat and assignment settings
  offsets ID                                committed offsets and lag
  offsets reset ID ...                      plan (default) or --execute an offset reset
  offsets delete ID --topic T[:P,...]       delete committed offsets (OffsetDelete)
  user set|delete NAME, users               SCRAM credentials (password from stdin)
  acl add|list|delete                       ACLs
  store copy --from-data-dir D --to-etcd E  move a stopped node's state into etcd (cluster mode),
  store copy --from-etcd E --to-data-dir D  or a stopped cluster's back into a data directory
  version, --version                        the build: version, VCS revision and time, Go release

Commands that connect take --bootstrap host:port, --timeout (connection
failures are retried until it runs out) and the client security flags:
--tls, --tls-ca-file, --tls-cert-file, --tls-key-file, --tls-server-name,
--sasl-mechanism, --sasl-username, --sasl-password-file (or
$COHORT_SASL_PASSWORD), --oauth-token-file, --command-config FILE (Kafka
client properties). Topic, group and offset commands take --output
table|json. Exit codes: 0 success, 1 error, 2 usage error.
Run 'cohort <command> -h' for the command's flags; docs/cli.md has it all.
`)
}
