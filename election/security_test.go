package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// TestGroupACLRemovedEndsTheTerm: the writer's principal loses READ on the
// group while it writes. Its next heartbeat is answered
// GROUP_AUTHORIZATION_FAILED: the term's context is cancelled with that
// cause, the candidate stops for good (Err names it) and no longer claims
// the role (Token -1), so it does not go on writing.
func TestGroupACLRemovedEndsTheTerm(t *testing.T) {
	n, adm := membertest.SecureCohort(t, "app", "app-secret-2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	acl := kadm.NewACLs().Allow("User:app").AllowHosts("*").Groups("eg").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	writing := make(chan struct{})
	ended := make(chan error, 1)
	e, err := election.Start(election.Config{Member: member.Config{Brokers: []string{n.Addr()}, Group: "eg",
		SessionTimeout: time.Second, Logger: membertest.Logger(t),
		ClientOpts: []kgo.Opt{kgo.SASL(scram.Auth{User: "app", Pass: "app-secret-2"}.AsSha512Mechanism())}}},
		func(ctx context.Context, _ int32) {
			close(writing)
			<-ctx.Done()
			ended <- context.Cause(ctx)
		})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	select {
	case <-writing:
	case <-ctx.Done():
		t.Fatal("never the writer")
	}
	if res, err := adm.DeleteACLs(ctx, acl); err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %v", err, res)
	}
	select {
	case cause := <-ended:
		if !errors.Is(cause, kerr.GroupAuthorizationFailed) {
			t.Fatalf("term ended with %v, want GROUP_AUTHORIZATION_FAILED", cause)
		}
	case <-ctx.Done():
		t.Fatal("still writing after its group ACL was removed")
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		t.Fatal("candidate still running")
	}
	var fe *member.FatalError
	if err := e.Err(); !errors.As(err, &fe) || !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("Err %v, want a FatalError wrapping GROUP_AUTHORIZATION_FAILED", err)
	}
	if tok := e.Token(); tok != -1 {
		t.Fatalf("Token %d after the candidate stopped, want -1", tok)
	}
}
