// Command cohort runs a cohort node: a group coordination service that speaks
// the Kafka wire protocol.
//
//	cohort serve [flags]   run a node (see cohort serve -h)
//	cohort bench [flags]   measure rebalance latency and throughput against
//	                       any Kafka-protocol group coordinator
//	cohort topics|topic|groups|group|offsets ...   admin commands (kadm)
//	cohort user|users ...  SCRAM credentials
//	cohort acl ...         ACLs
//
// Every command that connects to cohort takes --bootstrap and the client
// security flags of package security/clientconfig (--tls, --sasl-*,
// --command-config).
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
	case "user", "users":
		err = users(os.Args[1], os.Args[2:], os.Stdin, os.Stdout)
	case "acl":
		err = acl(os.Args[2:], os.Stdout)
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
  user set|delete NAME, users              SCRAM credentials (password from stdin)
  acl add|list|delete                      ACLs

Commands that connect take --bootstrap host:port and the client security
flags: --tls, --tls-ca-file, --tls-cert-file, --tls-key-file,
--tls-server-name, --sasl-mechanism, --sasl-username, --sasl-password-file
(or $COHORT_SASL_PASSWORD), --oauth-token-file, --command-config FILE (Kafka
client properties). Run 'cohort <command> -h' for the command's flags.
`)
}
