"""The command the runner starts for each local worker when a pool serves them (see pool.py).

Run as `python -I -S attach.py SOCKET WORKER...`: the standard library alone, so it starts in
milliseconds. It hands the pool's server this process's environment (which carries the
runner's addresses), working folder and standard streams, then waits for the forked
worker's exit status and exits with it. When no server answers, it becomes a plain worker
(WORKER..., the command the pool gives it).
"""

import json
import os
import signal
import socket
import sys

ATTACHED = b"A"


def main() -> None:
    # Ctrl-C reaches the worker too (one process group): its status says how it ended.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sys.argv[1])
        socket.send_fds(conn, [ATTACHED], [0, 1, 2])
        conn.sendall(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}).encode())
        conn.shutdown(socket.SHUT_WR)
        attached = conn.recv(1) == ATTACHED
    except OSError:
        attached = False
    if not attached:  # the server is gone or failed before forking this worker
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # an ignored SIGINT would outlive exec
        os.execv(sys.argv[2], sys.argv[2:])  # the plain worker's command, as the pool gave it
    try:
        status = conn.recv(1)
    except OSError:
        status = b""
    sys.exit(status[0] if status else "bertdata worker: ended without an exit status")


if __name__ == "__main__":
    main()
