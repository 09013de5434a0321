package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupConfigJSON is one config of "cohort group config".
type groupConfigJSON struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // group, node or default
}

// stringsFlag is a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// groupConfigCmd shows a consumer group's configs and, with --set and
// --delete, changes them first (IncrementalAlterConfigs on the GROUP
// resource: the node checks the result as a whole and refuses it all or
// applies it all).
func groupConfigCmd(e env, f *cmdFlags, id string, sets, dels []string) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	if len(sets) > 0 || len(dels) > 0 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, id
		for _, s := range sets {
			name, value, ok := strings.Cut(s, "=")
			if !ok || name == "" {
				return usagef("group config: --set wants NAME=VALUE, not %q", s)
			}
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = name, kmsg.StringPtr(value)
			rr.Configs = append(rr.Configs, c)
		}
		for _, name := range dels {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op = name, kmsg.IncrementalAlterConfigOpDelete
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = oneResource(len(resp.Resources), func() (int16, *string) { return resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage })
		}
		if err != nil {
			return fmt.Errorf("group config %s: %w", id, err)
		}
	}
	configs, err := describeGroupConfigs(ctx, cl, id)
	if err != nil {
		return fmt.Errorf("group config %s: %w", id, err)
	}
	list := []groupConfigJSON{}
	for _, c := range configs {
		v := ""
		if c.Value != nil {
			v = *c.Value
		}
		list = append(list, groupConfigJSON{Name: c.Name, Value: v, Source: groupConfigSource(c.Source)})
	}
	if f.o.json() {
		return writeJSON(e.stdout, map[string]any{"group": id, "configs": list})
	}
	if len(list) == 0 {
		return errors.New("group config " + id + ": the node keeps no group configs (an older cohort, or not cohort)")
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "NAME\tVALUE\tSOURCE")
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(c.Name), cell(c.Value), c.Source)
	}
	return tw.Flush()
}

// describeGroupConfigs asks cl (a client, which sends it to any node, or
// one node) for the configs of group id (DescribeConfigs on its GROUP
// resource): those named, or every one the node keeps.
func describeGroupConfigs(ctx context.Context, cl kmsg.Requestor, id string, names ...string) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, id, names
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = oneResource(len(resp.Resources), func() (int16, *string) { return resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage })
	}
	if err != nil {
		return nil, err
	}
	return resp.Resources[0].Configs, nil
}

// groupConfigSource says where a group config's value comes from: the
// group's own setting ("group"), the node's default for it ("default", at
// Kafka's default) or a cohort serve flag ("node").
func groupConfigSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceGroupConfig:
		return "group"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return "node"
}

// oneResource is the error of an answer about one config resource: n
// resources answered, the one's code and message.
func oneResource(n int, first func() (int16, *string)) error {
	if n != 1 {
		return fmt.Errorf("%d resources answered, want 1", n)
	}
	code, msg := first()
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil {
		err = withMessage(err, *msg)
	}
	return err
}

// listConfiguredGroups prints the groups that have settings of their own
// (ListConfigResources v1, GROUP).
func listConfiguredGroups(e env, f *cmdFlags) error {
	cl, ctx, done, err := f.c.open()
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrListConfigResourcesRequest()
	req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("group config --list: %w", err)
	}
	groups := []string{}
	for _, r := range resp.ConfigResources {
		if r.Type == int8(kmsg.ConfigResourceTypeGroupConfig) {
			groups = append(groups, r.Name)
		}
	}
	if f.o.json() {
		return writeJSON(e.stdout, map[string]any{"groups": groups})
	}
	tw := newTable(e.stdout)
	fmt.Fprintln(tw, "GROUP")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\n", cell(g))
	}
	return tw.Flush()
}
