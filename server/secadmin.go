package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// Errors a SecurityAdmin returns (wrapped, with a message that names no
// secret) for the handlers to answer with Kafka's codes; a malformed ACL
// binding or filter is acl.ErrInvalid (INVALID_REQUEST). They live here,
// beside the SecurityAdmin contract, because implementations import this
// package.
var (
	// ErrAdminNotFound: deleting a credential that does not exist
	// (RESOURCE_NOT_FOUND).
	ErrAdminNotFound = errors.New("resource not found")
	// ErrAdminDuplicate: a user named more than once in one request
	// (DUPLICATE_RESOURCE).
	ErrAdminDuplicate = errors.New("a user credential cannot be altered twice in the same request")
	// ErrUnacceptableCredential: an empty user name, iterations outside
	// [sasl.MinIterations, sasl.MaxIterations], or a malformed salt or
	// salted password (UNACCEPTABLE_CREDENTIAL).
	ErrUnacceptableCredential = errors.New("unacceptable credential")
	// ErrUnsupportedMechanism: not SCRAM-SHA-256 or SCRAM-SHA-512
	// (UNSUPPORTED_SASL_MECHANISM).
	ErrUnsupportedMechanism = errors.New("unknown SCRAM mechanism")
	// ErrAdminStorage: the change could not be made durable; nothing of it
	// is visible (KAFKA_STORAGE_ERROR, which clients retry).
	ErrAdminStorage = errors.New("security state not stored")
)

// kafkaError is an error the handlers answer with its own Kafka code.
type kafkaError int16

func (e kafkaError) Error() string {
	if m := errorMessage(int16(e)); m != nil {
		return *m
	}
	return fmt.Sprintf("kafka error %d", int16(e))
}

// explainedError is a Kafka error code answered with cohort's own message.
type explainedError struct {
	code int16
	msg  string
}

func (e explainedError) Error() string { return e.msg }

// errAnonymousCredentials refuses a credential change from a client that
// authenticated no one on a node without an authorizer (see refusal).
var errAnonymousCredentials = explainedError{kerr.ClusterAuthorizationFailed.Code,
	"this node authenticates no one and enforces no ACLs, so SCRAM credentials cannot be changed through it " +
		"(anyone could set them); create the first user with --bootstrap-user, then change credentials over SASL"}

// adminErrorCode maps a SecurityAdmin error (or a kafkaError) to a Kafka
// code and message.
func adminErrorCode(err error) (int16, *string) {
	var ke kafkaError
	var ee explainedError
	switch {
	case err == nil:
		return errNone, nil
	case errors.As(err, &ke):
		return int16(ke), errorMessage(int16(ke))
	case errors.As(err, &ee):
		return ee.code, kmsg.StringPtr(ee.msg)
	}
	code := kerr.UnknownServerError.Code
	switch {
	case errors.Is(err, acl.ErrInvalid):
		code = kerr.InvalidRequest.Code
	case errors.Is(err, ErrAdminNotFound):
		code = kerr.ResourceNotFound.Code
	case errors.Is(err, ErrAdminDuplicate):
		code = kerr.DuplicateResource.Code
	case errors.Is(err, ErrUnacceptableCredential):
		code = kerr.UnacceptableCredential.Code
	case errors.Is(err, ErrUnsupportedMechanism):
		code = kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, ErrAdminStorage):
		code = kerr.KafkaStorageError.Code
	}
	return code, kmsg.StringPtr(err.Error())
}

// securityAdmin returns the configured SecurityAdmin, or nil.
func (s *Server) securityAdmin() SecurityAdmin {
	if s.cfg.Security == nil {
		return nil
	}
	return s.cfg.Security.Admin
}

