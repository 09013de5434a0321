package member_test

// Scenario files: member/testdata/*.txt drive member.Machines against a
// group.Shard on simulated time (the property tests' simulation, prop_test.go,
// with nothing random: answers take a millisecond and are never lost, and
// nothing happens that the file does not say) and compare what happened with
// the text in the file. The format and the commands are described in
// member/testdata/README.md. To accept new or changed output after
// reviewing the diff:
//
//	go test ./member/ -run TestScenarios -rewrite

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/script"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of member/testdata/*.txt scenario files")

func TestScenarios(t *testing.T) {
	script.RunDir(t, "testdata", *rewrite, "go test ./member/ -run TestScenarios -rewrite", func(t *testing.T) func(string) []string {
		return (&memberScenario{t: t, ids: map[string]string{}, next: map[string]int{}}).run
	})
}

// memberScenario is one file's run: the simulation (created by the first
// command) and the names printed for member ids.
type memberScenario struct {
	t    *testing.T
	s    *sim
	seen int               // trace lines already printed
	ids  map[string]string // member id -> printed name
	next map[string]int    // member name -> ids it had so far
}

func (sc *memberScenario) run(line string) []string {
	fields := strings.Fields(line)
	cmd, a := fields[0], script.ParseArgs(fields[1:])
	var out []string
	if sc.s == nil {
		rec := recPlain
		var rebalance time.Duration
		if cmd == "recipe" {
			var name []string
			for _, f := range fields[1:] {
				if !strings.Contains(f, "=") {
					name = append(name, f)
				}
			}
			a.Use(name...)
			rebalance = a.Dur("rebalance", 0)
			switch strings.Join(name, " ") {
			case "plain":
			case "election":
				rec = recElection
			case "workers":
				rec = recWorkers
			default:
				return []string{fmt.Sprintf("error: unknown recipe %q", strings.Join(fields[1:], " "))}
			}
		}
		sc.s = newScriptedSim(sc.t, rec)
		sc.s.rebalance = rebalance
		if cmd == "recipe" {
			if len(a.Errs) > 0 {
				return []string{"error: " + strings.Join(a.Errs, "; ")}
			}
			return nil
		}
	}
	s := sc.s
	member := func(name string) *simMember {
		for _, sm := range s.ms {
			if sm.name == name {
				return sm
			}
		}
		out = append(out, fmt.Sprintf("error: no member %q", name))
		return nil
	}
	index := func(sm *simMember) int { return slices.Index(s.ms, sm) }
	// name DUR: the member named and a duration.
	nameDur := func() (*simMember, time.Duration) {
		if len(fields) != 3 {
			out = append(out, fmt.Sprintf("error: %s NAME DURATION", cmd))
			return nil, 0
		}
		a.Use(fields[1:]...)
		d, err := time.ParseDuration(fields[2])
		if err != nil {
			out = append(out, "error: "+err.Error())
			return nil, 0
		}
		return member(fields[1]), d
	}
	switch cmd {
	case "recipe":
		out = append(out, "error: recipe must be the first command")
	case "start":
		a.Use(fields[1:]...)
		for _, n := range fields[1:] {
			s.addMember(s.now)
			s.ms[len(s.ms)-1].name = n
		}
	case "advance":
		a.Use(fields[1:]...)
		d, err := time.ParseDuration(strings.Join(fields[1:], ""))
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		s.end = s.now.Add(d)
		s.run()
		s.now = s.end
	case "partition", "freeze", "slow":
		sm, d := nameDur()
		if sm == nil {
			break
		}
		if cmd == "slow" {
			sm.slow = d
			break
		}
		s.fault(fault{at: s.now, kind: cmd, mi: index(sm), d: d})
	case "close", "rejoin":
		a.Use(fields[1:]...)
		if len(fields) != 2 {
			out = append(out, fmt.Sprintf("error: %s NAME", cmd))
			break
		}
		if sm := member(fields[1]); sm != nil {
			s.fault(fault{at: s.now, kind: cmd, mi: index(sm)})
		}
	case "move":
		s.fault(fault{at: s.now, kind: "move"})
	case "state":
		sc.printTrace(&out)
		out = append(out, sc.state()...)
	default:
		return []string{fmt.Sprintf("error: unknown command %q", cmd)}
	}
	if u := a.Unused(); len(u) > 0 {
		out = append(out, fmt.Sprintf("error: unknown arguments %v", u))
	}
	if cmd != "state" {
		sc.printTrace(&out)
	}
	if s.failure != "" {
		out = append(out, "error: property violated: "+sc.rename(s.failure))
		s.failure = ""
	}
	return out
}

