package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics holds the server's Prometheus collectors (names and labels are
// documented in docs/operations.md). Children whose labels are known at
// start-up (API, listener, mechanism) are resolved once, so the request path
// does no label lookup and no allocation; error-code children are resolved
// on first use and cached. A nil *metrics records nothing.
type metrics struct {
	requests       [maxKey]prometheus.Counter
	latency        [maxKey]prometheus.Observer
	errVec         *prometheus.CounterVec
	errs           [maxKey][numCodes]atomic.Pointer[prometheus.Counter]
	offsets        prometheus.Counter
	protocolErrors *prometheus.CounterVec
	budgetWaits    prometheus.Counter
	auth           *prometheus.CounterVec
	listeners      map[string]*listenerMetrics
	authz          *authzMetrics
	software       *softwareConns
}

// listenerMetrics are one listener's children: its open connections, those
// refused by a limit, and its authentication outcomes by mechanism.
type listenerMetrics struct {
	connections prometheus.Gauge
	refused     map[string]prometheus.Counter // by reason
	mechs       []mechMetrics                 // the enabled mechanisms and SSL
	other       mechMetrics                   // a mechanism the server does not offer
}

type mechMetrics struct {
	name              string
	success, failures prometheus.Counter
	// noReauth counts successes of clients that cannot re-authenticate
	// (nil for SSL and other).
	noReauth prometheus.Counter
}

// numCodes bounds the error codes with a cached child: -1 (UNKNOWN_SERVER_ERROR)
// to numCodes-2; any other code is counted as -1.
const numCodes = 160

// LatencyBuckets are the bounds of the request latency histogram: 1, 2.5
// and 5 times each power of ten from 10µs to 10s, then 30s. They resolve a
// heartbeat answered from memory (tens of µs), a commit waiting for an
// fsync (ms) and a JoinGroup parked for a rebalance (s).
var LatencyBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// register registers c on reg; a collector of the same description already
// there (a second server on one registry) is returned instead.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("server: registering metrics: %w", err)
	}
	return c, nil
}

// newMetrics registers the server's collectors. listeners are the listener
// names and mechs the enabled SASL mechanisms: their children are made up
// front, so a client cannot add series by naming a mechanism.
func newMetrics(reg prometheus.Registerer, listeners []Listener, mechs []string) (*metrics, error) {
	var err error
	m := &metrics{listeners: map[string]*listenerMetrics{}}
	reqs, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "requests_total",
		Help: "Requests answered, by Kafka API.",
	}, []string{"api"}))
	if err != nil {
		return nil, err
	}
	lat, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "cohort", Subsystem: "server", Name: "request_duration_seconds",
		Help:    "Time from starting to handle a request to writing its response, by Kafka API (parked JoinGroups and SyncGroups included).",
		Buckets: LatencyBuckets,
	}, []string{"api"}))
	if err != nil {
		return nil, err
	}
	if m.errVec, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "request_errors_total",
		Help: "Error codes answered, by Kafka API and error: one per response, or per part of a response (a partition of an OffsetCommit, a group of a DescribeGroups), that carries a non-zero code.",
	}, []string{"api", "error"})); err != nil {
		return nil, err
	}
	if m.offsets, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cohort", Name: "offsets_committed_total",
		Help: "Partition offsets committed (answered without error in OffsetCommit).",
	})); err != nil {
		return nil, err
	}
	if m.protocolErrors, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "protocol_errors_total",
		Help: "Connections closed because of a bad request, by reason.",
	}, []string{"reason"})); err != nil {
		return nil, err
	}
	if m.budgetWaits, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "request_budget_waits_total",
		Help: "Large requests (over 64 KiB) that waited for others to be answered before being decoded (--max-inflight-request-bytes).",
	})); err != nil {
		return nil, err
	}
	conns, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "cohort", Subsystem: "server", Name: "connections",
		Help: "Open client connections, by listener.",
	}, []string{"listener"}))
	if err != nil {
		return nil, err
	}
	refused, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "connections_refused_total",
		Help: "Connections closed as soon as accepted because a limit was reached, by listener and reason (max_connections, max_connections_per_ip).",
	}, []string{"listener", "reason"}))
	if err != nil {
		return nil, err
	}
	m.auth, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "authentications_total",
		Help: "Authentication attempts by listener, mechanism (an enabled SASL mechanism, SSL for a client certificate, other for a mechanism not offered, BASIC or SSL for /metrics credentials on listener HTTP) and result (success, failure).",
	}, []string{"listener", "mechanism", "result"}))
	if err != nil {
		return nil, err
	}
	if m.software, err = newSoftwareConns(reg); err != nil {
		return nil, err
	}
	if m.authz, err = newAuthzMetrics(reg); err != nil {
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	for _, reason := range protocolErrorReasons {
		m.protocolErrors.WithLabelValues(reason) // exported at 0 from the start
	}
	for _, api := range supported {
		m.requests[api.Key] = reqs.WithLabelValues(api.Name)
		m.latency[api.Key] = lat.WithLabelValues(api.Name)
	}
	noReauth, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Subsystem: "server", Name: "authentications_without_reauthentication_total",
		Help: "Successful SASL authentications by clients that cannot re-authenticate (SaslAuthenticate v0, or raw tokens after a v0 SaslHandshake): with a session lifetime, their connections are closed when it ends.",
	}, []string{"listener", "mechanism"}))
	if err != nil {
		return nil, err
	}
	mech := func(l, name string) mechMetrics {
		return mechMetrics{name: name, success: m.auth.WithLabelValues(l, name, "success"), failures: m.auth.WithLabelValues(l, name, "failure")}
	}
	for _, l := range listeners {
		lm := &listenerMetrics{connections: conns.WithLabelValues(l.Name), other: mech(l.Name, "other"),
			refused: map[string]prometheus.Counter{
				refusedMaxConnections:      refused.WithLabelValues(l.Name, refusedMaxConnections),
				refusedMaxConnectionsPerIP: refused.WithLabelValues(l.Name, refusedMaxConnectionsPerIP),
			}}
		if l.IsTLS() {
			lm.mechs = append(lm.mechs, mech(l.Name, "SSL"))
		}
		if l.IsSASL() {
			for _, name := range mechs {
				mm := mech(l.Name, name)
				mm.noReauth = noReauth.WithLabelValues(l.Name, name)
				lm.mechs = append(lm.mechs, mm)
			}
		}
		m.listeners[l.Name] = lm
	}
	return m, nil
}

// listener returns the children of the listener called name (nil without
// metrics).
func (m *metrics) listener(name string) *listenerMetrics {
	if m == nil {
		return nil
	}
	return m.listeners[name]
}

// connOpened and connClosed move the listener's open connections.
func (lm *listenerMetrics) connOpened() {
	if lm != nil {
		lm.connections.Inc()
	}
}

// connRefused counts a connection closed by a limit (reason).
func (lm *listenerMetrics) connRefused(reason string) {
	if lm != nil {
		lm.refused[reason].Inc()
	}
}

func (lm *listenerMetrics) connClosed() {
	if lm != nil {
		lm.connections.Dec()
	}
}

// authResult counts one authentication attempt's outcome by mechanism
// ("SSL" for a TLS client certificate).
func (lm *listenerMetrics) authResult(mechanism string, ok bool) {
	if lm == nil {
		return
	}
	mm := &lm.other
	for i := range lm.mechs {
		if lm.mechs[i].name == mechanism {
			mm = &lm.mechs[i]
			break
		}
	}
	if ok {
		mm.success.Inc()
	} else {
		mm.failures.Inc()
	}
}

// noReauth counts a successful first SASL authentication by a client that
// cannot re-authenticate (Kafka's successful-authentication-no-reauth).
func (lm *listenerMetrics) noReauth(mechanism string) {
	if lm == nil {
		return
	}
	for i := range lm.mechs {
		if lm.mechs[i].name == mechanism && lm.mechs[i].noReauth != nil {
			lm.mechs[i].noReauth.Inc()
		}
	}
}

// observe counts one answered request of API key, its duration, the error
// codes of its response and, for an OffsetCommit, the offsets committed.
func (m *metrics) observe(key int16, resp kmsg.Response, d time.Duration) {
	if m == nil || key < 0 || int(key) >= maxKey || m.requests[key] == nil {
		return
	}
	m.requests[key].Inc()
	m.latency[key].Observe(d.Seconds())
	if resp != nil {
		m.countErrors(key, resp)
	}
}

// errorCode counts one non-zero error code in an answer of API key.
func (m *metrics) errorCode(key int16, code int16) {
	if code == 0 {
		return
	}
	i := int(code) + 1
	if i < 0 || i >= numCodes {
		code, i = -1, 0
	}
	slot := &m.errs[key][i]
	c := slot.Load()
	if c == nil {
		name := "UNKNOWN_SERVER_ERROR"
		var ke *kerr.Error
		if errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code {
			name = ke.Message
		}
		child := m.errVec.WithLabelValues(byKey[key].Name, name)
		slot.CompareAndSwap(nil, &child)
		c = slot.Load()
	}
	(*c).Inc()
}

// protocolErrorReasons are the reasons protocolError is called with.
var protocolErrorReasons = []string{"frame_size", "truncated_header", "unknown_api", "unsupported_version",
	"malformed_body", "too_many_entries", "session_expired", "unauthenticated_request", "sasl_token_size", "tls_handshake"}

// budgetWait counts a large request that waited for the request budget.
func (m *metrics) budgetWait() {
	if m != nil {
		m.budgetWaits.Inc()
	}
}

// protocolError counts a connection closed for reason.
func (m *metrics) protocolError(reason string) {
	if m == nil {
		return
	}
	m.protocolErrors.WithLabelValues(reason).Inc()
}
