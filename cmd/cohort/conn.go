package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

// conn holds the flags of every command that talks to cohort: where it is,
// how long to wait for it, and how to connect (TLS, SASL; see package
// security/clientconfig).
type conn struct {
	bootstrap string
	timeout   time.Duration
	sec       clientconfig.Config
	fs        *flag.FlagSet  // its output (the command's stderr) takes warnings
	hook      *connectedHook // the open client's, for fail; nil before open
}

func (c *conn) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.bootstrap, "bootstrap", envDefault("bootstrap", "127.0.0.1:9092"), "address of cohort, host:port[,host:port...] (env COHORT_BOOTSTRAP)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "how long the command may take, retrying connection failures meanwhile")
	c.sec.RegisterFlags(fs)
}

// open resolves the security flags and connects to cohort: the client, a
// context bounded by --timeout, and the function that releases both.
func (c *conn) open() (*kgo.Client, context.Context, func(), error) {
	if c.timeout <= 0 {
		return nil, nil, nil, usagef("--timeout %s: want a positive duration", c.timeout)
	}
	err := resolveBounded(&c.sec, "--command-config")
	var opts []kgo.Opt
	if err == nil {
		opts, err = c.sec.Opts()
	}
	if err != nil {
		// "cohort: <command>: ...", as every error line reads; settings
		// that do not go together are a usage error (exit 2), a file
		// that cannot be read is not.
		name := strings.TrimSpace(c.fs.Name())
		if errors.As(err, new(clientconfig.SettingsError)) {
			return nil, nil, nil, usagef("%s: %w", name, err)
		}
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	warnExposed(c.fs.Output(), c.sec)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	cl, hook, err := connect(ctx, "cohort", "--bootstrap", c.bootstrap, opts)
	if err != nil {
		if errors.Is(err, kerr.UnsupportedSaslMechanism) {
			err = withEnabledMechanisms(ctx, err, c.bootstrap, c.sec)
		}
		cancel()
		// "cohort: <command>: ...", as every error line reads.
		return nil, nil, nil, fmt.Errorf("%s: %w", strings.TrimSpace(c.fs.Name()), err)
	}
	c.hook = hook
	return cl, ctx, func() {
		cancel()
		hook.warnAdvertised(c.fs.Output(), c.bootstrap)
		cl.Close()
	}, nil
}

// fail is err of the command's step what, once connected: "what: err", and
// when err is a failed connection (a node that closed one at once, as at its
// --max-connections, or one that could not be dialled) "what: cohort at
// ADDR: err", ADDR the node whose connection failed, as the errors of
// connecting name it. nil if err is.
func (c *conn) fail(what string, err error) error {
	if err == nil {
		return nil
	}
	if !isConnFailure(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	addr := strings.Join(strings.FieldsFunc(c.bootstrap, func(r rune) bool { return r == ',' || r == ' ' }), ",")
	if a := c.hook.lastFailed(); a != "" {
		addr = a
	}
	if eof := (*kgo.ErrFirstReadEOF)(nil); errors.As(err, &eof) {
		// kgo guesses at TLS or SASL settings, but the first
		// connection worked with the same ones.
		err = fmt.Errorf("%w (the command's first connection worked with the same settings: the node may be at its --max-connections or --max-connections-per-ip limit)", err)
	}
	if strings.Contains(err.Error(), addr) {
		return fmt.Errorf("%s: cohort: %w", what, err)
	}
	return fmt.Errorf("%s: cohort at %s: %w", what, addr, err)
}

// isConnFailure reports whether err is a connection that failed rather than
// an answer: one dialled in vain, closed before its first answer (kgo's
// guess at why then), or cut off.
func isConnFailure(err error) bool {
	var eof *kgo.ErrFirstReadEOF
	var op *net.OpError
	return errors.As(err, &eof) || errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// withEnabledMechanisms adds to err, a refused SASL mechanism, the
// mechanisms the node enables: its SaslHandshake answer lists them, but
// kgo's error does not say. Asked on a connection of its own (a handshake
// for no mechanism, which the node answers with the list); err unchanged if
// that fails.
func withEnabledMechanisms(ctx context.Context, err error, bootstrap string, sec clientconfig.Config) error {
	addr, _, _ := strings.Cut(bootstrap, ",")
	addr = strings.TrimSpace(addr)
	tc, terr := sec.TLSConfig()
	if terr != nil {
		return err
	}
	var d net.Dialer
	nc, derr := d.DialContext(ctx, "tcp", addr)
	if derr != nil {
		return err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	if tc != nil {
		tc = tc.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlsConn := tls.Client(nc, tc)
		if tlsConn.HandshakeContext(ctx) != nil {
			return err
		}
		nc = tlsConn
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	if _, werr := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("cohort-cli")).AppendRequest(nil, req, 1)); werr != nil {
		return err
	}
	var size [4]byte
	if _, rerr := io.ReadFull(nc, size[:]); rerr != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<10 {
		return err
	}
	body := make([]byte, n)
	if _, rerr := io.ReadFull(nc, body); rerr != nil {
		return err
	}
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if resp.ReadFrom(body[4:]) != nil || len(resp.SupportedMechanisms) == 0 {
		return err
	}
	names := make([]string, len(resp.SupportedMechanisms))
	for i, m := range resp.SupportedMechanisms {
		names[i] = cell(m) // the node's strings, printed on a terminal
	}
	return fmt.Errorf("%w (the node enables %s)", err, strings.Join(names, ", "))
}

// dial is open for the commands that print one table (user, acl): an admin
// client, the context, a table writer on out, and the function that
// flushes the table and releases the rest.
func (c *conn) dial(out io.Writer) (*kadm.Client, context.Context, *tabwriter.Writer, func(), error) {
	cl, ctx, done, err := c.open()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tw := newTable(out)
	return kadm.NewClient(cl), ctx, tw, func() { tw.Flush(); done() }, nil
}

// cmdFlags are the flags the topic, group and offsets commands share:
// where cohort is and how to connect, --output, and (for the commands that
// show lag or reset offsets, after withData) the data cluster.
type cmdFlags struct {
	fs *flag.FlagSet
	c  conn
	o  outputFlag
	d  dataConn
}

// newCmdFlags makes the flag set of command name; -h prints usage and the
// flags on e's standard error.
func newCmdFlags(e env, name, usage string) *cmdFlags {
	f := &cmdFlags{fs: newFlagSet(e, name, usage)}
	f.c.register(f.fs)
	f.o.register(f.fs)
	return f
}

// parseNoArgs parses args of a command that takes no positional
// arguments (see parseFlags and checkNoArgs) and checks the shared flags.
func (f *cmdFlags) parseNoArgs(args []string) error {
	pos, err := parseFlags(f.fs, args)
	if err != nil {
		return err
	}
	if err := checkNoArgs(f.fs.Name(), pos); err != nil {
		return err
	}
	return f.check()
}

// check checks the shared flags, once parsed.
func (f *cmdFlags) check() error {
	if err := f.o.check(); err != nil {
		return err
	}
	return f.d.check()
}

// dataConn is --data-bootstrap: the Kafka cluster that holds the records of
// the topics whose offsets cohort keeps. Lag and the log-relative reset
// modes ask it for log-start, log-end and time-indexed offsets.
type dataConn struct {
	bootstrap string
	config    string // --data-command-config: Kafka client properties
	fs        *flag.FlagSet
}

func (d *dataConn) register(fs *flag.FlagSet) {
	d.fs = fs
	fs.StringVar(&d.bootstrap, "data-bootstrap", "", "`host:port[,...]` of the Kafka cluster holding the records: shows log-end offsets and lag")
	fs.StringVar(&d.config, "data-command-config", "", "Kafka client properties `file` for --data-bootstrap (security.protocol, sasl.*, ssl.*)")
}

// check rejects --data-command-config without --data-bootstrap.
func (d *dataConn) check() error {
	if d.config != "" && d.bootstrap == "" {
		return usagef("--data-command-config needs --data-bootstrap")
	}
	return nil
}

// open connects to the data cluster; nil, nil without --data-bootstrap.
func (d *dataConn) open(ctx context.Context) (*kadm.Client, error) {
	if d.bootstrap == "" {
		return nil, nil
	}
	sec := clientconfig.Config{PropertiesFile: d.config}
	err := resolveBounded(&sec, "--data-command-config")
	var opts []kgo.Opt
	if err == nil {
		opts, err = sec.Opts()
	}
	if errors.As(err, new(settingBoundError)) {
		return nil, usageError{err}
	} else if err != nil {
		return nil, fmt.Errorf("--data-command-config: %w", err)
	}
	warnExposed(d.fs.Output(), sec)
	cl, _, err := connect(ctx, "the data cluster", "--data-bootstrap", d.bootstrap, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.TrimSpace(d.fs.Name()), err)
	}
	context.AfterFunc(ctx, cl.Close)
	return kadm.NewClient(cl), nil
}

// Bounds of connect's retries (the context bounds them in time too).
const (
	dialBackoffMin = 50 * time.Millisecond
	dialBackoffMax = time.Second
	dialAttempts   = 1000
)

// connect makes a client of the cluster at bootstrap (flag names the flag
// that gave it, what names the cluster in errors) and waits until it
// answers: a connection that fails (refused, unreachable, timing out: a
// node that is still starting, say) is retried with backoff until ctx ends,
// and the error then names the addresses tried. Any other failure, such as
// a refused authentication, is returned at once. The hook goes on recording
// the client's connections (conn.fail).
func connect(ctx context.Context, what, flagName, bootstrap string, opts []kgo.Opt) (*kgo.Client, *connectedHook, error) {
	var addrs []string
	for _, a := range strings.Split(bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, nil, usagef("%s is empty: want host:port", flagName)
	}
	where := strings.Join(addrs, ",")
	for _, a := range addrs {
		// A port that cannot be dialled is a typo, not a node that is
		// down: without this it was retried until --timeout. (An address
		// without a port is the client's default, 9092.)
		if _, port, err := net.SplitHostPort(a); err == nil {
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				if err != nil {
					port = strconv.Quote(port)
				}
				return nil, nil, usagef("%s %s: port %s: want 1 to 65535", flagName, where, port)
			}
		}
	}
	// byname: offsets of topics outside the catalog are listed and reset
	// too (they have no topic ID for OffsetCommit/OffsetFetch v10).
	connected := &connectedHook{addrs: addrs} // whether a connection was ever opened; each address's last dial error
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addrs...), byname.Opt(), kgo.WithHooks(connected))...)
	if err != nil {
		return nil, nil, usagef("%s %s: %v", flagName, where, err)
	}
	start := time.Now()
	backoff := dialBackoffMin
	var last error  // the last connection failure
	var final error // the last attempt's failure
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{} // none: only "are you there"
		_, err := req.RequestWith(ctx, cl)
		if err == nil {
			connected.connectedNow()
			return cl, connected, nil
		}
		final = err
		if isDialError(err) || last == nil && ctx.Err() != nil {
			last = err
		} else if ctx.Err() == nil {
			cl.Close()
			return nil, nil, fmt.Errorf("%s at %s: %w", what, where, verifyHint(err, flagName))
		}
		if ctx.Err() == nil {
			timer := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				timer.Stop()
			case <-timer.C:
			}
		}
		if ctx.Err() != nil || attempt >= dialAttempts {
			// kgo tries the addresses in turn within one request, and
			// with several of them down its request ends with ctx, not
			// with a dial error: the hook has what each dial said
			// (read before Close, which would end a dial under way).
			dials, refused := connected.dialFailures()
			cl.Close()
			if refused == nil {
				dials = attempt
			}
			failed, reason := "cannot connect to", refused
			if reason == nil {
				reason = last
			}
			if connected.Load() {
				// A node that accepts the connection but never
				// answers is not one that cannot be connected to;
				// and dials refused before it came up are not why
				// it did not answer.
				failed, reason = "no answer from", noAnswer(final, refused)
			}
			return nil, nil, fmt.Errorf("%s %s at %s (%s in %s): %w",
				failed, what, where, plural(dials, "attempt"), time.Since(start).Round(time.Millisecond), reason)
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// verifyHint adds to err, when it is a TLS handshake that refused the
// node's certificate, which setting decides that: Go's message says what
// was wrong with the certificate, not what to set. flagName is the
// addresses' flag (--bootstrap, or --data-bootstrap for the data cluster,
// whose settings come from --data-command-config alone).
func verifyHint(err error, flagName string) error {
	caSetting, nameSetting := "--tls-ca-file (ssl.ca.location in --command-config)", "--tls-server-name"
	if flagName == "--data-bootstrap" {
		caSetting, nameSetting = "ssl.ca.location in --data-command-config", ""
	}
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w (the node's certificate is not signed by a CA this command trusts: name the CA that "+
			"signed it with %s)", err, caSetting)
	case errors.As(err, &name) && nameSetting != "":
		return fmt.Errorf("%w (connect in %s by a name or address the node's certificate holds, or give that name "+
			"with %s)", err, flagName, nameSetting)
	case errors.As(err, &name):
		return fmt.Errorf("%w (connect in %s by a name or address the certificate holds)", err, flagName)
	}
	return err
}