// refusal is why a security admin request (API key) may not proceed:
// CLUSTER_AUTHORIZATION_FAILED when c lacks op on the CLUSTER resource
// (the five APIs need ALTER to change, DESCRIBE to read, as in Kafka; the
// denial is counted and logged like any other), else SECURITY_DISABLED
// when there is no SecurityAdmin (Kafka checks the authorization first), or,
// for the three ACL APIs, no authorizer: as in Kafka, ACLs are managed only
// where they are enforced (otherwise any client of an open node could store
// ACLs, and grant itself rights, that the authorizer would honour once
// turned on). The SCRAM APIs work without an authorizer, as in Kafka,
// except that changing credentials needs an authenticated client there
// (CLUSTER_AUTHORIZATION_FAILED, errAnonymousCredentials): Kafka lets
// anyone, so any client of an open node could set the password of a user
// the operator later names a super user (and --bootstrap-user keeps a
// credential that exists). nil when it may.
func (s *Server) refusal(c Client, key int16, op acl.Operation) error {
	switch {
	case s.authz != nil && !s.authorize(c, key, op, acl.ResourceCluster, acl.ClusterName):
		return kafkaError(kerr.ClusterAuthorizationFailed.Code)
	case s.securityAdmin() == nil:
		return kafkaError(kerr.SecurityDisabled.Code)
	case s.authz == nil && (key == keyDescribeACLs || key == keyCreateACLs || key == keyDeleteACLs):
		return kafkaError(kerr.SecurityDisabled.Code)
	case s.authz == nil && key == keyAlterSCRAM && c.Principal == Anonymous:
		return errAnonymousCredentials
	}
	return nil
}

