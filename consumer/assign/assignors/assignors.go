// Package assignors looks up, by protocol name, every client-side assignor
// cohort ships: those of package assign (range, roundrobin, copartition,
// redundant, rack-aware) and those of package sticky (sticky,
// cooperative-sticky).
//
// assign.ByName cannot list the sticky assignors, because package sticky
// imports package assign. This package imports both, so a program that
// takes the assignor's name from a flag or a configuration file calls
// ByName here and needs no special case. It is a separate package, rather
// than a registration the sticky package would make in an init function, so
// that what a name finds does not depend on which packages the program
// happens to import.
package assignors

import (
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

// ByName returns the assignor announced under the given protocol name, or
// false for a name no assignor of cohort's has. The parameterised ones come
// with assign.ByName's defaults: "copartition" has no co-partitioned sets
// (build it with assign.Copartition to give it some) and "redundant" keeps
// assign.DefaultRedundantReplicas replicas and logs to slog.Default().
func ByName(name string) (assign.Assignor, bool) {
	switch name {
	case sticky.Name:
		return sticky.New(), true
	case sticky.CooperativeName:
		return sticky.NewCooperative(), true
	}
	return assign.ByName(name)
}

// Names lists the protocol names ByName knows: assign.Names(), then the
// sticky assignors'.
func Names() []string {
	return append(assign.Names(), sticky.Name, sticky.CooperativeName)
}
