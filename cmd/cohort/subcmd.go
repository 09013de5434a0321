package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// anyAction, given to a family's flag builder, asks for every flag of the
// family (to find the action on a command line whose flags come first).
const anyAction = "*"

// family is a command whose actions each have flags of their own (topic
// create|grow|delete, group describe|delete|..., offsets show|reset|delete,
// user set|delete, acl add|list|delete).
type family[T any] struct {
	name    string   // "group"
	actions []string // its actions, in the order of its usage
	// implicit is the action meant when the first argument is none of
	// them ("offsets ID" is "offsets show ID"); "" when there is none.
	implicit string
	// noArgs: no action takes positional arguments (acl); a stray one
	// is refused as such (checkNoArgs), whatever its length.
	noArgs bool
	usage  string // the family's synopsis, for "cohort group -h"
	// build makes the flag set of action (anyAction: every flag of the
	// family; "": the flags every action takes) with a fresh T holding
	// the values; the flag set's Usage prints the action's usage.
	build func(e env, action string) (*flag.FlagSet, T)
}

// parse parses args: the action, the other positional arguments, and the
// flags as the action's own flag set parses them, so that its -h lists only
// its flags and a flag of another action is a usage error. The flags may
// come before the action (cohort group --bootstrap H describe g): a first
// pass with every flag of the family finds it. With no action, or an
// unknown one, action is "" and pos holds the arguments (the caller says
// what is wrong), unless -h asked for the family's usage (flag.ErrHelp).
func (f family[T]) parse(e env, args []string) (action string, pos []string, v T, err error) {
	all, _ := f.build(e, anyAction)
	// Named after the action it most likely is, for its errors: a flag no
	// action of the family takes is reported before the action is known.
	name := f.name
	if i := slices.IndexFunc(args, func(a string) bool { return slices.Contains(f.actions, a) }); i >= 0 {
		name += " " + args[i]
	}
	all.Init(name, flag.ContinueOnError)
	help := all.Bool("h", false, "")
	all.BoolVar(help, "help", false, "")
	all.SetOutput(io.Discard)
	if pos, err = parseFlags(all, args); err != nil {
		return "", nil, v, err
	}
	switch {
	case len(pos) > 0 && slices.Contains(f.actions, pos[0]):
		action = pos[0]
	case len(pos) > 0 && f.implicit != "":
		action = f.implicit
	case *help:
		shared, _ := f.build(e, "")
		fmt.Fprint(e.stderr, f.usage)
		fmt.Fprintf(e.stderr, "flags of every %s command:\n", f.name)
		shared.SetOutput(e.stderr)
		printFlags(shared)
		return "", nil, v, flag.ErrHelp
	case f.noArgs:
		return "", pos, v, nil // the caller says that an action is missing
	default:
		return "", pos, v, checkArgLengths(all, pos)
	}
	fs, v := f.build(e, action)
	if pos, err = parseFlags(fs, args); err != nil {
		return "", nil, v, err
	}
	if action != f.implicit || len(pos) > 0 && pos[0] == action {
		pos = pos[1:]
	}
	if f.noArgs {
		return action, pos, v, checkNoArgs(fs.Name(), pos)
	}
	return action, pos, v, checkArgLengths(fs, pos)
}

// newFlagSet is the flag set of command name ("group describe"), printing
// its errors and usage on e's standard error: usage, then its flags.
func newFlagSet(e env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "flags:")
		printFlags(fs)
	}
	return fs
}

// printFlags lists fs's flags as flag.PrintDefaults does, but spelled
// --name as the docs spell them (Go's flag package takes both).
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(fl *flag.Flag) {
		name, usage := flag.UnquoteUsage(fl)
		var b strings.Builder
		b.WriteString("  --" + fl.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
			if g, ok := fl.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					d = fmt.Sprintf("%q", d)
				}
			}
			fmt.Fprintf(&b, " (default %s)", d)
		}
		fmt.Fprintln(w, b.String())
	})
}

// flagError rewrites the flag package's error for an undefined flag (it
// spells the flag with one dash) as the docs speak of flags.
func flagError(fs *flag.FlagSet, err error) error {
	const undefined = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(err.Error(), undefined); ok {
		return fmt.Errorf("%s: --%s is not one of its flags", fs.Name(), name)
	}
	return err
}
