package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclFlags are the flags of "cohort acl": one ACL to add, or the filter of
// list and delete.
type aclFlags struct {
	principals []string
	hosts      []string
	operations string
	permission string
	topic      string
	group      string
	cluster    bool
	prefixed   bool
	pattern    string
}

func (a *aclFlags) register(fs *flag.FlagSet, action string) {
	fs.Func("principal", "`Type:name` of the principal, such as User:alice (repeatable)", func(s string) error {
		a.principals = append(a.principals, s)
		return nil
	})
	fs.Func("host", "IP `address` the principal connects from, or * for any (repeatable; add: default *)", func(s string) error {
		a.hosts = append(a.hosts, s)
		return nil
	})
	fs.StringVar(&a.operations, "operation", "", "operations, comma-separated: read, write, create, delete, alter, describe, describe_configs, alter_configs, all, ...")
	fs.StringVar(&a.permission, "permission", "", "allow or deny")
	fs.StringVar(&a.topic, "topic", "", "the topic `name` (or prefix with --prefixed)")
	fs.StringVar(&a.group, "group", "", "the group `id` (or prefix with --prefixed)")
	fs.BoolVar(&a.cluster, "cluster", false, "the cluster resource")
	fs.BoolVar(&a.prefixed, "prefixed", false, "the name is a prefix (pattern type PREFIXED)")
	if action != "add" {
		fs.StringVar(&a.pattern, "pattern", "", "pattern type literal, prefixed, any or match (default literal with a resource, any without)")
	}
	limitKafkaStrings(fs, map[string]func(string) []string{"principal": nil, "host": nil, "topic": nil, "group": nil})
}

// aclSpec is an ACL or a filter, parsed from the flags.
type aclSpec struct {
	principals []string
	hosts      []string
	ops        []kmsg.ACLOperation // nil: any (filters)
	permission kmsg.ACLPermissionType
	resource   kmsg.ACLResourceType // ANY: no resource given (list)
	name       string
	pattern    kmsg.ACLResourcePatternType
}

