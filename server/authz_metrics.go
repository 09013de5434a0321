package server

import "github.com/prometheus/client_golang/prometheus"

// authzMetrics counts what the authorizer refused, by API:
// cohort_server_authorization_denials_total{api}. One refused request, or
// one refused part of a request (a topic of an OffsetCommit, a group of a
// DescribeGroups), counts one; the silent filtering of listings
// (ListGroups, all-topics Metadata) does not count, as Kafka does not log
// it.
type authzMetrics struct {
	denials [maxKey]prometheus.Counter
}

// newAuthzMetrics registers the denial counter on reg, with a child per
// advertised API resolved up front. A counter already registered there
// (a second server on one registry) is shared.
func newAuthzMetrics(reg prometheus.Registerer) (*authzMetrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "authorization_denials_total",
		Help: "Requests, or topics and groups within requests, refused by the authorizer, by Kafka API.",
	}, []string{"api"})
	vec, err := register(reg, vec)
	if err != nil {
		return nil, err
	}
	a := &authzMetrics{}
	for _, api := range supported {
		a.denials[api.Key] = vec.WithLabelValues(api.Name)
	}
	return a, nil
}

// inc counts one denial of API key.
func (a *authzMetrics) inc(key int16) {
	if a == nil || key < 0 || int(key) >= maxKey || a.denials[key] == nil {
		return
	}
	a.denials[key].Inc()
}

// denied counts one denial of API key.
func (m *metrics) denied(key int16) {
	if m == nil {
		return
	}
	m.authz.inc(key)
}

// countDenied counts one denial of API key on the server's metrics (none
// without a Registerer).
func (s *Server) countDenied(key int16) { s.metrics.denied(key) }
