package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/security/clientconfig"
)

// Bounds of flag values that the checks of their meaning leave open: an
// absurd value (a path of a megabyte, a timeout of centuries) is a usage
// error that names the flag, given before anything starts, rather than a
// failure later whose message repeats the whole value. cohort serve and
// every other command check their flags with the same functions, whether a
// value comes from the command line or (serve) the environment.
const (
	// maxPathBytes bounds a file or directory path: Linux's PATH_MAX,
	// beyond which open(2) refuses a path anyway.
	maxPathBytes = 4096
	// maxListBytes bounds a comma- or semicolon-separated list: endpoints,
	// listeners, principals, principal mapping rules.
	maxListBytes = 64 << 10
	// maxValueBytes bounds any other string value: an address, an id, a
	// name, a claim, a prefix, a keyword.
	maxValueBytes = 1024
	// maxShownBytes is the longest value an error message quotes; a longer
	// one is given by its length. Long enough for any path or id a
	// person would type, whose message must show it.
	maxShownBytes = 256
)

// maxFlagDuration bounds a duration flag: 2^31-1 ms (24 days 20 h), the
// bound of Kafka's millisecond settings held in an int and of the int32
// millisecond timeouts on the wire. Longer is no timeout or interval
// anyone waits for (0 means never where a flag allows it).
const maxFlagDuration = time.Duration(math.MaxInt32) * time.Millisecond

// pathFlags and listFlags name the string flags, of any command, that hold
// a path or a list; every other string flag holds one value.
var (
	pathFlags = []string{"data-dir", "backup-dir", "tls-cert-file", "tls-key-file", "tls-client-ca-file", "tls-ca-file",
		"oauth-jwks-file", "oauth-token-file", "etcd-ca", "etcd-cert", "etcd-key", "etcd-password-file", "sasl-password-file",
		"password-file", "command-config", "data-command-config", "from-data-dir", "to-data-dir", "from-file"}
	listFlags = []string{"listeners", "advertised-listeners", "etcd", "from-etcd", "to-etcd", "bootstrap", "data-bootstrap",
		"super-users", "http-hosts", "tls-principal-rules", "sasl-mechanisms", "consumer-assignors",
		"members", "groups", "committers", "partitions-per-commit", "state", "type", "operation"}
)

// stringLimit is the most bytes flag name's value may hold, and what kind
// of value it is, for the error.
func stringLimit(name string) (int, string) {
	switch {
	case slices.Contains(pathFlags, name):
		return maxPathBytes, "a path"
	case slices.Contains(listFlags, name):
		return maxListBytes, "a list"
	}
	return maxValueBytes, "one value"
}

// checkFlagBounds checks the values of fs's flags that parsing left
// unchecked: the length of every string and, unless a command bounds one
// itself (own), every duration up to maxFlagDuration. how names the flag
// as it was set ("--name" or "$COHORT_NAME"). The value itself is never
// repeated: it may be long, or (a mistyped flag) a secret.
func checkFlagBounds(fs *flag.FlagSet, how func(name string) string, own ...string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil || slices.Contains(own, f.Name) {
			return
		}
		switch v := g.Get().(type) {
		case string:
			err = checkLength(how(f.Name), f.Name, v)
		case time.Duration:
			err = checkDuration(how(f.Name), v, maxFlagDuration)
		}
	})
	return err
}

// checkLength refuses a value v of flag name (how: as it was set) longer
// than stringLimit allows the flag.
func checkLength(how, name, v string) error {
	if limit, what := stringLimit(name); len(v) > limit {
		return fmt.Errorf("%s is %d bytes long: want at most %d (%s)", how, len(v), limit, what)
	}
	return nil
}

// resolveBounded resolves sec (clientconfig.Config.Resolve: the password,
// the properties file of fileFlag) and gives the settings the file gave
// the bounds of the flags that set them (the flags were checked when
// parsed and win over the file): a path too long in a properties file is
// refused as the same path given by flag is, as a clientconfig
// SettingsError (a usage error).
func resolveBounded(sec *clientconfig.Config, fileFlag string) error {
	if err := sec.Resolve(); err != nil {
		return err
	}
	for _, s := range []struct{ flag, v string }{
		{"tls-ca-file", sec.CAFile}, {"tls-cert-file", sec.CertFile}, {"tls-key-file", sec.KeyFile},
		{"tls-server-name", sec.ServerName}, {"sasl-mechanism", sec.Mechanism}, {"sasl-username", sec.Username},
		{"oauth-token-file", sec.TokenFile},
	} {
		if err := checkLength(fileFlag+": its setting for --"+s.flag, s.flag, s.v); err != nil {
			return clientconfig.SettingsError{Err: settingBoundError{err}}
		}
	}
	return nil
}