// noAnswer is why a node that was connected to never answered: final, the
// last attempt's failure (the timeout, or a dial refused after the
// connection that got no answer), then refused, the dials that failed, if
// any (each address's last).
func noAnswer(final, refused error) error {
	if isDialError(final) {
		if refused == nil {
			refused = final
		}
		return joinedErr{refused, errors.New("an earlier connection was opened but got no answer")}
	}
	reason := fmt.Errorf("connected, but no answer before the timeout (%w)", final)
	if refused == nil {
		return reason
	}
	return joinedErr{reason, fmt.Errorf("earlier attempts: %w", refused)}
}

// connectedHook records whether the client ever opened a connection:
// a request written (the ApiVersions that opens each connection, written
// at once, long before a timeout), or a connection reported opened. It
// also counts the dials and keeps the last failure of each address.
type connectedHook struct {
	atomic.Bool

	addrs []string // the seed addresses, in the order given

	mu     sync.Mutex
	dials  int
	order  []string         // addresses whose dial failed
	failed map[string]error // address -> its last dial error
	// last is the address of the broker whose connection failed last
	// since connect returned (a dial, or a request's write or read);
	// before, since is false and nothing is kept.
	last  string
	since bool
	// seedOK: a connection to a --bootstrap address opened. adv: the
	// addresses of the metadata's brokers (the ones the nodes advertise)
	// that are no --bootstrap address and whose last dial failed, with
	// that failure (warnAdvertised); advOrder in the order first failed.
	seedOK   bool
	adv      map[string]advertisedFailure
	advOrder []string
}