// newScriptedSim is the property tests' simulation with no members, no
// faults and nothing random but the ids the coordinator gives.
func newScriptedSim(t *testing.T, r recipe) *sim {
	s := emptySim(t, r, 1)
	s.scripted = true
	return s
}

// printTrace appends the trace lines since the last step, without the
// heartbeats that went through (a stable member sends one every 500 ms) and
// with member ids by name.
func (sc *memberScenario) printTrace(out *[]string) {
	for _, l := range sc.s.trace[sc.seen:] {
		if strings.Contains(l, " -> Heartbeat ") || strings.HasSuffix(l, "<- Heartbeat NONE") {
			continue
		}
		*out = append(*out, sc.rename(strings.TrimLeft(l, " ")))
	}
	sc.seen = len(sc.s.trace)
}

// generatedID matches a member id the coordinator made: the client id, then
// a UUID.
var generatedID = regexp.MustCompile(`([A-Za-z0-9_.]+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// rename prints each generated member id as its member's name, NAME#2 for
// the second id that member was given, and so on.
func (sc *memberScenario) rename(l string) string {
	return generatedID.ReplaceAllStringFunc(l, func(id string) string {
		if n, ok := sc.ids[id]; ok {
			return n
		}
		name := generatedID.FindStringSubmatch(id)[1]
		sc.next[name]++
		n := name
		if k := sc.next[name]; k > 1 {
			n = fmt.Sprintf("%s#%d", name, k)
		}
		sc.ids[id] = n
		return n
	})
}

// state prints what each member holds and what the coordinator says.
func (sc *memberScenario) state() []string {
	s := sc.s
	var out []string
	for _, sm := range s.ms {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:", sm.name)
		switch {
		case !sm.started:
			b.WriteString(" not started")
		case sm.gone:
			b.WriteString(" stopped")
		default:
			g, stable := sm.m.Generation()
			if g.ID < 0 {
				b.WriteString(" no generation")
			} else {
				fmt.Fprintf(&b, " generation %d as %s", g.ID, sc.rename(g.MemberID))
				if !stable {
					b.WriteString(" (rebalancing)")
				}
			}
		}
		switch {
		case len(sm.owned) > 0:
			fmt.Fprintf(&b, ", runs %s", strings.Join(sortedKeys(sm.owned), ","))
		case sm.token >= 0:
			fmt.Fprintf(&b, ", writes with token %d", sm.token)
		}
		if !sm.started || sm.gone {
			out = append(out, b.String())
			continue
		}
		if s.now.Before(sm.frozenUntil) {
			fmt.Fprintf(&b, "; frozen for %v", sm.frozenUntil.Sub(s.now))
		}
		if s.now.Before(sm.partitionUntil) {
			fmt.Fprintf(&b, "; cut off for %v", sm.partitionUntil.Sub(s.now))
		}
		out = append(out, b.String())
	}
	d := s.shard.DescribeGroup("g", 5, false)
	var ms []string
	for _, m := range d.Members {
		ms = append(ms, sc.rename(m.MemberID))
	}
	slices.Sort(ms)
	out = append(out, fmt.Sprintf("coordinator: %s, members %v", d.State, ms))
	return out
}
