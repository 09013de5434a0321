package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/security/clientconfig"
)

// conn holds the flags of every command that talks to cohort: where it is,
// how long to wait for it, and how to connect (TLS, SASL; see package
// security/clientconfig).
type conn struct {
	bootstrap string
	timeout   time.Duration
	sec       clientconfig.Config
}

func (c *conn) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap", envDefault("bootstrap", "127.0.0.1:9092"), "address of cohort, host:port[,host:port...] (env COHORT_BOOTSTRAP)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "how long to wait for cohort")
	c.sec.RegisterFlags(fs)
}

// dial resolves the security flags and returns an admin client, a context
// bounded by --timeout, a table writer on out, and the function that
// flushes the table and releases the rest.
func (c *conn) dial(out io.Writer) (*kadm.Client, context.Context, *tabwriter.Writer, func(), error) {
	opts, err := c.sec.ResolveOpts()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(strings.Split(c.bootstrap, ",")...))...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	return kadm.NewClient(cl), ctx, tw, func() { tw.Flush(); cancel(); cl.Close() }, nil
}

// parseArgs parses args with fs, allowing flags after positional arguments
// (cohort topic create x --partitions 3), and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	return pos, nil
}

// admin runs the admin subcommands (topics, groups, offsets) against any
// Kafka-protocol address, with franz-go's kadm. out receives the result.
func admin(cmd string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var c conn
	c.register(fs)
	partitions := fs.Int("partitions", 1, "partitions of a created topic (topic create), or the new total (topic grow)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage:
  cohort topics                          list the topic catalog
  cohort topic create NAME --partitions N
  cohort topic grow NAME --partitions N  raise the partition count
  cohort topic delete NAME
  cohort groups                          list groups with state and protocol type
  cohort group describe ID               members, assignments sizes, state, generation protocol
  cohort group delete ID                 delete an empty group and its offsets
  cohort offsets ID                      committed offsets of a group
flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	adm, ctx, tw, done, err := c.dial(out)
	if err != nil {
		return err
	}
	defer done()
	need := func(n int, what string) error {
		if len(pos) != n {
			fs.Usage()
			return fmt.Errorf("%s: want %s", cmd, what)
		}
		return nil
	}
	switch cmd {
	case "topics":
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS")
		for _, t := range topics.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\n", t.Topic, len(t.Partitions))
		}
	case "topic":
		if len(pos) < 2 {
			fs.Usage()
			return errors.New("topic: want create|grow|delete NAME")
		}
		name := pos[1]
		switch pos[0] {
		case "create":
			r, err := adm.CreateTopic(ctx, int32(*partitions), -1, nil, name)
			if err == nil {
				err = r.Err
			}
			if err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			fmt.Fprintf(tw, "created %s with %d partitions\n", name, *partitions)
		case "grow":
			rs, err := adm.UpdatePartitions(ctx, *partitions, name)
			if err == nil {
				err = rs.Error()
			}
			if err != nil {
				return fmt.Errorf("grow %s: %w", name, err)
			}
			fmt.Fprintf(tw, "%s now has %d partitions\n", name, *partitions)
		case "delete":
			rs, err := adm.DeleteTopics(ctx, name)
			if err == nil {
				err = rs.Error()
			}
			if err != nil {
				return fmt.Errorf("delete %s: %w", name, err)
			}
			fmt.Fprintf(tw, "deleted %s\n", name)
		default:
			return fmt.Errorf("topic: unknown action %q", pos[0])
		}
	case "groups":
		gs, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL TYPE")
		for _, g := range gs.Sorted() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
		}
	case "group":
		if len(pos) != 2 {
			fs.Usage()
			return errors.New("group: want describe|delete ID")
		}
		id := pos[1]
		switch pos[0] {
		case "describe":
			ds, err := adm.DescribeGroups(ctx, id)
			if err != nil {
				return err
			}
			d := ds[id]
			if d.Err != nil {
				return fmt.Errorf("describe %s: %w", id, d.Err)
			}
			fmt.Fprintf(tw, "group %s: state %s, protocol type %q, protocol %q\n", d.Group, d.State, d.ProtocolType, d.Protocol)
			fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED")
			ms := append([]kadm.DescribedGroupMember(nil), d.Members...)
			sort.Slice(ms, func(i, j int) bool { return ms[i].MemberID < ms[j].MemberID })
			for _, m := range ms {
				inst := ""
				if m.InstanceID != nil {
					inst = *m.InstanceID
				}
				assigned := "-"
				if raw, ok := m.Assigned.Raw(); ok {
					assigned = fmt.Sprintf("%d bytes", len(raw))
				}
				if ca, ok := m.Assigned.AsConsumer(); ok {
					var parts []string
					for _, t := range ca.Topics {
						ps := make([]string, len(t.Partitions))
						for i, p := range t.Partitions {
							ps[i] = strconv.Itoa(int(p))
						}
						parts = append(parts, t.Topic+":"+strings.Join(ps, ","))
					}
					assigned = strings.Join(parts, " ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, assigned)
			}
		case "delete":
			rs, err := adm.DeleteGroups(ctx, id)
			if err != nil {
				return err
			}
			if r := rs[id]; r.Err != nil {
				return fmt.Errorf("delete %s: %w", id, r.Err)
			}
			fmt.Fprintf(tw, "deleted group %s\n", id)
		default:
			return fmt.Errorf("group: unknown action %q", pos[0])
		}
	case "offsets":
		if err := need(1, "a group id"); err != nil {
			return err
		}
		os, err := adm.FetchOffsets(ctx, pos[0])
		if err == nil {
			err = os.Error()
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET\tMETADATA")
		for _, o := range os.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", o.Topic, o.Partition, o.At, o.Metadata)
		}
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}
