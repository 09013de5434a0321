package server

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientSoftware is what a connection's client said it is in ApiVersions
// v3+ (KIP-511): its library's name and version, as Kafka counts them in its
// connection metrics. Operators read it to find which clients, and which
// versions of them, are connected: the ones to upgrade before a change, or
// the one behind a misbehaving connection.
type clientSoftware struct{ name, version string }

var (
	// unknownSoftware: a connection that has not named its software (yet,
	// or ever: ApiVersions before v3, as kafka-python 2.0.2 sends it), as
	// Kafka labels it.
	unknownSoftware = clientSoftware{"unknown", "unknown"}
	// otherSoftware takes the connections beyond maxSoftwareSeries
	// distinct pairs, or with a name or version over maxSoftwareLabel
	// bytes: any client may name anything before it authenticates, and
	// each pair would be a series of its own.
	otherSoftware = clientSoftware{"other", "other"}
)

const (
	maxSoftwareSeries = 100
	maxSoftwareLabel  = 64
)

// softwareConns is the gauge of open connections by client software. Only
// pairs with open connections are exported: a pair's series goes when its
// last connection closes, so the series at any moment are at most
// maxSoftwareSeries plus unknown and other.
type softwareConns struct {
	vec  *prometheus.GaugeVec
	mu   sync.Mutex
	live map[clientSoftware]int
}

func newSoftwareConns(reg prometheus.Registerer) (*softwareConns, error) {
	vec, err := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "cohort", Subsystem: "server", Name: "client_software_connections",
		Help: "Open client connections by the client software and version they named in ApiVersions v3+ (KIP-511): unknown until then, other beyond 100 distinct pairs or 64-byte labels.",
	}, []string{"client_software_name", "client_software_version"}))
	if err != nil {
		return nil, err
	}
	return &softwareConns{vec: vec, live: map[clientSoftware]int{}}, nil
}

// move counts the connection whose software is *cur (zero: not counted)
// under to instead (zero: no longer counted), and sets *cur to the pair it
// is counted under.
func (s *softwareConns) move(cur *clientSoftware, to clientSoftware) {
	if s == nil || *cur == to {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if to != (clientSoftware{}) && to != unknownSoftware && s.live[to] == 0 &&
		(len(to.name) > maxSoftwareLabel || len(to.version) > maxSoftwareLabel || s.distinct() >= maxSoftwareSeries) {
		to = otherSoftware
	}
	if *cur == to {
		return
	}
	if from := *cur; from != (clientSoftware{}) {
		if s.live[from]--; s.live[from] == 0 {
			delete(s.live, from)
			s.vec.DeleteLabelValues(from.name, from.version)
		} else {
			s.vec.WithLabelValues(from.name, from.version).Dec()
		}
	}
	if to != (clientSoftware{}) {
		s.live[to]++
		s.vec.WithLabelValues(to.name, to.version).Set(float64(s.live[to]))
	}
	*cur = to
}

// distinct counts the named pairs with open connections (unknown and
// other apart).
func (s *softwareConns) distinct() int {
	n := len(s.live)
	for _, k := range [...]clientSoftware{unknownSoftware, otherSoftware} {
		if s.live[k] > 0 {
			n--
		}
	}
	return n
}

// noteSoftware records the client software an ApiVersions v3+ request
// names, if well formed (a malformed one is refused INVALID_REQUEST and
// changes nothing): in the gauge, and for the connection's log lines
// (logger), which name the latest pair (letters, digits, '-' and '.' only,
// so nothing a log reader could mistake for another field), "other" for a
// name or version over maxSoftwareLabel bytes.
func (c *conn) noteSoftware(r *request) {
	req, ok := r.req.(*kmsg.ApiVersionsRequest)
	if !ok || req.Version < 3 || !validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion) {
		return
	}
	sw := clientSoftware{req.ClientSoftwareName, req.ClientSoftwareVersion}
	c.named = sw
	if len(sw.name) > maxSoftwareLabel || len(sw.version) > maxSoftwareLabel {
		c.named = otherSoftware
	}
	if c.s.metrics != nil {
		c.s.metrics.software.move(&c.software, sw)
	}
}

// logger is the connection's logger for a line about to be written: with
// the client software the connection named, if it did. The attributes are
// added per line, not kept in a logger per connection: a logger with them
// bound costs a few hundred bytes, which every idle connection would hold.
// It is for the connection's own goroutine (c.named is its to change).
func (c *conn) logger() *slog.Logger {
	if c.named == (clientSoftware{}) {
		return c.log
	}
	return c.log.With("client_software", c.named.name, "client_software_version", c.named.version)
}
