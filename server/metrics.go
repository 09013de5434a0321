package server

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the server's Prometheus collectors. Per-API children are
// resolved once at start-up so the hot path does no label lookups. A nil
// *metrics records nothing.
type metrics struct {
	connections    prometheus.Gauge
	requests       [maxKey]prometheus.Counter
	latency        [maxKey]prometheus.Observer
	protocolErrors *prometheus.CounterVec
	auth           *prometheus.CounterVec
	authz          *authzMetrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "requests_total",
		Help: "Requests answered, by Kafka API.",
	}, []string{"api"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "cohort", Subsystem: "server", Name: "request_duration_seconds",
		Help: "Time from starting to handle a request to writing its response, by Kafka API (parked JoinGroups included).",
		// 50µs .. ~7min: heartbeats are sub-millisecond, parked joins last
		// up to a rebalance timeout.
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 12),
	}, []string{"api"})
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cohort", Subsystem: "server", Name: "connections",
			Help: "Open client connections.",
		}),
		protocolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "server", Name: "protocol_errors_total",
			Help: "Connections closed because of a bad request, by reason.",
		}, []string{"reason"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "server", Name: "authentications_total",
			Help: "Authentication attempts by mechanism (SASL mechanism, or SSL for a client certificate) and result (success, failure).",
		}, []string{"mechanism", "result"}),
	}
	for _, c := range []prometheus.Collector{reqs, lat, m.connections, m.protocolErrors, m.auth} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: registering metrics: %w", err)
		}
	}
	var err error
	if m.authz, err = newAuthzMetrics(reg); err != nil {
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	for _, api := range supported {
		m.requests[api.Key] = reqs.WithLabelValues(api.Name)
		m.latency[api.Key] = lat.WithLabelValues(api.Name)
	}
	return m, nil
}

// observe counts one answered request of API key and its duration.
func (m *metrics) observe(key int16, d time.Duration) {
	if m == nil || key < 0 || int(key) >= maxKey || m.requests[key] == nil {
		return
	}
	m.requests[key].Inc()
	m.latency[key].Observe(d.Seconds())
}

// protocolError counts a connection closed for reason.
func (m *metrics) protocolError(reason string) {
	if m == nil {
		return
	}
	m.protocolErrors.WithLabelValues(reason).Inc()
}

// authResult counts one authentication attempt's outcome by mechanism
// ("SSL" for a TLS client certificate).
func (m *metrics) authResult(mechanism string, ok bool) {
	if m == nil {
		return
	}
	result := "failure"
	if ok {
		result = "success"
	}
	m.auth.WithLabelValues(mechanism, result).Inc()
}