// advertisedFailure is the last failed dial of a node's advertised address.
type advertisedFailure struct {
	node int32
	err  error
}

// warnAdvertised writes to w, once per address, that a node's advertised
// address could not be reached though a --bootstrap address (bootstrap)
// answered: the node told the client to go somewhere this host cannot
// reach, which the dial error alone ("connection refused" for an address
// the user never typed) does not explain. A wrong --advertise or
// --advertised-listeners (a container's published port, a name that
// resolves elsewhere) is the usual cause; a node that is down is the other.
func (h *connectedHook) warnAdvertised(w io.Writer, bootstrap string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.seedOK {
		return
	}
	for _, addr := range h.advOrder {
		f, ok := h.adv[addr]
		if !ok {
			continue // reached since
		}
		reason := f.err
		var op *net.OpError
		if errors.As(reason, &op) {
			reason = op.Err // the dial's own words, without the address again
		}
		fmt.Fprintf(w, "cohort: warning: node %d advertises %s, which could not be reached from here (%v), although %s answered: "+
			"if the node is up, its --advertise or --advertised-listeners names an address that is wrong for this host\n",
			f.node, addr, reason, bootstrap)
	}
	h.adv, h.advOrder = nil, nil
}

// connectedNow marks the end of connect: connection failures from now on
// are the command's (lastFailed).
func (h *connectedHook) connectedNow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since, h.last = true, ""
}

