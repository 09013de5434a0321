package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"
)

// notifySocketEnv names the datagram socket on which a service manager
// started cohort serve expects to hear of its state: systemd sets it for a
// unit of Type=notify, and cohort's own tests set it for the cohort
// processes they start. Lines such as READY=1 and STOPPING=1 are sent to
// it, one datagram per change of state (the protocol of sd_notify(3)).
const notifySocketEnv = "NOTIFY_SOCKET"

// notifyWithin bounds one send: the datagram goes to a local socket, and a
// manager too busy to take it within this must not hold up the node.
const notifyWithin = time.Second

// notifier tells the service manager named by NOTIFY_SOCKET when the node
// is ready and when it stops; without the variable it does nothing. Ready
// is sent only once the store is open and every listener is bound and
// accepting: before, a supervisor (or a test) had only a TCP connection to
// the port to go by, which opens as soon as anything listens there.
type notifier struct {
	socket string // "" when not started by such a manager
	log    *slog.Logger
}

func newNotifier(log *slog.Logger) notifier {
	return notifier{socket: os.Getenv(notifySocketEnv), log: log}
}

// ready says that the node serves, status being the one line a manager
// shows for it (systemctl status).
func (n notifier) ready(status string) { n.send("READY=1\nSTATUS=" + status) }

// stopping says that the node has begun to shut down.
func (n notifier) stopping(status string) { n.send("STOPPING=1\nSTATUS=" + status) }

// send sends state, logging (not returning) a failure: the node serves
// whether or not its manager heard, though a manager waiting for READY=1
// will give up on it in the end, which the warning explains.
func (n notifier) send(state string) {
	if n.socket == "" {
		return
	}
	if err := sdNotify(n.socket, state); err != nil {
		what, _, _ := strings.Cut(state, "\n")
		n.log.Warn("could not tell the service manager the node's state ("+notifySocketEnv+")", "state", what, "err", err)
	}
}

// sdNotify sends state as one datagram to socket: a file system path, or
// (Linux) a name in the abstract namespace written with a leading '@'.
func sdNotify(socket, state string) error {
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		// systemd also knows vsock: addresses, for a service in a
		// virtual machine; cohort does not speak them.
		return fmt.Errorf("%s=%q: want the path of a unix socket or an abstract socket name (@name)", notifySocketEnv, socket)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetWriteDeadline(time.Now().Add(notifyWithin)); err != nil {
		return err
	}
	_, err = c.Write([]byte(state))
	return err
}
