package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// deleteFlags are --dry-run and --yes of the commands that delete (topic,
// group, user and acl delete). A delete shows what it would delete and
// asks first when standard input is a terminal; --yes does not ask, and
// without a terminal (a script, a pipe) nothing is asked, so that scripts
// keep working. --dry-run shows and deletes nothing.
type deleteFlags struct{ dryRun, yes bool }

func (d *deleteFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&d.dryRun, "dry-run", false, "show what would be deleted, and delete nothing")
	fs.BoolVar(&d.yes, "yes", false, "do not ask for confirmation (asked only when standard input is a terminal)")
}

func (d deleteFlags) check(cmd string) error {
	if d.dryRun && d.yes {
		return usagef("%s: --dry-run and --yes exclude each other", cmd)
	}
	return nil
}

// errNotConfirmed: the person at the terminal did not say yes.
var errNotConfirmed = errors.New("not confirmed: nothing deleted")

// gate runs preview and decides whether cmd goes on to delete. With
// --dry-run, preview prints on standard output (as JSON when asJSON) and
// gate returns false. When standard input is a terminal and --yes was not
// given, preview prints on standard error, followed by question, and gate
// returns true only for an answer of y or yes; otherwise errNotConfirmed.
// Else (a script) it returns true without a preview. preview returns how
// many things would be deleted: with none, nothing is asked.
func (d deleteFlags) gate(e env, cmd, question string, asJSON bool, preview func(w io.Writer, asJSON bool) (int, error)) (bool, error) {
	switch {
	case d.dryRun:
		if _, err := preview(e.stdout, asJSON); err != nil {
			return false, err
		}
		if !asJSON {
			fmt.Fprintln(e.stdout, "dry run: nothing deleted; run again without --dry-run to delete")
		}
		return false, nil
	case d.yes || !interactive(e.stdin):
		return true, nil
	}
	n, err := preview(e.stderr, false)
	if err != nil || n == 0 {
		return err == nil, err
	}
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, fmt.Errorf("%s: %w", cmd, errNotConfirmed)
}

// interactive reports whether r, standard input, is a terminal, where a
// person can answer a question (a test's reader says so itself).
func interactive(r io.Reader) bool {
	if t, ok := r.(interface{ terminal() bool }); ok {
		return t.terminal()
	}
	return isTerminal(r)
}
