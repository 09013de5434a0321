package testport

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// socket is one line of /proc/net/tcp or tcp6.
type socket struct {
	local, remote string
	state         string
	inode         string
}

// tcpStates names the states of /proc/net/tcp (include/net/tcp_states.h).
var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
	"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// sockets returns the TCP sockets (IPv4 and IPv6) whose local port is port.
func sockets(port int) ([]socket, error) {
	var out []socket
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			if f == "/proc/net/tcp6" && os.IsNotExist(err) {
				continue // no IPv6 on this machine
			}
			return nil, err
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			local, lport, ok := procAddr(fields[1])
			if !ok || lport != port {
				continue
			}
			remote, rport, _ := procAddr(fields[2])
			state := tcpStates[fields[3]]
			if state == "" {
				state = "state " + fields[3]
			}
			out = append(out, socket{
				local:  net.JoinHostPort(local, strconv.Itoa(lport)),
				remote: net.JoinHostPort(remote, strconv.Itoa(rport)),
				state:  state,
				inode:  fields[9],
			})
		}
		err = sc.Err()
		file.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// procAddr decodes an address of /proc/net/tcp: the IP as 32-bit words in
// the machine's byte order, in hex, a colon, the port in hex.
func procAddr(s string) (string, int, bool) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, herr := hex.DecodeString(h)
	if !ok || err != nil || herr != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", 0, false
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return ip.String(), int(port), true
}

// holder is a process holding a socket.
type holder struct {
	pid  int
	comm string
}

func (h holder) String() string { return fmt.Sprintf("pid %d (%s)", h.pid, h.comm) }

// owners maps socket inodes to the processes whose open files hold them,
// looking at every process this user may look into.
func owners(inodes map[string]bool) map[string][]holder {
	out := map[string][]holder{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue // gone, or another user's
		}
		var who *holder
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := strings.CutPrefix(link, "socket:[")
			inode, ok2 := strings.CutSuffix(inode, "]")
			if !ok || !ok2 || !inodes[inode] {
				continue
			}
			if who == nil {
				comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
				who = &holder{pid, strings.TrimSpace(string(comm))}
			}
			out[inode] = append(out[inode], *who)
		}
	}
	return out
}

// Listeners returns the processes holding a socket that listens on addr's
// port (a pid of 0 for one whose holder is not found: another user's
// process); known is false when that cannot be told (no /proc here).
func Listeners(addr string) (pids []int, known bool) {
	port, err := portOf(addr)
	if err != nil {
		return nil, false
	}
	socks, err := sockets(port)
	if err != nil {
		return nil, false
	}
	listening := map[string]bool{}
	for _, s := range socks {
		if s.state == "LISTEN" {
			listening[s.inode] = true
		}
	}
	held := owners(listening)
	for inode := range listening {
		if len(held[inode]) == 0 {
			pids = append(pids, 0)
		}
		for _, who := range held[inode] {
			pids = append(pids, who.pid)
		}
	}
	return pids, true
}

// Holders describes, for a test's failure message, the TCP sockets on this
// machine whose local port is addr's port: whether anything listens there
// and which processes hold the listeners, then the other sockets (the
// accepted ends of connections, a connection of a socket to itself), with
// their states and holders. A holder is named by pid and command name only:
// a command line may hold a secret.
func Holders(addr string) string {
	port, err := portOf(addr)
	if err != nil {
		return err.Error()
	}
	socks, err := sockets(port)
	if err != nil {
		return fmt.Sprintf("sockets on port %d unknown: %v", port, err)
	}
	inodes := map[string]bool{}
	for _, s := range socks {
		if s.inode != "0" { // TIME_WAIT: no process holds it
			inodes[s.inode] = true
		}
	}
	held := owners(inodes)
	describe := func(s socket) string {
		line := s.local
		if s.state != "LISTEN" {
			line = s.state + " " + s.local + " -> " + s.remote
		}
		if who := held[s.inode]; len(who) > 0 {
			var names []string
			for _, h := range who {
				names = append(names, h.String())
			}
			line += " held by " + strings.Join(names, ", ")
		} else if s.inode != "0" {
			line += " (holder not found: another user's process, or closed meanwhile)"
		}
		return line
	}
	var listening, others []string
	for _, s := range socks {
		if s.state == "LISTEN" {
			listening = append(listening, describe(s))
		} else {
			others = append(others, describe(s))
		}
	}
	out := fmt.Sprintf("nothing listens on port %d", port)
	if len(listening) > 0 {
		out = fmt.Sprintf("listening on port %d: %s", port, strings.Join(listening, "; "))
	}
	if len(others) > 0 {
		out += fmt.Sprintf("; other sockets with local port %d: %s", port, strings.Join(others, "; "))
	}
	return out
}

// portOf is the port of host:port.
func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}
