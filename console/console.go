// Package console is cohort's read-only web console, served on the node's
// HTTP listener (--http-listen) under /console/: the groups, a page per
// group (members, assignments, committed offsets, the rebalance timeline),
// the catalog's topics and, in cluster mode, the nodes and the coordinator
// partitions each owns.
//
// The console is a Kafka client of its own node: every page is built from
// ListGroups, DescribeGroups, ConsumerGroupDescribe, OffsetFetch and
// Metadata answers, sent over in-memory connections the node serves like
// its SASL listener. When the node authenticates clients, the console asks
// the person for a user name and password (HTTP basic authentication),
// authenticates to the node with them (SCRAM, or PLAIN on a node without
// SCRAM), and therefore shows exactly what that principal's ACLs let it
// describe.
package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/loopback"
	"github.com/cohort-dev/cohort/internal/shellarg"
	"github.com/cohort-dev/cohort/node"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Node is what the console needs of a node (node.Node).
type Node interface {
	// ConsoleListener names the listener the console's connections
	// follow, and whether it is SASL; an error when no listener may serve
	// the console (the page says why).
	ConsoleListener() (name string, sasl bool, err error)
	// ConsolePeerTLS is the TLS configuration to dial other nodes with,
	// nil for plain TCP.
	ConsolePeerTLS() *tls.Config
	ServeInternal(nc net.Conn) error
	SelfAddrs() []string
	// FailedAuthDelay is how long to wait before answering a wrong
	// password (the node's failed-authentication delay, which its
	// in-memory connections leave to the console).
	FailedAuthDelay() time.Duration
	// ConsoleMechanisms are the SASL mechanisms the console listener
	// enables (nil when it is not SASL).
	ConsoleMechanisms() []string
	// ConsoleCredentials names the SCRAM mechanisms (SCRAM-SHA-512,
	// SCRAM-SHA-256) user holds a credential for, looked up in the process.
	ConsoleCredentials(user string) []string
}

// Console serves the pages.
type Console struct {
	n       Node
	cluster func() *ClusterView // nil: not cluster mode
	tmpl    map[string]*template.Template
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
	// logins bounds the SCRAM logins running at once. Each costs a
	// PBKDF2 of the user's iteration count on this node's CPU (the console
	// is the SCRAM client), twice when the first mechanism fails, and anyone
	// who reaches the HTTP listener can ask for them: unbounded, 100
	// parallel password guesses kept both cores of a node busy.
	logins chan struct{}
	// testHookSelfDial, if set, is called as the console opens an
	// in-memory connection to its node (tests).
	testHookSelfDial func()
}

// Register adds the console to mux (node.Config.HTTPHandlers).
func Register(mux *http.ServeMux, n *node.Node) {
	c := New(n, clusterOf(n), slog.Default())
	mux.Handle(Prefix, c)
	mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusFound))
}

// New returns the console of n. cluster, if not nil, describes the
// cluster's nodes and partition owners.
func New(n Node, cluster func() *ClusterView, log *slog.Logger) *Console {
	funcs := template.FuncMap{
		"since": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
		},
		"dur": func(d time.Duration) string {
			if d == 0 {
				return "—"
			}
			return d.Round(time.Millisecond).String()
		},
		"parts": func(ps []int32) string {
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = strconv.Itoa(int(p))
			}
			return strings.Join(s, ",")
		},
		"rate":      func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
		"lower":     strings.ToLower,
		"grouphref": groupHref,
		// shellarg is an id as the last word of a cohort command line
		// the page suggests: quoted so that, pasted into a shell, the
		// line names the group and runs nothing else.
		"shellarg": shellarg.Arg,
		// eventshref links id's page showing its newest n events.
		"eventshref": func(id string, n int) string {
			h := groupHref(id)
			if strings.Contains(h, "?") {
				return h + "&events=" + strconv.Itoa(n)
			}
			return h + "?events=" + strconv.Itoa(n)
		},
		// num writes n with thousands separators (1,953).
		"num": func(n int) string {
			s := strconv.Itoa(n)
			for i := len(s) - 3; i > 0; i -= 3 {
				s = s[:i] + "," + s[i:]
			}
			return s
		},
		"sortlink": func(q groupsQuery, key string) string {
			v := q.values()
			v.Set("sort", key)
			v.Del("desc")
			if q.Sort == key && !q.Desc {
				v.Set("desc", "1")
			}
			return "?" + v.Encode()
		},
		"short": func(s string) string {
			if len(s) > 24 {
				return s[:24] + "…"
			}
			return s
		},
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Console{n: n, cluster: cluster, log: log, now: time.Now, timeout: 10 * time.Second, tmpl: map[string]*template.Template{},
		logins: make(chan struct{}, loginSlots())}
	for _, page := range []string{"groups", "group", "topics", "cluster", "error"} {
		c.tmpl[page] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html"))
	}
	return c
}

