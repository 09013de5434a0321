package consumer_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// TestUndescribableTopicIsLogged: a consumer whose principal may READ the
// group but not DESCRIBE one of its topics is assigned none of that topic's
// partitions (the Metadata answer for it is TOPIC_AUTHORIZATION_FAILED), as
// before; the leader now says so at Warn, naming the topic. Nothing told the
// application or the operator why the topic was never assigned.
func TestUndescribableTopicIsLogged(t *testing.T) {
	n, adm := membertest.SecureCohort(t, "app", "app-secret-2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, topic := range []string{"allowed", "secret"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatalf("CreateTopic %s: %v", topic, err)
		}
	}
	for _, acl := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:app").Groups("cg").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:app").Topics("allowed").Operations(kadm.OpDescribe),
	} {
		if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, res)
		}
	}
	var logs testlog.Buffer
	got := make(chan []assign.TopicPartitions, 1)
	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{Brokers: []string{n.Addr()}, Group: "cg",
			ClientOpts: []kgo.Opt{kgo.SASL(scram.Auth{User: "app", Pass: "app-secret-2"}.AsSha512Mechanism())},
			Logger:     slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))},
		Topics: []string{"allowed", "secret"},
		Assigned: func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) {
			select {
			case got <- added:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	var added []assign.TopicPartitions
	select {
	case added = <-got:
	case <-ctx.Done():
		t.Fatalf("not assigned; log:\n%s", logs.String())
	}
	if len(added) != 1 || added[0].Topic != "allowed" || len(added[0].Partitions) != 2 {
		t.Fatalf("assigned %v, want both partitions of allowed only", added)
	}
	// The leader (the only member) logged before its SyncGroup.
	if l := logs.String(); !strings.Contains(l, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(l, "topics=[secret]") {
		t.Fatalf("no warning naming the undescribable topic; log:\n%s", l)
	}
}
