# SPDX-License-Identifier: Apache-2.0
"""TCP forwarding between network namespaces, for tests whose parts live in
different ones (the test process and the registry in the host's, cell-agent
in a simulated cell's).

A socket belongs to the namespace it was created in, so a short-lived
thread enters the namespace (setns through ctypes: Debian's Python 3.11
has no os.setns), creates the socket and ends; the main process never
moves. ``Forward(listen_ns, port, target_ns, target_port)`` listens on
127.0.0.1:port in listen_ns (None = the caller's) and connects each client
to 127.0.0.1:target_port in target_ns.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import Optional

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def socket_in(ns_path: Optional[str]) -> socket.socket:
    if ns_path is None:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    out = {}

    def enter():
        fd = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                out["err"] = OSError(ctypes.get_errno(), f"setns {ns_path}")
                return
            out["sock"] = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            os.close(fd)

    # The thread ends in the other namespace; only it ever moved.
    t = threading.Thread(target=enter)
    t.start()
    t.join()
    if "err" in out:
        raise out["err"]
    return out["sock"]


def pump(a: socket.socket, b: socket.socket) -> None:
    """Copy a to b until a ends, then end b's writing side (one direction
    of a TCP forward; run one per direction)."""
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Forward:
    def __init__(self, listen_ns: Optional[str], port: int, target_ns: Optional[str],
                 target_port: int):
        self.target_ns, self.target_port = target_ns, target_port
        self.lsock = socket_in(listen_ns)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", port))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        t = socket_in(self.target_ns)
        try:
            t.connect(("127.0.0.1", self.target_port))
        except OSError:
            c.close()
            t.close()
            return
        th = threading.Thread(target=pump, args=(c, t), daemon=True)
        th.start()
        pump(t, c)
        th.join(timeout=30)
        c.close()
        t.close()

    def close(self) -> None:
        self.closed = True
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.lsock.close()