// parse checks the flags for action add, list or delete. As in Kafka's
// kafka-acls, add and delete need a resource; add also a principal, an
// operation and a permission.
func (a *aclFlags) parse(action string) (aclSpec, error) {
	sp := aclSpec{principals: a.principals, hosts: a.hosts}
	adding := action == "add"
	for _, p := range a.principals {
		typ, name, ok := strings.Cut(p, ":")
		if !ok || typ == "" || name == "" {
			return sp, fmt.Errorf("--principal %q: want Type:name, such as User:alice", p)
		}
	}
	for _, h := range a.hosts {
		if h == "" {
			return sp, errors.New("--host: empty host (use * for any)")
		}
		// The server matches an ACL's host against the client's IP
		// address, never a name: an ACL on "localhost" would apply to no
		// one (Kafka stores any string; cohort's CLI refuses it).
		if _, err := netip.ParseAddr(h); err != nil && h != "*" {
			return sp, fmt.Errorf("--host %q: want * or an IPv4 or IPv6 address: ACL hosts are matched against the client's IP address, so a host name never matches", h)
		}
	}
	if adding && len(sp.principals) == 0 {
		return sp, errors.New("acl add: --principal is required")
	}
	if adding && len(sp.hosts) == 0 {
		sp.hosts = []string{"*"}
	}
	if a.operations != "" {
		for _, o := range strings.Split(a.operations, ",") {
			op, err := kmsg.ParseACLOperation(o)
			if err != nil {
				return sp, fmt.Errorf("--operation %q: want read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write, all", o)
			}
			if adding && op == kmsg.ACLOperationAny {
				return sp, errors.New("acl add: operation any only filters; to grant every operation use all")
			}
			sp.ops = append(sp.ops, op)
		}
	} else if adding {
		return sp, errors.New("acl add: --operation is required")
	}
	switch strings.ToLower(a.permission) {
	case "allow":
		sp.permission = kmsg.ACLPermissionTypeAllow
	case "deny":
		sp.permission = kmsg.ACLPermissionTypeDeny
	case "":
		if adding {
			return sp, errors.New("acl add: --permission allow|deny is required")
		}
		sp.permission = kmsg.ACLPermissionTypeAny
	default:
		return sp, fmt.Errorf("--permission %q: want allow or deny", a.permission)
	}
	n := 0
	if a.topic != "" {
		n++
		sp.resource, sp.name = kmsg.ACLResourceTypeTopic, a.topic
	}
	if a.group != "" {
		n++
		sp.resource, sp.name = kmsg.ACLResourceTypeGroup, a.group
	}
	if a.cluster {
		n++
		sp.resource, sp.name = kmsg.ACLResourceTypeCluster, "kafka-cluster"
	}
	switch {
	case n > 1:
		return sp, errors.New("give one resource: --topic, --group or --cluster")
	case n == 0 && action != "list":
		return sp, fmt.Errorf("acl %s: a resource is required: --topic, --group or --cluster", action)
	case n == 0:
		sp.resource = kmsg.ACLResourceTypeAny
	}
	switch {
	case a.prefixed && a.pattern != "" && !strings.EqualFold(a.pattern, "prefixed"):
		return sp, errors.New("--prefixed and --pattern disagree")
	case a.prefixed:
		sp.pattern = kmsg.ACLResourcePatternTypePrefixed
	case a.pattern != "":
		if adding {
			return sp, errors.New("acl add: use --prefixed for a prefix (the pattern of a new ACL is literal or prefixed)")
		}
		p, err := kmsg.ParseACLResourcePatternType(a.pattern)
		if err != nil || p == kmsg.ACLResourcePatternTypeUnknown {
			return sp, fmt.Errorf("--pattern %q: want literal, prefixed, any or match", a.pattern)
		}
		sp.pattern = p
	case n == 0:
		sp.pattern = kmsg.ACLResourcePatternTypeAny
	default:
		sp.pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	if sp.resource == kmsg.ACLResourceTypeCluster && sp.pattern == kmsg.ACLResourcePatternTypePrefixed {
		return sp, errors.New("--cluster cannot be --prefixed")
	}
	return sp, nil
}

// builder turns the spec into kadm's builder: every principal × host ×
// operation, allowed and/or denied as the permission says (both for a
// filter without one).
func (sp aclSpec) builder() *kadm.ACLBuilder {
	b := kadm.NewACLs().ResourcePatternType(sp.pattern).Operations(sp.ops...)
	switch sp.resource {
	case kmsg.ACLResourceTypeTopic:
		b.Topics(sp.name)
	case kmsg.ACLResourceTypeGroup:
		b.Groups(sp.name)
	case kmsg.ACLResourceTypeCluster:
		b.Clusters()
	default:
		b.AnyResource()
	}
	if sp.permission != kmsg.ACLPermissionTypeDeny {
		b.Allow(sp.principals...).AllowHosts(sp.hosts...)
	}
	if sp.permission != kmsg.ACLPermissionTypeAllow {
		b.Deny(sp.principals...).DenyHosts(sp.hosts...)
	}
	return b
}

// aclHelp is what every acl command's usage ends with.
const aclHelp = `
An ACL lets (or forbids) a principal, connecting from a host, an operation
on a resource: a topic or group named exactly or by prefix, or the cluster.
A host is * (any) or an IP address, since the server matches it against the
client's address; a host name would never match.
`

// The usage of each "cohort acl" action.
var aclUsages = map[string]string{
	"add": `usage: cohort acl add --principal User:NAME [--host H] --operation OP[,OP...]
                      --permission allow|deny (--topic T | --group G | --cluster) [--prefixed]
  adds the ACLs: every principal, host and operation given
` + aclHelp,
	"list": `usage: cohort acl list [--principal P] [--host H] [--operation OP] [--permission allow|deny]
                       [--topic T | --group G | --cluster] [--prefixed | --pattern literal|prefixed|any|match]
  lists the ACLs the filter matches (every ACL without one)
` + aclHelp,
	"delete": `usage: cohort acl delete (--topic T | --group G | --cluster) [the filters of list] [--dry-run | --yes]
  deletes every ACL the filter matches; --dry-run lists them and deletes
  nothing; on a terminal it lists them and asks first, unless --yes
` + aclHelp,
}

// aclCmdFlags are the flags of one acl command.
type aclCmdFlags struct {
	c   conn
	af  aclFlags
	del deleteFlags
}

// aclFamily is "cohort acl add|list|delete".
var aclFamily = family[*aclCmdFlags]{
	name:    "acl",
	actions: []string{"add", "list", "delete"},
	noArgs:  true,
	usage: `usage:
  cohort acl add --principal User:NAME --operation OP --permission allow|deny (--topic T | --group G | --cluster)
  cohort acl list [filters]
  cohort acl delete (--topic T | --group G | --cluster) [filters]
  (cohort acl ACTION -h: the action's flags)
` + aclHelp,
	build: func(e env, action string) (*flag.FlagSet, *aclCmdFlags) {
		f := &aclCmdFlags{}
		fs := newFlagSet(e, "acl "+action, aclUsages[action])
		f.c.register(fs)
		if action != "" {
			f.af.register(fs, action)
		}
		if action == "delete" || action == anyAction {
			f.del.register(fs)
		}
		return fs, f
	},
}

// acl runs "cohort acl add|list|delete" (CreateAcls, DescribeAcls,
// DeleteAcls) and prints the ACLs added, found or deleted.
func acl(e env, args []string) error {
	action, _, f, err := aclFamily.parse(e, args)
	if err != nil {
		return err
	}
	if action == "" { // (a stray argument to an action is refused by parse)
		return usagef("acl: want add, list or delete")
	}
	c, af := &f.c, &f.af
	sp, err := af.parse(action)
	if err != nil {
		return usageError{err}
	}
	if err := f.del.check("acl delete"); err != nil {
		return err
	}
	cl, ctx, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	adm := kadm.NewClient(cl)
	what := "acl " + action
	var rows []aclRow
	var fails []aclFailure
	results := 0 // ACLs to add, or filters
	switch action {
	case "add":
		rs, err := adm.CreateACLs(ctx, sp.builder())
		if err != nil {
			return c.fail(what, err)
		}
		results = len(rs)
		for _, r := range rs {
			if r.Err != nil {
				fails = append(fails, aclFailure{aclText(r.Principal, r.Host, r.Permission, r.Operation, r.Type, r.Name, r.Pattern),
					withMessage(r.Err, r.ErrMessage)})
				continue
			}
			rows = append(rows, aclRow{r.Principal, r.Host, r.Operation, r.Permission, r.Type, r.Name, r.Pattern})
		}
	case "list":
		if rows, fails, results, err = describeACLs(ctx, adm, sp); err != nil {
			return c.fail(what, err)
		}
	case "delete":
		// What the filter matches now, shown before it is deleted (a
		// dry run, or a question on a terminal): DescribeAcls takes the
		// same filter as DeleteAcls.
		preview := func(w io.Writer, _ bool) (int, error) {
			rows, fails, results, err := describeACLs(ctx, adm, sp)
			if err == nil {
				err = aclErrors(what, fails, results)
			}
			if err != nil {
				return 0, err
			}
			tw := newTable(w)
			fmt.Fprintln(tw, "TO DELETE")
			n := writeACLs(tw, rows)
			return n, tw.Flush()
		}
		ok, err := f.del.gate(e, what, "delete these ACLs?", false, preview)
		if !ok || err != nil {
			return err
		}
		rs, err := adm.DeleteACLs(ctx, sp.builder())
		if err != nil {
			return c.fail(what, err)
		}
		results = len(rs)
		for _, r := range rs {
			if r.Err != nil {
				fails = append(fails, aclFailure{filterText(r.Principal, r.Host, r.Permission, r.Operation, r.Type, r.Name, r.Pattern),
					withMessage(r.Err, r.ErrMessage)})
			}
			for _, d := range r.Deleted {
				if d.Err != nil {
					fails = append(fails, aclFailure{aclText(d.Principal, d.Host, d.Permission, d.Operation, d.Type, d.Name, d.Pattern),
						withMessage(d.Err, d.ErrMessage)})
					continue
				}
				rows = append(rows, aclRow{d.Principal, d.Host, d.Operation, d.Permission, d.Type, d.Name, d.Pattern})
			}
		}
	}
	failed := aclErrors(what, fails, results)
	if errors.Is(failed, kerr.SecurityDisabled) {
		failed = fmt.Errorf("%w (the node enforces no ACLs: give it a listener that authenticates, or start it with --authorizer)", failed)
	}
	// Print only what was done: a request refused as a whole (no
	// authorizer, no permission) prints nothing, so that a failure never
	// shows ADDED, DELETED or an empty list.
	if failed != nil && len(rows) == 0 {
		return failed
	}
	tw := newTable(e.stdout)
	switch action {
	case "add":
		fmt.Fprintln(tw, "ADDED")
	case "delete":
		fmt.Fprintln(tw, "DELETED")
	}
	writeACLs(tw, rows)
	return errors.Join(tw.Flush(), failed)
}

// describeACLs lists the ACLs that sp, as a filter, matches (DescribeAcls):
// the ACLs, the failures of its filters and how many filters there were.
func describeACLs(ctx context.Context, adm *kadm.Client, sp aclSpec) ([]aclRow, []aclFailure, int, error) {
	rs, err := adm.DescribeACLs(ctx, sp.builder())
	if err != nil {
		return nil, nil, 0, err
	}
	var rows []aclRow
	var fails []aclFailure
	for _, r := range rs {
		if r.Err != nil {
			fails = append(fails, aclFailure{filterText(r.Principal, r.Host, r.Permission, r.Operation, r.Type, r.Name, r.Pattern),
				withMessage(r.Err, r.ErrMessage)})
		}
		for _, d := range r.Described {
			rows = append(rows, aclRow{d.Principal, d.Host, d.Operation, d.Permission, d.Type, d.Name, d.Pattern})
		}
	}
	return rows, fails, len(rs), nil
}

// aclFailure is the error of one ACL (add, or an ACL a delete matched) or
// of one filter (list, delete), and what it names.
type aclFailure struct {
	what string
	err  error
}

// aclErrors is the error of an acl command (what: "acl add") from its
// failures out of results: one line when every result failed alike, as
// when the server refuses the request as a whole; else a line per
// failure, naming its ACL or filter.
func aclErrors(what string, fails []aclFailure, results int) error {
	if len(fails) == 0 {
		return nil
	}
	alike := len(fails) >= results
	for _, f := range fails[1:] {
		alike = alike && f.err.Error() == fails[0].err.Error()
	}
	if alike {
		return fmt.Errorf("%s: %w", what, fails[0].err)
	}
	errs := make([]error, len(fails))
	for i, f := range fails {
		errs[i] = fmt.Errorf("%s %s: %w", what, f.what, f.err)
	}
	return errors.Join(errs...)
}

// aclText names one ACL in an error.
func aclText(principal, host string, perm kmsg.ACLPermissionType, op kmsg.ACLOperation, typ kmsg.ACLResourceType,
	name string, pattern kmsg.ACLResourcePatternType) string {
	return fmt.Sprintf("%s from %s %s %s on %s %s %s", principal, host, perm, op, pattern, typ, name)
}

// filterText names one filter of list or delete in an error; a field the
// filter leaves open is "any".
func filterText(principal, host *string, perm kmsg.ACLPermissionType, op kmsg.ACLOperation, typ kmsg.ACLResourceType,
	name *string, pattern kmsg.ACLResourcePatternType) string {
	anyOr := func(s *string) string {
		if s == nil {
			return "any"
		}
		return *s
	}
	return "filter " + aclText(anyOr(principal), anyOr(host), perm, op, typ, anyOr(name), pattern)
}

// aclRow is one ACL as printed.
type aclRow struct {
	principal, host string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
	typ             kmsg.ACLResourceType
	name            string
	pattern         kmsg.ACLResourcePatternType
}

// writeACLs prints rows as a table, sorted by resource then principal, each
// ACL once (filters of one request may overlap), and returns how many.
func writeACLs(w io.Writer, rows []aclRow) int {
	slices.SortFunc(rows, func(a, b aclRow) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), strings.Compare(a.name, b.name), cmp.Compare(a.pattern, b.pattern),
			strings.Compare(a.principal, b.principal), strings.Compare(a.host, b.host), cmp.Compare(a.op, b.op), cmp.Compare(a.perm, b.perm))
	})
	fmt.Fprintln(w, "RESOURCE\tNAME\tPATTERN\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	n := 0
	for i, r := range rows {
		if i > 0 && r == rows[i-1] {
			continue
		}
		n++
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.typ, cell(r.name), r.pattern, cell(r.principal), cell(r.host), r.op, r.perm)
	}
	return n
}