// lastFailed is the address of the broker whose connection failed last
// since connect returned, "" if none did (or h is nil).
func (h *connectedHook) lastFailed() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// OnBrokerE2E notes a request that failed on its connection: its write,
// or its read (a connection the broker closed).
func (h *connectedHook) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if e2e.Err() == nil || errors.Is(e2e.Err(), kgo.ErrClientClosed) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since {
		h.last = net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	}
}

func (h *connectedHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h.Store(true)
	}
}

func (h *connectedHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if conn != nil {
		h.Store(true)
	}
	if errors.Is(err, kgo.ErrClientClosed) {
		return // a dial ended by Close: no attempt of the command's
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dials++
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	// kgo gives the --bootstrap addresses negative node ids; a node id
	// of 0 or more is a broker of the metadata, at its advertised address.
	advertised := meta.NodeID >= 0 && !slices.Contains(h.addrs, addr)
	if err == nil {
		if meta.NodeID < 0 {
			h.seedOK = true
		}
		delete(h.adv, addr)
		return
	}
	if advertised {
		if h.adv == nil {
			h.adv = map[string]advertisedFailure{}
		}
		if !slices.Contains(h.advOrder, addr) {
			h.advOrder = append(h.advOrder, addr)
		}
		h.adv[addr] = advertisedFailure{node: meta.NodeID, err: err}
	}
	if h.since {
		h.last = addr
	}
	if h.failed == nil {
		h.failed = map[string]error{}
	}
	if _, seen := h.failed[addr]; !seen {
		h.order = append(h.order, addr)
	}
	h.failed[addr] = err
}

// dialFailures returns the number of dials and the last dial error of each
// address that failed, in the order of --bootstrap, one after the other
// ("; "), each naming its address; a nil error when no dial failed.
func (h *connectedHook) dialFailures() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.order) == 0 {
		return h.dials, nil
	}
	rank := func(addr string) int {
		if i := slices.Index(h.addrs, addr); i >= 0 {
			return i
		}
		return len(h.addrs) // a broker of the metadata: after the seeds
	}
	slices.SortStableFunc(h.order, func(a, b string) int { return rank(a) - rank(b) })
	errs := make([]error, len(h.order))
	for i, addr := range h.order {
		err := h.failed[addr]
		if !strings.Contains(err.Error(), addr) {
			err = fmt.Errorf("%s: %w", addr, err)
		}
		errs[i] = err
	}
	if len(errs) == 1 {
		return h.dials, errs[0]
	}
	return h.dials, joinedErr(errs)
}

// joinedErr is several errors on one line, separated by "; " (errors.Join
// would put them on lines of their own, each then printed as a line of
// its own as if a failure of its own); errors.Is and As see each.
type joinedErr []error

func (j joinedErr) Error() string {
	parts := make([]string, len(j))
	for i, e := range j {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (j joinedErr) Unwrap() []error { return j }

// isDialError reports whether err is a failure to open a connection.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// warnExposed warns on w about each secret file of sec that other users of
// the machine may read.
func warnExposed(w io.Writer, sec clientconfig.Config) {
	for _, name := range sec.ExposedSecretFiles() {
		fmt.Fprintf(w, "cohort: warning: %s\n", exposedWarning(name))
	}
}

// exposedWarning says that the secret file name can be read by other users
// of the machine, and how to stop that.
func exposedWarning(name string) string {
	return fmt.Sprintf("%s holds a secret and other users of this machine can read it: chmod 600 %s", cell(name), cell(name))
}

// unreachable reports whether err is nothing but failures to reach a
// group's coordinator: a node that is down (in cluster mode its partitions
// move to another node within --lease-ttl), or an answer that no node
// serves the group right now (COORDINATOR_NOT_AVAILABLE while its partition
// is between two owners, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
// Any other answer is an answer.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	// Per-broker errors first: any one of them that is an answer makes
	// the whole an answer (errors.As would find a dial error among them).
	var se *kadm.ShardErrors
	if errors.As(err, &se) && len(se.Errs) > 0 {
		for _, e := range se.Errs {
			if !noCoordinator(e.Err) {
				return false
			}
		}
		return true
	}
	return noCoordinator(err)
}

// noCoordinator reports whether err is one failure to reach a coordinator.
func noCoordinator(err error) bool {
	return isDialError(err) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress)
}

// untilReachable calls op again, with backoff, while it fails only to
// reach a coordinator (unreachable) and ctx (--timeout) allows: right after a
// node dies, the groups it coordinated are unreachable until their
// partitions move to another node, and a command run then should wait for
// that rather than fail at once. When ctx ends it returns op's last result,
// the connection failure.
//
// Before each retry it has cl (the client op uses; nil: none) refresh its
// metadata: franz-go keeps a group's coordinator after dials to it fail (on
// the group requests kadm sends to each group's coordinator), and looks the
// coordinator up again only once that node is gone from the metadata, which
// a node that stopped, or lost its lease, soon is.
// testRetrying, if set (tests only, before any test runs), is called with
// untilReachable's client and op's failure before each of its retries: a
// test learns that its command failed to reach a coordinator and is asking
// again.
var testRetrying func(cl *kgo.Client, err error)