// settingBoundError is resolveBounded's error for a setting out of its
// bound; it names the file's flag itself.
type settingBoundError struct{ error }

// checkDuration refuses a duration d of the flag how above most.
func checkDuration(how string, d, most time.Duration) error {
	if d > most {
		return fmt.Errorf("%s %s: want at most %s", how, shortDuration(d), shortDuration(most))
	}
	return nil
}

// shownValue quotes v for an error message, or gives its length when it is
// too long to repeat.
func shownValue(v string) string {
	if len(v) > maxShownBytes {
		return fmt.Sprintf("(a value of %d bytes)", len(v))
	}
	return strconv.Quote(v)
}

// wantOfKind says what a flag of kind (flag.UnquoteUsage's) takes, for the
// error about a value it could not parse.
func wantOfKind(kind string) string {
	switch kind {
	case "duration":
		return "a duration such as 3s or 10m"
	case "int":
		return "an integer"
	case "":
		return "true or false"
	}
	return "a " + kind
}

// invalidValueError rewrites the flag package's error for a value a flag
// could not parse when that value is too long to repeat (the error quotes
// it whole) as "--name (a value of N bytes): want ..."; other errors are
// returned as they are.
func invalidValueError(fs *flag.FlagSet, err error) error {
	rest, ok := strings.CutPrefix(err.Error(), "invalid value ")
	if !ok {
		return err
	}
	quoted, qerr := strconv.QuotedPrefix(rest)
	if qerr != nil {
		return err
	}
	value, _ := strconv.Unquote(quoted)
	name, _, ok := strings.Cut(strings.TrimPrefix(rest[len(quoted):], " for flag -"), ": ")
	f := fs.Lookup(name)
	if !ok || f == nil || len(value) <= maxShownBytes {
		return err
	}
	if _, isGetter := f.Value.(flag.Getter); !isGetter {
		// A flag that parses its value itself (flag.Func), whose
		// reason may quote the value again.
		return fmt.Errorf("--%s %s: not a value it takes (see its -h)", name, shownValue(value))
	}
	kind, _ := flag.UnquoteUsage(f)
	return fmt.Errorf("--%s %s: want %s", name, shownValue(value), wantOfKind(kind))
}

// longValues picks from vals (the arguments of a command line, the values
// of environment variables) those too long for a message to repeat, and
// the long entries of those that are lists (',' or ';' separated, and an
// entry's address after its scheme), longest first: an error from deeper down (a listener that does not parse, an
// etcd endpoint that does not answer, a file that cannot be opened) may
// quote one.
func longValues(vals []string) []string {
	var long []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) > maxShownBytes && !slices.Contains(long, v) {
			long = append(long, v)
		}
	}
	for _, v := range vals {
		if _, value, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "-") {
			v = value // --name=value
		}
		add(v)
		for _, sep := range []string{",", ";"} {
			for part := range strings.SplitSeq(v, sep) {
				add(part)
				if _, rest, ok := strings.Cut(part, "://"); ok {
					add(rest) // an address without its scheme
				}
			}
		}
	}
	slices.SortFunc(long, func(a, b string) int { return len(b) - len(a) })
	return long
}

// elideLong replaces in msg each of long, as it is or quoted Go style, by
// its length.
func elideLong(msg string, long []string) string {
	for _, v := range long {
		q := strconv.Quote(v)
		short := fmt.Sprintf("(a value of %d bytes)", len(v))
		msg = strings.ReplaceAll(msg, q, short)
		msg = strings.ReplaceAll(msg, q[1:len(q)-1], short) // also v, when it needs no escape
		msg = strings.ReplaceAll(msg, v, short)
	}
	return msg
}

// elidingWriter writes to w what exitCode prints (one line a write) with
// the long values of the command line given by their length (elideLong).
type elidingWriter struct {
	w    io.Writer
	long []string
}

func (e elidingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, elideLong(string(p), e.long)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// commandValues are the strings a command's messages may quote: its
// arguments and, for serve, which reads its flags from COHORT_ variables
// too, their values.
func commandValues(cmd string, args []string) []string {
	if cmd != "serve" {
		return args
	}
	vals := slices.Clone(args)
	for _, kv := range os.Environ() {
		if name, v, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "COHORT_") {
			vals = append(vals, v)
		}
	}
	return vals
}

// etcdEndpoints splits a comma-separated list of etcd endpoints (given by
// how: a flag or its variable), dropping empty entries; an endpoint longer
// than maxValueBytes is a usage error, as the list itself is bounded by
// maxListBytes.
func etcdEndpoints(how, list string) ([]string, error) {
	var eps []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); len(e) > maxValueBytes {
			return nil, usagef("%s: an endpoint of %d bytes: want at most %d", how, len(e), maxValueBytes)
		} else if e != "" {
			eps = append(eps, e)
		}
	}
	return eps, nil
}
