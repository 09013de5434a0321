package main

import (
	"flag"
	"fmt"

	"github.com/cohort-dev/cohort/internal/buildinfo"
)

// version runs "cohort version" (and "cohort --version"): one line naming
// the build (internal/buildinfo), so that two binaries can be told apart.
func version(e env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: cohort version   (or cohort --version)
  prints the module version, the VCS revision and time the binary was built
  from, "modified" when that checkout had uncommitted changes, and the Go
  release it was built with
`)
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkNoArgs("version", pos); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, buildinfo.String())
	return err
}