func untilReachable[T any](ctx context.Context, cl *kgo.Client, op func() (T, error)) (T, error) {
	backoff := dialBackoffMin
	for {
		v, err := op()
		if !unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		if testRetrying != nil {
			testRetrying(cl, err)
		}
		if cl != nil {
			cl.ForceMetadataRefresh()
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// parseArgs parses args with fs, allowing flags after positional arguments
// (cohort topic create x --partitions 3), and returns the positional ones,
// each a name or id the command sends as a Kafka string (checkArgLengths).
// A flag error is a usageError (printed once, by main, with a pointer to
// -h); -h prints the usage on fs's output and returns flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, checkArgLengths(fs, pos)
}

// parseFlags is parseArgs without the check of the positional arguments,
// for commands that say first whether they take any (checkNoArgs): a
// stray argument is then refused as such, whatever its length. Flags that
// carry Kafka strings (limitKafkaStrings) are checked here.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				fs.Usage()
				return nil, err
			}
			if long := overlongFlag(fs); long != nil {
				return nil, usageError{long}
			}
			return nil, usageError{fmt.Errorf("%w (see cohort %s -h)", flagError(fs, invalidValueError(fs, err)), fs.Name())}
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if err := checkFlagBounds(fs, func(name string) string { return "--" + name }); err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	warnIgnoredEnv(out, fs)
	return pos, nil
}

// checkArgLengths refuses a positional argument longer than a Kafka string:
// every one is a name or id sent as such, and a longer one cannot be sent
// (the node closes the connection). Given by its length, not repeated.
func checkArgLengths(fs *flag.FlagSet, pos []string) error {
	for i, a := range pos {
		if len(a) > maxKafkaString {
			return usageError{fmt.Errorf("argument %d is %d bytes long: names and ids are sent as Kafka strings, "+
				"which hold at most %d bytes (see cohort %s -h)", i+1, len(a), maxKafkaString, fs.Name())}
		}
	}
	return nil
}

// kafkaStringValue is a flag whose values carry names, ids or values the
// command sends as Kafka strings: Set refuses a value in which one is
// longer than a Kafka string holds, before the flag's own parsing (whose
// errors quote the value), and remembers the length for overlongFlag.
type kafkaStringValue struct {
	flag.Value
	name    string
	parts   func(string) []string // the Kafka strings in a value
	tooLong int                   // length of the refused string; 0: none
}

// errOverlongFlag stops flag parsing at an over-long value; overlongFlag
// says what it was.
var errOverlongFlag = errors.New("longer than a Kafka string")

func (v *kafkaStringValue) Set(s string) error {
	for _, p := range v.parts(s) {
		if len(p) > maxKafkaString {
			v.tooLong = len(p)
			return errOverlongFlag
		}
	}
	return v.Value.Set(s)
}

// limitKafkaStrings marks flags of fs (already defined) whose values are
// sent as Kafka strings: each name maps to how a value splits into them
// (nil: the value is one).
func limitKafkaStrings(fs *flag.FlagSet, flags map[string]func(string) []string) {
	for name, parts := range flags {
		f := fs.Lookup(name)
		if f == nil {
			continue // not a flag of this action
		}
		if parts == nil {
			parts = func(s string) []string { return []string{s} }
		}
		f.Value = &kafkaStringValue{Value: f.Value, name: name, parts: parts}
	}
}

// overlongFlag is the usage error of a flag value kafkaStringValue
// refused, or nil.
func overlongFlag(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(*kafkaStringValue); ok && v.tooLong > 0 && err == nil {
			err = fmt.Errorf("--%s holds a string of %d bytes: names, ids and values are sent as Kafka strings, "+
				"which hold at most %d bytes (see cohort %s -h)", v.name, v.tooLong, maxKafkaString, fs.Name())
		}
	})
	return err
}

// maxKafkaString is the most bytes a string of Kafka's protocol holds.
const maxKafkaString = 0x7fff

// warnIgnoredEnv warns on w of each set COHORT_ variable named after a flag
// of fs that the command does not read: cohort serve takes every flag from
// the environment, the other commands only --bootstrap (and the passwords,
// which are no flags), so $COHORT_TLS or $COHORT_SASL_USERNAME set for them
// would be ignored without a word. The value is never printed.
func warnIgnoredEnv(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "bootstrap" || f.Name == "h" || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok && v != "" {
			fmt.Fprintf(w, "cohort: warning: $%s is not read by cohort %s: give --%s (only cohort serve reads its flags from "+
				"COHORT_ variables; the other commands read $COHORT_BOOTSTRAP and the passwords' $%s and $COHORT_ETCD_PASSWORD)\n",
				name, fs.Name(), f.Name, clientconfig.PasswordEnv)
		}
	})
}
