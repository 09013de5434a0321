package clients

// TestBareMixedLibraries: one classic group of five different client
// libraries on a bare node, each a workdist worker: sarama, kafka-go,
// confluent-kafka-go, kcat and kafka-python. Their default protocols meet
// in "range" (kafka-python prefers "roundrobin", the others "range"; the
// vote picks range). Then a kafkajs worker asks to join: kafkajs names its
// round robin "RoundRobinAssigner", which none of the others offers, so
// cohort refuses it INCONSISTENT_GROUP_PROTOCOL, as Kafka does, without
// disturbing the group (no new generation). Then kcat is SIGKILLed and the
// other four settle without it once its session expires. At each step
// every worker's printed ownership must be what cohort gave it; at the end
// the journal's checks hold (no partition given to two members in one
// generation, settled generations cover the topic, no commit of an ended
// generation acknowledged), no partition was printed owned by two workers
// at once (checkExclusive), no worker repeated an error line more than
// maxRepeats times (kafka-go's failed joins as leader on the others'
// subscriptions are bounded by kafkaGoLeads instead) and cohort logged no
// warning.

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/server"
)

// mixedTimeout bounds the scenario.
const mixedTimeout = 60 * time.Second

// errInconsistentGroupProtocol is Kafka's INCONSISTENT_GROUP_PROTOCOL.
const errInconsistentGroupProtocol = 23

func TestBareMixedLibraries(t *testing.T) {
	t.Parallel() // with the other parallel tests: its own node
	byName := map[string]workdistClient{}
	for _, c := range workdistClients {
		byName[c.name] = c
	}
	r := newNextRun(t, "cohort", "mixed-bare")
	ctx, cancel := context.WithTimeout(context.Background(), mixedTimeout)
	defer cancel()
	r.ctx = ctx
	b := r.tg.bare
	var mu sync.Mutex
	jsCodes := map[int16]int{}
	b.OnAnswered(func(cl server.Client, req kmsg.Request, resp kmsg.Response) {
		if j, ok := resp.(*kmsg.JoinGroupResponse); ok && cl.ID == "kafkajs" {
			mu.Lock()
			jsCodes[j.ErrorCode]++
			mu.Unlock()
		}
	})

	// kafka-go, elected leader, fails its join on the others'
	// subscriptions (kafkaGoUnreadable): bounded by the answers it had.
	kgLeads := newKafkaGoLeads("kafkago")
	b.OnAnswered(kgLeads.observe)

	var members []*worker
	for _, name := range []string{"sarama", "kafkago", "confluent", "kcat", "kafkapython"} {
		members = append(members, r.start(byName[name], name))
	}
	r.explained[members[1]] = kgLeads.explains
	g := r.settleClassic(members...)
	r.step("five libraries settled")
	if g.Protocol != "range" {
		t.Errorf("the group chose protocol %q, want range (the one every member's default list has first or second)", g.Protocol)
	}
	gen := b.Journal.LastGeneration(r.group)

	js := r.start(byName["kafkajs"], "kafkajs")
	r.noisy[js] = true // refused, it may retry
	err := testbed.WaitFor(ctx, "kafkajs's JoinGroup refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return jsCodes[errInconsistentGroupProtocol] > 0
	})
	if err != nil {
		mu.Lock()
		t.Fatalf("%v (kafkajs's JoinGroup answers by error code: %v)", err, jsCodes)
	}
	// The refusal must leave the group alone: still the five members, in
	// the same generation, each with what it had.
	r.settleClassic(members...)
	if last := b.Journal.LastGeneration(r.group); last != gen {
		t.Errorf("kafkajs's refused join moved the group from generation %d to %d", gen, last)
	}
	r.step("kafkajs refused, the group undisturbed")
	js.p.Close()
	mu.Lock()
	for code, n := range jsCodes {
		if code != errInconsistentGroupProtocol {
			t.Errorf("kafkajs's JoinGroup answered %d times with error code %d, want only INCONSISTENT_GROUP_PROTOCOL", n, code)
		}
	}
	t.Logf("kafkajs's JoinGroup answers by error code: %v; it %v", jsCodes, js.p.err)
	mu.Unlock()

	r.kill(members[3]) // kcat
	rest := append(members[:3:3], members[4])
	r.settleClassic(rest...)
	r.step("kcat's session expired, four settled")
	for _, w := range rest {
		w.p.Close()
	}

	j := b.Journal
	// The journal's checks see the answers cohort gave; checkExclusive
	// sees what the workers did with them, over time, kcat's lines timed
	// as the test read them.
	exclusive := checkExclusive(r.workers, r.killed, bareSession, bareSession/3)
	for _, err := range []error{j.CheckNoOverlap(r.group), j.CheckCommitFencing(r.group), exclusive} {
		if err != nil {
			t.Error(err)
		}
	}
	r.checkErrorLines()
	members[1].mu.Lock()
	if err := kgLeads.check(members[1].errRaw); err != nil {
		t.Error(err)
	}
	kgLeads.mu.Lock()
	t.Logf("kafka-go led %d generations with subscriptions it cannot read, of %v", kgLeads.leads, slices.Sorted(maps.Keys(kgLeads.unreadable)))
	kgLeads.mu.Unlock()
	members[1].mu.Unlock()
	if warns := b.Warnings(); len(warns) > 0 {
		t.Errorf("cohort logged %d warnings or errors, first: %s", len(warns), warns[0])
	}
	if t.Failed() || testing.Verbose() {
		j.Dump(t, r.group)
	}
}
