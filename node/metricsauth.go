package node

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
)

// metricsAuthListener and metricsAuthMechanism label /metrics logins in
// cohort_server_authentications_total.
const (
	metricsAuthListener  = "HTTP"
	metricsAuthMechanism = "BASIC"
)

// requireMetricsAuth wraps the /metrics handler (Config.MetricsAuth): a
// scrape must carry HTTP basic credentials of a user of the node's
// credential store, checked as a PLAIN login is (the password salted with
// the user's stored SCRAM salt and iterations, its stored key compared; an
// unknown user costs the same; the checks share PLAIN's bound on
// concurrent PBKDF2, and like a PLAIN login a check still waiting for one
// is dropped when its client hangs up or the authentication timeout passes,
// answered 503), and that user must be allowed DESCRIBE on the
// cluster resource (kafka-cluster) by the node's ACLs, as Kafka's
// DescribeCluster asks, or be a super user. A wrong password is answered
// 401 after the failed-authentication delay; a user without the ACL gets
// 403.
//
// Over HTTPS on a node with client CAs (--tls-client-ca-file), a scraper
// may instead present a client certificate those CAs verify: its principal
// is the one the SSL listener would give it (--tls-principal-rules), and
// the same ACL applies.
func (n *Node) requireMetricsAuth(next http.Handler) http.Handler {
	delay, timeout := server.DefaultFailedAuthDelay, server.DefaultAuthTimeout
	var rules *principal.Rules
	if sc := n.cfg.Security; sc != nil {
		delay = server.EffectiveFailedAuthDelay(sc.FailedAuthDelay)
		if sc.AuthTimeout > 0 {
			timeout = sc.AuthTimeout
		}
		rules = sc.PrincipalRules
	}
	plain := sasl.NewPlain(n.auth)
	authorized := func(w http.ResponseWriter, r *http.Request, who, host string) {
		if !n.auth.Authorize(who, host, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			writeText(w, http.StatusForbidden, "forbidden: "+who+" may not DESCRIBE the cluster (kafka-cluster)")
			return
		}
		next.ServeHTTP(w, r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			// Verified by the handshake (VerifyClientCertIfGiven).
			who, err := principal.FromCertificate(r.TLS.PeerCertificates[0], rules)
			if err != nil {
				n.srv.ExternalAuthentication(metricsAuthListener, "SSL", false, "remote", r.RemoteAddr, "reason", err.Error())
				writeText(w, http.StatusForbidden, "forbidden: the client certificate maps to no principal")
				return
			}
			n.srv.ExternalAuthentication(metricsAuthListener, "SSL", true)
			authorized(w, r, who, host)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok || user == "" || pass == "" {
			askMetricsAuth(w)
			return
		}
		sess := plain.Start()
		msg := make([]byte, 0, 2+len(user)+len(pass))
		msg = append(append(append(append(msg, 0), user...), 0), pass...)
		// Given up, as a Kafka listener's PLAIN login is, when the client
		// leaves (a connection closed, an HTTP/2 stream reset: the handler
		// runs on) or the authentication timeout passes before a slot frees
		// up: otherwise a burst of scrapes that hang up at once queues
		// PBKDF2 work no one waits for, and PLAIN logins wait behind it.
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		_, _, err = sess.(sasl.ContextStepper).StepContext(ctx, msg)
		givenUp := err != nil && ctx.Err() != nil
		cancel()
		clear(msg)
		if givenUp {
			n.srv.ExternalAuthentication(metricsAuthListener, metricsAuthMechanism, false,
				"remote", r.RemoteAddr, "reason", err.Error())
			w.Header().Set("Retry-After", "1")
			writeText(w, http.StatusServiceUnavailable, "too many logins at once: try again in a moment")
			return
		}
		if err != nil {
			n.srv.ExternalAuthentication(metricsAuthListener, metricsAuthMechanism, false,
				"remote", r.RemoteAddr, "reason", err.Error())
			time.Sleep(delay)
			askMetricsAuth(w)
			return
		}
		n.srv.ExternalAuthentication(metricsAuthListener, metricsAuthMechanism, true)
		authorized(w, r, sess.Principal(), host)
	})
}

func askMetricsAuth(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="cohort metrics", charset="UTF-8"`)
	writeText(w, http.StatusUnauthorized, "authentication required: a user of this cohort node allowed DESCRIBE on the cluster")
}
