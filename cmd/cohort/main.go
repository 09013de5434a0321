// Command cohort runs a cohort node: a group coordination service that speaks
// the Kafka wire protocol.
//
//	cohort serve [flags]   run a node (see cohort serve -h)
//	cohort bench [flags]   measure rebalance latency and throughput against
//	                       any Kafka-protocol group coordinator
//	cohort topics|topic|groups|group|offsets ...   admin commands (kadm)
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "bench":
		err = bench(os.Args[2:])
	case "topics", "topic", "groups", "group", "offsets":
		err = admin(os.Args[1], os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "cohort: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cohort:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: cohort <command> [flags]

commands:
  serve     run a cohort node (Kafka-protocol group coordinator)
  bench     benchmark a group coordinator at a bootstrap address
  topics, topic create|grow|delete NAME    the topic catalog
  groups, group describe|delete ID         groups
  offsets ID                               a group's committed offsets

Run 'cohort <command> -h' for the command's flags.
`)
}