// refused returns n copies of err.
func refused(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// errAt is errs[i], nil beyond its end.
func errAt(errs []error, i int) error {
	if i < len(errs) {
		return errs[i]
	}
	return nil
}

// aclFilter is the filter of DescribeAcls and of each DeleteAcls filter
// (the codes are Kafka's on both sides).
func aclFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	return acl.Filter{ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
}

// describeACLs answers DescribeAcls (CLUSTER DESCRIBE): the bindings
// matching the filter, grouped by resource pattern. Errors are top-level.
func (s *Server) describeACLs(c Client, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := aclFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host,
		req.Operation, req.PermissionType)
	err := s.refusal(c, keyDescribeACLs, acl.OpDescribe)
	if err == nil {
		err = f.Validate()
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminErrorCode(err)
		return resp
	}
	// One resource per pattern, in the order the admin listed them.
	type pattern struct {
		rt   acl.ResourceType
		name string
		pt   acl.PatternType
	}
	at := map[pattern]int{}
	for _, b := range s.securityAdmin().ACLs(f) {
		p := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType = kmsg.ACLResourceType(b.ResourceType)
			r.ResourceName = b.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			i = len(resp.Resources)
			at[p] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}

// createACLs answers CreateAcls (CLUSTER ALTER) with one result per
// creation, in order. Creating a binding that exists succeeds.
func (s *Server) createACLs(ctx context.Context, c Client, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bs := make([]acl.Binding, len(req.Creations))
	for i, cr := range req.Creations {
		bs[i] = acl.Binding{
			ResourceType: acl.ResourceType(cr.ResourceType),
			ResourceName: cr.ResourceName,
			PatternType:  acl.PatternType(cr.ResourcePatternType),
			Principal:    cr.Principal,
			Host:         cr.Host,
			Operation:    acl.Operation(cr.Operation),
			Permission:   acl.Permission(cr.PermissionType),
		}
	}
	var errs []error
	if err := s.refusal(c, keyCreateACLs, acl.OpAlter); err != nil {
		errs = refused(err, len(bs))
	} else {
		errs = s.securityAdmin().CreateACLs(ctx, bs)
	}
	for i, b := range bs {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = adminErrorCode(errAt(errs, i))
		if r.ErrorCode == errNone {
			s.log.Info("ACL created", "acl", b.String(), "by", c.Principal, "host", c.Host)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// deleteACLs answers DeleteAcls (CLUSTER ALTER) with, per filter, the
// bindings it deleted.
func (s *Server) deleteACLs(ctx context.Context, c Client, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	fs := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		fs[i] = aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	var deleted [][]acl.Binding
	var errs []error
	if err := s.refusal(c, keyDeleteACLs, acl.OpAlter); err != nil {
		errs = refused(err, len(fs))
	} else {
		deleted, errs = s.securityAdmin().DeleteACLs(ctx, fs)
	}
	for i := range fs {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = adminErrorCode(errAt(errs, i))
		if r.ErrorCode == errNone && i < len(deleted) {
			for _, b := range deleted[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType = kmsg.ACLResourceType(b.ResourceType)
				m.ResourceName = b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				r.MatchingACLs = append(r.MatchingACLs, m)
				s.log.Info("ACL deleted", "acl", b.String(), "by", c.Principal, "host", c.Host)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// SCRAM mechanism codes of the SCRAM credential APIs (Kafka's
// ScramMechanism types).
const (
	scramCodeSHA256 int8 = 1
	scramCodeSHA512 int8 = 2
)

// scramMechanismName is the mechanism of a wire code; "" for an unknown
// code, which the SecurityAdmin rejects with ErrUnsupportedMechanism (so
// that Kafka's order of checks, duplicates before mechanisms, holds).
func scramMechanismName(code int8) string {
	switch code {
	case scramCodeSHA256:
		return sasl.ScramSHA256
	case scramCodeSHA512:
		return sasl.ScramSHA512
	}
	return ""
}

func scramMechanismCode(name string) int8 {
	switch name {
	case sasl.ScramSHA256:
		return scramCodeSHA256
	case sasl.ScramSHA512:
		return scramCodeSHA512
	}
	return 0 // Kafka's UNKNOWN
}

// describeUserSCRAMCredentials answers DescribeUserScramCredentials
// (CLUSTER DESCRIBE): for each named user (every user when none is named)
// its mechanisms and iteration counts, never a salt or key. As Kafka does,
// a user named twice gets one DUPLICATE_RESOURCE result and an unknown user
// RESOURCE_NOT_FOUND. A refused request has the error top-level and on
// one result per named user (Kafka leaves those results' names empty;
// cohort fills them in).
func (s *Server) describeUserSCRAMCredentials(c Client, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := s.refusal(c, keyDescribeSCRAM, acl.OpDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminErrorCode(err)
		for _, u := range req.Users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u.Name, resp.ErrorCode, resp.ErrorMessage
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	var names []string // nil: every user
	count := map[string]int{}
	for _, u := range req.Users {
		if count[u.Name] == 0 {
			names = append(names, u.Name)
		}
		count[u.Name]++
	}
	found := s.securityAdmin().Users(names)
	if len(req.Users) == 0 {
		for u := range found {
			names = append(names, u)
		}
		slices.Sort(names)
	}
	for _, u := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		creds, ok := found[u]
		switch {
		case count[u] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case !ok || len(creds) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		default:
			for _, cr := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramMechanismCode(cr.Mechanism), int32(cr.Iterations)
				r.CredentialInfos = append(r.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// alterUserSCRAMCredentials answers AlterUserScramCredentials (CLUSTER
// ALTER) with one result per user named, deletions' users first, each in
// request order (Kafka's order is a hash map's, or sorted names when it
// refuses the request).
func (s *Server) alterUserSCRAMCredentials(ctx context.Context, c Client, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	seen := map[string]int{} // user -> index in users
	note := func(u string) {
		if _, ok := seen[u]; !ok {
			seen[u] = len(users)
			users = append(users, u)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name)
	}
	for _, u := range req.Upsertions {
		note(u.Name)
	}
	ups := make([]UserUpsert, len(req.Upsertions))
	for i, u := range req.Upsertions {
		ups[i] = UserUpsert{User: u.Name, Mechanism: scramMechanismName(u.Mechanism), Iterations: int(u.Iterations),
			Salt: u.Salt, SaltedPassword: u.SaltedPassword}
	}
	dels := make([]UserDeletion, len(req.Deletions))
	for i, d := range req.Deletions {
		dels[i] = UserDeletion{User: d.Name, Mechanism: scramMechanismName(d.Mechanism)}
	}
	var errs []error
	if err := s.refusal(c, keyAlterSCRAM, acl.OpAlter); err != nil {
		errs = refused(err, len(ups)+len(dels))
	} else {
		errs = s.securityAdmin().AlterUsers(ctx, ups, dels)
	}
	// A user's result is the first error of its changes.
	userErr := make([]error, len(users))
	for i, u := range ups {
		if err := errAt(errs, i); err != nil && userErr[seen[u.User]] == nil {
			userErr[seen[u.User]] = err
		}
	}
	for i, d := range dels {
		if err := errAt(errs, len(ups)+i); err != nil && userErr[seen[d.User]] == nil {
			userErr[seen[d.User]] = err
		}
	}
	for i, u := range users {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = u
		r.ErrorCode, r.ErrorMessage = adminErrorCode(userErr[i])
		resp.Results = append(resp.Results, r)
	}
	for _, d := range dels {
		if userErr[seen[d.User]] == nil {
			s.log.Info("SCRAM credential deleted", "user", d.User, "mechanism", d.Mechanism, "by", c.Principal, "host", c.Host)
		}
	}
	for _, u := range ups {
		if userErr[seen[u.User]] == nil {
			s.log.Info("SCRAM credential set", "user", u.User, "mechanism", u.Mechanism, "iterations", u.Iterations,
				"by", c.Principal, "host", c.Host)
		}
	}
	return resp
}
