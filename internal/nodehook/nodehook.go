// Package nodehook lets the tests of other packages set what a node's
// exported configuration deliberately leaves out: package node fills in
// the functions here when it is initialised, so that the settings stay
// unexported there. Nothing outside tests calls them.
package nodehook

import "github.com/cohort-dev/cohort/clock"

// SetClusterClock gives the cluster-mode node started with cc (a
// *node.ClusterConfig) clk as the clock by which it times its etcd lease,
// in place of the wall clock: a test that moves clk decides when the node
// presumes its lease lost, rather than waiting a wall-clock TTL. It is
// set by package node.
var SetClusterClock func(cc any, clk clock.Clock)
