# SPDX-License-Identifier: Apache-2.0
"""A real NFS server for the image tests: Debian's userspace nfs-ganesha
(packages nfs-ganesha, nfs-ganesha-vfs; the build machine's kernel has no
NFS server) exporting one directory read-only, NFSv4.1+ over TCP only.

``Ganesha(base, export_dir)`` runs ``ganesha.nfsd -F`` in the foreground as
the test's own process (never the host's service): its config, pid file,
log and recovery directory under ``base``, bound to 127.0.0.1 on a free
port (a qemu user-net guest reaches it at 10.0.2.2:<port>). No rpcbind, no
NLM, no rquota, no UDP, no NFSv3: a v4.1 mount needs the one TCP port
(its registration with rpcbind fails, logged and harmless). Graceless, so
a client can open files at once instead of after a 90 s grace period;
owners as bare numbers, so a client without an idmapper sees the share's
uids and gids as they are on disk. ``close()`` ends it (SIGTERM, then
SIGKILL)."""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time

from registry import free_port

GANESHA_BIN = "/usr/bin/ganesha.nfsd"
PSEUDO = "/cache"

CONFIG = """NFS_CORE_PARAM {{
	NFS_Port = {port};
	Bind_addr = 127.0.0.1;
	Protocols = 4;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
	Plugins_Dir = "{plugins}";
}}
NFSv4 {{
	Graceless = true;
	Minor_Versions = 1, 2;
	RecoveryRoot = "{base}/recovery";
	Allow_Numeric_Owners = true;
	Only_Numeric_Owners = true;
}}
NFS_KRB5 {{ Active_krb5 = false; }}
EXPORT {{
	Export_Id = 1;
	Path = "{export}";
	Pseudo = {pseudo};
	Access_Type = RO;
	Squash = No_Root_Squash;
	Protocols = 4;
	Transports = TCP;
	SecType = sys;
	FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
"""


def _plugins() -> str:
    for d in ("/usr/lib/x86_64-linux-gnu/ganesha", "/usr/lib/ganesha", "/usr/lib64/ganesha"):
        if os.path.exists(os.path.join(d, "libfsalvfs.so")):
            return d
    raise RuntimeError("nfs-ganesha-vfs's libfsalvfs.so not found: run scripts/deps.sh")


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Ganesha:
    def __init__(self, base: str, export_dir: str, timeout: float = 30):
        if not os.access(GANESHA_BIN, os.X_OK):
            raise RuntimeError(f"{GANESHA_BIN} missing: run scripts/deps.sh")
        self.base = base
        self.port = free_port()
        self.log = os.path.join(base, "ganesha.log")
        os.makedirs(os.path.join(base, "recovery"), exist_ok=True)
        conf = os.path.join(base, "ganesha.conf")
        with open(conf, "w") as f:
            f.write(CONFIG.format(port=self.port, plugins=_plugins(), base=base,
                                  export=os.path.abspath(export_dir), pseudo=PSEUDO))
        self.proc = subprocess.Popen(
            [GANESHA_BIN, "-F", "-f", conf, "-L", self.log,
             "-p", os.path.join(base, "ganesha.pid"), "-N", "NIV_EVENT"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(base, "ganesha.stderr"), "wb"),
            start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.read_log()[-3000:]
                self.close()
                raise RuntimeError(f"ganesha.nfsd did not start:\n{tail}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        if "NFS SERVER INITIALIZED" not in self.read_log():
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def read_log(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)

