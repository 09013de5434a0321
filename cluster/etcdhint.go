package cluster

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// NoUserAdvice is what an operator does when etcd, with authentication
// enabled, refuses a node started without an etcd user.
const NoUserAdvice = "etcd has authentication enabled: give it an etcd user: --etcd-user, with the password in --etcd-password-file or COHORT_ETCD_PASSWORD"

// NoUserHint is NoUserAdvice when err is etcd refusing a client that sent
// no user ("user name is empty"), and "" for any other error. A node gets
// that refusal at start, and while it runs once etcd's authentication is
// turned on: both say the same. Only that refusal: an expired or invalid
// token is something etcd's client renews for a node that has a user, and
// telling that node to get one would mislead.
func NoUserHint(err error) string {
	if errors.Is(err, rpctypes.ErrUserEmpty) {
		return NoUserAdvice
	}
	return ""
}
