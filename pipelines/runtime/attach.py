"""The command the runner starts for each local worker when a pool serves them (see pool.py).

Run as `python -I -S attach.py SOCKET WORKER...`: the standard library alone, so it starts in
milliseconds. It hands the pool's server this process's environment (which carries the
runner's addresses), working folder and standard streams, then waits for the forked
worker's exit status and exits with it. When no server listens, it becomes a plain worker
(WORKER..., the command the pool gives it). Once a server has taken the request, it never
does: a connection that ends without the worker's status means the worker (or the server)
died, which the server (or the pool) reports, and the build stops; a plain worker started
then would only connect to a runner that is closing, and be waited for.
"""

import json
import os
import signal
import socket
import sys

ATTACHED = b"A"


STOPS = (signal.SIGINT, signal.SIGQUIT)


def main() -> None:
    # Ctrl-C and Ctrl-\ reach the worker too (one process group): its status says how it ended.
    found = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOPS}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sys.argv[1])
    except OSError:  # no server listens: this process becomes the worker
        for signum, handler in found.items():  # an ignored signal outlives exec: as the launcher had them
            signal.signal(signum, handler)
        os.execv(sys.argv[2], sys.argv[2:])  # the plain worker's command, as the pool gave it
    try:
        socket.send_fds(conn, [ATTACHED], [0, 1, 2])
        conn.sendall(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}).encode())
        conn.shutdown(socket.SHUT_WR)
        if conn.recv(1) != ATTACHED:
            sys.exit("bertdata worker: ended before it started")
        status = conn.recv(1)
    except OSError:
        status = b""
    sys.exit(status[0] if status else "bertdata worker: ended without an exit status")


if __name__ == "__main__":
    main()