// ServeHTTP serves everything under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY") // for browsers without CSP's frame-ancestors
	// The pages show what one person may see: no cache keeps them (the
	// static assets below may be cached).
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, strings.TrimSuffix(Prefix, "/"))
	if name, ok := strings.CutPrefix(path, "/static/"); ok {
		sub, _ := fs.Sub(staticFS, "static")
		// Files only: a directory (static/ itself) would be listed.
		if fi, err := fs.Stat(sub, name); err != nil || fi.IsDir() {
			c.fail(w, r, http.StatusNotFound, "No such file.")
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		http.StripPrefix(Prefix+"static/", http.FileServerFS(sub)).ServeHTTP(w, r)
		return
	}
	_, needAuth, err := c.n.ConsoleListener()
	if err != nil {
		c.fail(w, r, http.StatusForbidden, "The console is not served: "+err.Error()+".")
		return
	}
	local := loopback.Local(r)
	if !needAuth && !local {
		c.fail(w, r, http.StatusForbidden, "The console answers only on a loopback HTTP listener when the node authenticates no one: bind --http-listen to 127.0.0.1 (or ::1), or configure SASL users.")
		return
	}
	var user, pass string
	var mechs []string
	if needAuth {
		mechs = c.n.ConsoleMechanisms()
		if !slices.ContainsFunc(mechs, isPasswordMechanism) {
			c.fail(w, r, http.StatusForbidden, "The console is not served: it takes a user name and password, and this node's SASL listeners accept no password mechanism (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN), only "+strings.Join(mechs, ", ")+". Enable SCRAM (--sasl-mechanisms) for the people using the console.")
			return
		}
		if r.TLS == nil && !local {
			c.fail(w, r, http.StatusForbidden, "The node authenticates clients, and passwords are not taken over plain HTTP on a non-loopback listener: serve the HTTP listener over HTTPS (--http-tls), or bind --http-listen to loopback.")
			return
		}
		var ok bool
		user, pass, ok = r.BasicAuth()
		if !ok || user == "" {
			askAuth(w)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	cl, err := c.client(ctx, r, user, pass, needAuth, mechs)
	if err != nil {
		if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) {
			// The node's failed-authentication delay, waited here with
			// the login slot released (the node does not wait it for
			// the console's connections).
			t := time.NewTimer(c.n.FailedAuthDelay())
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			askAuth(w)
			return
		}
		if errors.Is(err, errLoginsBusy) {
			w.Header().Set("Retry-After", "1")
			c.fail(w, r, http.StatusServiceUnavailable, "Too many console logins at once: try again in a moment.")
			return
		}
		c.fail(w, r, http.StatusBadGateway, "The node did not answer: "+err.Error())
		return
	}
	defer cl.Close()
	d := pageData{User: user, Cluster: c.cluster != nil, Path: r.URL.Path}
	switch {
	case path == "/" || path == "":
		c.groups(ctx, w, r, cl, d)
	case path == "/groups/" || path == "/groups":
		if id := r.URL.Query().Get("id"); id != "" {
			// The link of a group whose id is a dot segment (groupHref).
			c.group(ctx, w, r, cl, d, id)
			return
		}
		// No group id: the list of groups, rather than a DescribeGroups
		// of "" that the node refuses (INVALID_GROUP_ID, once a 502).
		http.Redirect(w, r, Prefix, http.StatusFound)
	case strings.HasPrefix(path, "/groups/"):
		c.group(ctx, w, r, cl, d, strings.TrimPrefix(path, "/groups/"))
	case path == "/topics":
		c.topics(ctx, w, r, cl, d)
	case path == "/cluster" && c.cluster != nil:
		d.Title, d.Body = "Cluster", c.cluster()
		c.render(w, "cluster", http.StatusOK, d)
	default:
		c.fail(w, r, http.StatusNotFound, "No such page.")
	}
}

// groupHref is the link to a group's page: the id escaped as one path
// segment (html/template leaves '/', '?' and '#' of a URL alone). An id
// "." or ".." goes in the query instead: as a path segment, escaped or not
// (browsers read %2E as a dot), it is resolved away and the link opens
// the groups list.
func groupHref(id string) string {
	if id == "." || id == ".." {
		return Prefix + "groups/?id=" + url.QueryEscape(id)
	}
	return Prefix + "groups/" + url.PathEscape(id)
}

func askAuth(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="cohort", charset="UTF-8"`)
	http.Error(w, "authentication required: a SASL user (SCRAM or PLAIN) of this cohort node", http.StatusUnauthorized)
}

// pageData is what every template gets.
type pageData struct {
	Title   string
	User    string
	Cluster bool
	Path    string
	Body    any
}

func (c *Console) render(w http.ResponseWriter, page string, status int, d pageData) {
	var b strings.Builder
	if err := c.tmpl[page].Execute(&b, d); err != nil {
		c.log.Error("console: rendering failed", "page", page, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, "error", status, pageData{Title: http.StatusText(status), Path: r.URL.Path, Body: msg})
}

// client connects to the node as the person using the console: every
// connection kgo opens to this node is an in-memory pipe the node serves;
// other nodes (cluster mode) are dialed over TCP. With auth it logs in with
// user and pass over the enabled mechanisms (enabled), in loginOrder; PLAIN
// is sent only over the in-memory connections and over TLS.
func (c *Console) client(ctx context.Context, r *http.Request, user, pass string, auth bool, enabled []string) (*kgo.Client, error) {
	self := map[string]bool{}
	for _, a := range c.n.SelfAddrs() {
		self[a] = true
	}
	remote := r.RemoteAddr
	peerTLS := c.n.ConsolePeerTLS()
	var mechs []sasl.Mechanism
	if auth {
		mechs = loginOrder(user, pass, c.n.ConsoleCredentials(user), enabled)
	}
	clearPassword := false // the client being tried logs in with PLAIN
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		if host != selfSeed && !self[host] {
			if peerTLS == nil && clearPassword {
				// PLAIN sends the password itself: never over TCP
				// without TLS (the in-memory connections to this
				// node never leave the process).
				return nil, fmt.Errorf("%w (%s)", errPlainOverTCP, host)
			}
			if peerTLS == nil {
				var d net.Dialer
				return d.DialContext(ctx, network, host)
			}
			cfg := peerTLS.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(host)
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, network, host)
		}
		if c.testHookSelfDial != nil {
			c.testHookSelfDial()
		}
		a, b := net.Pipe()
		if err := c.n.ServeInternal(&peerConn{Conn: b, remote: remote}); err != nil {
			a.Close()
			return nil, err
		}
		return a, nil
	}
	if !auth {
		mechs = []sasl.Mechanism{nil}
	} else {
		select {
		case c.logins <- struct{}{}:
			defer func() { <-c.logins }()
		case <-ctx.Done():
			return nil, errLoginsBusy
		}
	}
	var last error
	for _, m := range mechs {
		opts := []kgo.Opt{kgo.SeedBrokers(selfSeed), kgo.Dialer(dial), kgo.ClientID("cohort-console"), kgo.RequestRetries(1),
			kgo.WithLogger(nil), byname.Opt()} // byname: every committed topic is shown, in the catalog or not
		if m != nil {
			opts = append(opts, kgo.SASL(m))
		}
		clearPassword = m != nil && m.Name() == plainName
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		// Authenticate now: a wrong password is a 401, not a broken page.
		if err := cl.Ping(ctx); err != nil {
			cl.Close()
			last = err
			continue
		}
		if m != nil {
			if err := connectSelf(ctx, cl, self); err != nil {
				cl.Close()
				return nil, err
			}
		}
		return cl, nil
	}
	return nil, last
}

// connectSelf opens, and so authenticates, kgo's connection to this node
// under its broker id while the caller holds the login slot. The Ping
// authenticated the seed connection only; kgo sends the page's requests
// over a second one, to the broker the seed named, whose login (another
// PBKDF2) ran after the slot was released, outside the bound on console
// logins. Asked through the seed, Metadata names this node's id without
// another login.
func connectSelf(ctx context.Context, cl *kgo.Client, self map[string]bool) error {
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil
	}
	resp, err := seeds[0].Request(ctx, &kmsg.MetadataRequest{Topics: []kmsg.MetadataRequestTopic{}})
	if err != nil {
		return err
	}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if self[hostPort(b.Host, b.Port)] {
			_, err := cl.Broker(int(b.NodeID)).Request(ctx, kmsg.NewPtrApiVersionsRequest())
			return err
		}
	}
	return nil
}

// scramOrder is the order the console tries the SCRAM mechanisms in for
// user: those the user holds a credential for first (SCRAM-SHA-512 before
// SCRAM-SHA-256), then the others. A right password therefore succeeds at
// the first try, and no failed authentication is counted or logged for a
// user who holds only SCRAM-SHA-256 (each page view of such a user counted
// one SCRAM-SHA-512 failure). Both are still tried, whatever the user
// holds, until one succeeds: a wrong password or an unknown user costs two
// tries either way, so the time taken does not tell whether the user
// exists.
// Only the mechanisms the node enables (enabled) are tried.
func scramOrder(user, pass string, held, enabled []string) []sasl.Mechanism {
	sc := scram.Auth{User: user, Pass: pass}
	order := []sasl.Mechanism{sc.AsSha512Mechanism(), sc.AsSha256Mechanism()}
	if len(held) == 1 && held[0] == order[1].Name() {
		order[0], order[1] = order[1], order[0]
	}
	return slices.DeleteFunc(order, func(m sasl.Mechanism) bool { return !slices.Contains(enabled, m.Name()) })
}

// loginOrder is the order the console tries the node's password
// mechanisms in for user: the SCRAM ones (scramOrder), then PLAIN when the
// node has it, which checks the same stored credentials, so that a user
// whose credential is of a SCRAM mechanism the node does not enable (or a
// node without SCRAM) still logs in. PLAIN comes first for a user who holds
// credentials but none of an enabled SCRAM mechanism: its right password
// then counts no failure. Every mechanism is tried until one succeeds, so a
// wrong password costs as many tries whoever the user is.
func loginOrder(user, pass string, held, enabled []string) []sasl.Mechanism {
	order := scramOrder(user, pass, held, enabled)
	if !slices.Contains(enabled, plainName) {
		return order
	}
	p := plain.Auth{User: user, Pass: pass}.AsMechanism()
	usable := slices.ContainsFunc(held, func(m string) bool { return slices.Contains(enabled, m) && m != plainName })
	if len(held) > 0 && !usable {
		return append([]sasl.Mechanism{p}, order...)
	}
	return append(order, p)
}

const plainName = "PLAIN"

// isPasswordMechanism reports whether mechanism takes a user name and
// password (not OAUTHBEARER's token).
func isPasswordMechanism(mechanism string) bool {
	return mechanism == plainName || strings.HasPrefix(mechanism, "SCRAM-")
}

// errPlainOverTCP: the node has PLAIN but not SCRAM, and the page needs
// another node reached without TLS.
var errPlainOverTCP = errors.New("the node accepts no SCRAM, and the console does not send a PLAIN password to another node over TCP without TLS: enable SCRAM (--sasl-mechanisms) or use SASL_SSL listeners")

// loginSlots is how many console logins may run at once: half the cores,
// at least one (a variable for tests).
var loginSlots = func() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// errLoginsBusy: no login slot freed up within the console's timeout.
var errLoginsBusy = errors.New("too many console logins at once; try again")

// selfSeed is the seed address that always means this node.
const selfSeed = "console.cohort.internal:1"

// peerConn gives an in-memory connection the HTTP client's address, so
// the node's logs and host-based ACLs see who is behind the console.
type peerConn struct {
	net.Conn
	remote string
}

func (p *peerConn) RemoteAddr() net.Addr {
	if ap, err := net.ResolveTCPAddr("tcp", p.remote); err == nil {
		return ap
	}
	return p.Conn.RemoteAddr()
}

func hostPort(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }
