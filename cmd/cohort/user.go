package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/security/sasl"
)

// SCRAM iteration bounds, Kafka's (and so kadm's): fewer make a weak
// salted password, more only cost the broker time at every login.
const (
	minIterations = 4096
	maxIterations = 16384
)

// The usage of "cohort users" and of each "cohort user" action.
var userUsages = map[string]string{
	"users": `usage: cohort users [NAME...]
  SCRAM credentials: user, mechanism, iterations
`,
	"set": `usage: cohort user set NAME [--mechanism M] [--iterations N] [--password-file F]
  sets NAME's SCRAM password, read from standard input (or F) with one
  trailing newline dropped
`,
	"delete": `usage: cohort user delete NAME [--mechanism M] [--dry-run | --yes]
  deletes NAME's SCRAM credentials; --dry-run shows them and deletes nothing;
  on a terminal it shows them and asks first, unless --yes
`,
}

// userFlags are the flags of one user command.
type userFlags struct {
	fs           *flag.FlagSet
	c            conn
	mechanism    string
	iterations   int
	passwordFile string
	del          deleteFlags
}

func newUserFlags(e env, name, usage string) *userFlags {
	f := &userFlags{fs: newFlagSet(e, name, usage), mechanism: "both"}
	f.c.register(f.fs)
	return f
}

// userFamily is "cohort user set|delete NAME".
var userFamily = family[*userFlags]{
	name:    "user",
	actions: []string{"set", "delete"},
	usage: `usage:
  cohort user set NAME      set NAME's SCRAM password, read from standard input
  cohort user delete NAME   delete NAME's SCRAM credentials
  (cohort users lists them; cohort user ACTION -h: the action's flags)
`,
	build: func(e env, action string) (*flag.FlagSet, *userFlags) {
		f := newUserFlags(e, "user "+action, userUsages[action])
		if action != "" {
			f.fs.StringVar(&f.mechanism, "mechanism", "both", "SCRAM-SHA-256, SCRAM-SHA-512 or both")
		}
		if action == "delete" || action == anyAction {
			f.del.register(f.fs)
		}
		if action == "set" || action == anyAction {
			f.fs.IntVar(&f.iterations, "iterations", sasl.DefaultIterations, fmt.Sprintf("SCRAM iterations of a new password (%d to %d)", minIterations, maxIterations))
			f.fs.StringVar(&f.passwordFile, "password-file", "", "`file` holding the new password, - for standard input (default: standard input)")
		}
		return f.fs, f
	},
}

// users runs "cohort user set|delete NAME" and "cohort users [NAME...]":
// SCRAM credentials through AlterUserScramCredentials and
// DescribeUserScramCredentials. The new password of "user set" comes from
// --password-file or stdin, never from a flag; the client salts and hashes
// it (kadm), so the password itself never leaves this process.
func users(e env, cmd string, args []string) error {
	stdin, out := e.stdin, e.stdout
	var f *userFlags
	var pos []string
	var err error
	action, name := "", ""
	if cmd == "users" {
		f = newUserFlags(e, cmd, userUsages[cmd])
		if pos, err = parseArgs(f.fs, args); err != nil {
			return err
		}
	} else {
		action, pos, f, err = userFamily.parse(e, args)
		if err != nil {
			return err
		}
		if action == "" || len(pos) != 1 || pos[0] == "" {
			return usagef("user: want set|delete NAME")
		}
		name = pos[0]
		if err := f.del.check("user delete"); err != nil {
			return err
		}
	}
	c, iterations, passwordFile := &f.c, &f.iterations, &f.passwordFile
	mechs, err := scramMechanisms(f.mechanism)
	if err != nil {
		return usageError{err}
	}
	var password string
	if action == "set" {
		if *iterations < minIterations || *iterations > maxIterations {
			return usagef("user set: --iterations %d: want %d to %d", *iterations, minIterations, maxIterations)
		}
		src := *passwordFile
		if src == "" {
			src = "-"
		}
		if src == "-" && c.sec.PasswordFile == "-" {
			return usagef("user set: standard input cannot hold both the new password and --sasl-password-file: give one of them in a file")
		}
		if src == "-" && isTerminal(stdin) {
			return errors.New("user set: standard input is a terminal, which would echo the password: pipe it in or use --password-file")
		}
		seen := &stdinSeen{r: stdin}
		in := io.Reader(seen)
		if stdin == nil {
			in = nil // ReadSecret's "no standard input"
		}
		if password, err = clientconfig.ReadSecret(src, in); err != nil {
			if src == "-" && in != nil && seen.empty() {
				return errors.New("user set: no password on standard input (it is empty): pipe the new password in, or use --password-file")
			}
			return fmt.Errorf("user set: new password: %w", err)
		}
		// As for --sasl-password-file: a file others can read warns.
		warnExposed(e.stderr, clientconfig.Config{PasswordFile: src})
	}
	adm, ctx, tw, done, err := c.dial(out)
	if err != nil {
		return err
	}
	defer done()
	switch action {
	case "set":
		fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS\tRESULT")
		var failed error
		for _, m := range mechs {
			rs, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: name, Mechanism: m, Iterations: int32(*iterations), Password: password}})
			if err == nil {
				err = alteredErr(rs, name)
			}
			err = credentialRefusal(err)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", cell(name), m, *iterations, cell(result(err, "set")))
			failed = errors.Join(failed, c.fail("user set "+name+" "+m.String(), err))
		}
		return failed
	case "delete":
		preview := func(w io.Writer, _ bool) (int, error) {
			described, err := adm.DescribeUserSCRAMs(ctx, name)
			if err != nil {
				return 0, c.fail("user delete", err)
			}
			d := described[name]
			if d.Err != nil && !errors.Is(d.Err, kerr.ResourceNotFound) {
				return 0, fmt.Errorf("user delete: %s: %w", name, withMessage(d.Err, d.ErrMessage))
			}
			t := newTable(w)
			fmt.Fprintln(t, "USER\tMECHANISM\tITERATIONS\tTO DELETE")
			n := 0
			for _, ci := range d.CredInfos {
				if slices.Contains(mechs, ci.Mechanism) {
					n++
					fmt.Fprintf(t, "%s\t%s\t%d\tyes\n", cell(name), ci.Mechanism, ci.Iterations)
				}
			}
			if err := t.Flush(); err != nil {
				return 0, err
			}
			if n == 0 {
				return 0, fmt.Errorf("user delete: %s has no SCRAM credentials", name)
			}
			return n, nil
		}
		if ok, err := f.del.gate(e, "user delete", "delete "+cell(name)+"'s credentials?", false, preview); !ok || err != nil {
			return err
		}
		fmt.Fprintln(tw, "USER\tMECHANISM\tRESULT")
		var failed error
		deleted := 0
		for _, m := range mechs {
			rs, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: name, Mechanism: m}}, nil)
			if err == nil {
				err = alteredErr(rs, name)
			}
			err = credentialRefusal(err)
			switch {
			case err == nil:
				deleted++
			case len(mechs) > 1 && errors.Is(err, kerr.ResourceNotFound):
				// "both": a mechanism the user has no password for is
				// not an error, as long as one was deleted.
				fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(name), m, "none")
				continue
			default:
				failed = errors.Join(failed, c.fail("user delete "+name+" "+m.String(), err))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(name), m, cell(result(err, "deleted")))
		}
		if failed == nil && deleted == 0 {
			return fmt.Errorf("user delete: %s has no SCRAM credentials", name)
		}
		return failed
	}
	described, err := adm.DescribeUserSCRAMs(ctx, pos...)
	if err != nil {
		return c.fail("users", err)
	}
	fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
	var failed error
	for _, d := range described.Sorted() {
		switch {
		case errors.Is(d.Err, kerr.ResourceNotFound):
			// A user named that has no credential: an error, as it
			// would be for a group or a topic.
			failed = errors.Join(failed, fmt.Errorf("users: %s has no SCRAM credentials", d.User))
		case d.Err != nil:
			failed = errors.Join(failed, fmt.Errorf("users: %s: %w", d.User, withMessage(d.Err, d.ErrMessage)))
		}
		for _, ci := range d.CredInfos {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", cell(d.User), ci.Mechanism, ci.Iterations)
		}
	}
	return failed
}

// scramMechanisms parses --mechanism.
func scramMechanisms(s string) ([]kadm.ScramMechanism, error) {
	both := []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}
	if strings.EqualFold(s, "both") {
		return both, nil
	}
	for _, m := range both {
		if strings.EqualFold(s, m.String()) {
			return []kadm.ScramMechanism{m}, nil
		}
	}
	return nil, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or both", s)
}

// alteredErr is the result for user in an AlterUserScramCredentials
// answer.
// credentialRefusal says what a CLUSTER_AUTHORIZATION_FAILED answer to a
// credential change means (kadm keeps the code, not the node's message).
func credentialRefusal(err error) error {
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return err
	}
	return fmt.Errorf("%w (changing credentials needs ALTER on the CLUSTER; a node that authenticates no one "+
		"refuses every change: create the first user with cohort serve --bootstrap-user, then connect over SASL)", err)
}

func alteredErr(rs kadm.AlteredUserSCRAMs, user string) error {
	r, ok := rs[user]
	if !ok {
		return fmt.Errorf("no result for user %s", user)
	}
	if r.Err != nil {
		return fmt.Errorf("%s: %w", user, withMessage(r.Err, r.ErrMessage))
	}
	return nil
}

// stdinSeen passes standard input through to ReadSecret and notes what came:
// whether it was nothing but line ends (an empty password), and any read
// error.
type stdinSeen struct {
	r       io.Reader
	n       int
	text    bool
	readErr error // other than io.EOF
}

func (s *stdinSeen) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += n
	s.text = s.text || strings.Trim(string(p[:n]), "\r\n") != ""
	if err != nil && err != io.EOF {
		s.readErr = err
	}
	return n, err
}

// empty reports whether what came holds no password: nothing, or one line
// end.
func (s *stdinSeen) empty() bool { return !s.text && s.n <= 2 && s.readErr == nil }
