#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The TLS front under kill -9 restarts (issue 28: the civetweb worker
segfault a release soak saw once, 40 s after a kill -9 restart).
`make soak-tls MINUTES=5` (release build) or `make soak-tls-asan` (ASan and
UBSan); tests/integration/test_agent_tls_restart.py runs 40 s of it.

The agent (tests/integration/test_agent_api.start_agent, its real mutual
TLS) runs a pod with one unit that prints a line a second. Client threads,
all the time, including while the agent is down and starting:
* hold: kept-alive connections left idle (past civetweb's keep-alive),
  plain TCP connections that never speak, log follows left open;
* quick: whole requests (ping, status, version, logs, metrics), one per
  connection or several kept alive; log follows closed cleanly or cut;
  an exec now and then;
* abandon: close (or RST) at once, a partial ClientHello, a finished
  handshake then nothing, half a request, half a websocket upgrade, a
  body shorter than its Content-Length; bursts past the gate's caps;
* badcert: no certificate, another CA's, an expired one, a serverAuth-only
  one, over TLS 1.2 and 1.3;
* slow: headers (or a ClientHello) a byte at a time.
The agent is killed with -9 at random moments: mostly after 1-6 s, some
during its start, some after 35-50 s (the crash was 40 s in), and started
again on the same state directory: it must adopt the running unit again.

A finding is: the agent dead when we did not kill it (by which signal), a
sanitizer report (ASAN_OPTIONS log_path: the agent's and its children's),
no ping within START_S of a start, the unit not running again within
START_S, or a SIGTERM at the end that does not stop it cleanly. The
figures (minutes, restarts, connections by kind and outcome) are printed
and written to $TLS_SOAK_OUT/summary.json when set. Exit 1 on a finding.

Environment: TLS_SOAK_MINUTES (5), TLS_SOAK_SEED, CELL_BUILD (build),
TLS_SOAK_OUT (a directory to keep the logs of runs with findings),
TLS_SOAK_START_S (60: a start's and an adoption's limit), TLS_SOAK_LONG
(0.05: the share of runs that last 35-50 s).
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "tests", "pylib"), os.path.join(ROOT, "tests", "integration")]

import test_agent_api  # noqa: E402
from images import Image, busybox_layer, push  # noqa: E402
from pki import CA  # noqa: E402
from registry import Registry  # noqa: E402
from test_agent_api import kill_unit_leftovers, start_agent  # noqa: E402
from wire import pod_params, tls_context, unit  # noqa: E402

MINUTES = float(os.environ.get("TLS_SOAK_MINUTES", "5"))
START_S = float(os.environ.get("TLS_SOAK_START_S", "60"))
OUT = os.environ.get("TLS_SOAK_OUT", "")
LONG = float(os.environ.get("TLS_SOAK_LONG", "0.05"))
POD = "ns_tls"
UNIT = "tlssoak"
SERVER_NAME = "MilpaNode"
SOURCES = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]

stop = threading.Event()
lock = threading.Lock()
conns = Counter()   # "kind/what" -> connections opened
outcome = Counter()  # "kind/ok|refused|error" -> count
served: list = []  # bad certificates that got an HTTP answer


def log(msg: str) -> None:
    print(f"[tls-soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def count(kind: str, what: str, result: str) -> None:
    with lock:
        conns[f"{kind}/{what}"] += 1
        outcome[f"{kind}/{result}"] += 1


class Target:
    """Where the clients connect, and the contexts they use."""

    def __init__(self, port: int, ctx_good: ssl.SSLContext, bad: dict, client):
        self.port = port
        self.good = ctx_good
        self.bad = bad  # what -> context
        self.client = client  # a wire.CellClient of the current agent

    def tcp(self, src: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout,
                                        source_address=(src, 0))

    def tls(self, src: str = "127.0.0.1", ctx=None, timeout: float = 5.0) -> ssl.SSLSocket:
        s = self.tcp(src, timeout)
        try:
            return (ctx or self.good).wrap_socket(s, server_hostname=SERVER_NAME)
        except BaseException:
            s.close()
            raise


def rst_close(s: socket.socket) -> None:
    """Close with a reset rather than a FIN."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def read_reply(t: ssl.SSLSocket, limit: int = 1 << 20) -> bytes:
    """One HTTP reply (by Content-Length), or what came before the close."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = t.recv(65536)
        if not b:
            return buf
        buf += b
    head, _, body = buf.partition(b"\r\n\r\n")
    n = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    if n is None:
        return buf
    while len(body) < min(n, limit):
        b = t.recv(65536)
        if not b:
            break
        body += b
    return head + b"\r\n\r\n" + body


def req(path: str, close: bool = True, method: str = "GET", extra: str = "") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: {SERVER_NAME}\r\n"
            f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n"
            f"{extra}\r\n").encode()


PATHS = ["/rest/v1/ping", "/rest/v1/status", "/rest/v1/version",
         f"/rest/v1/logs/{UNIT}?lines=5", f"/rest/v1/logs/{UNIT}?bytes=200",
         "/rest/v1/metrics", "/rest/v1/nosuch", "/rest/v1/file/?path=/etc/hostname"]


def run_kind(kind: str, fn, target: Target) -> None:
    """Loop fn until stop; classify what each try ended with."""
    while not stop.is_set():
        try:
            what = fn(target)
            count(kind, what, "ok")
        except ConnectionRefusedError:
            count(kind, "refused", "refused")
            stop.wait(0.05)
        except AssertionError as e:  # a client the agent must not serve
            count(kind, "served", "error")
            with lock:
                served.append(str(e))
        except Exception as e:  # noqa: BLE001 - resets, timeouts, kills
            count(kind, type(e).__name__, "error")


# ---- hold: idle connections ----

def hold(t: Target) -> str:
    r = random.random()
    if r < 0.5:
        # A kept-alive connection, one request, then idle: civetweb's
        # keep-alive (30 s) or the kill ends it.
        with t.tls(timeout=70) as s:
            s.sendall(req("/rest/v1/ping", close=False))
            read_reply(s)
            idle = random.uniform(1, 45)
            if stop.wait(idle):
                return "kept-alive idle"
            s.sendall(req("/rest/v1/status", close=False))
            read_reply(s)
        return "kept-alive idle"
    if r < 0.8:
        with t.tcp(random.choice(SOURCES)) as s:  # never speaks
            s.settimeout(10)
            try:
                s.recv(1)  # the gate's handshake limit closes it
            except socket.timeout:
                pass
        return "tcp silent"
    # A log follow left open, reading, for up to 50 s.
    with t.tls(timeout=20) as s:
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        s.sendall(req(f"/rest/v1/logs/{UNIT}%3Ffollow=1&metadata=0", close=False,
                      extra=("Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n")))
        end = time.monotonic() + random.uniform(5, 50)
        while time.monotonic() < end and not stop.is_set():
            try:
                if not s.recv(65536):
                    break
            except socket.timeout:
                break
        if random.random() < 0.5:
            rst_close(s)
    return "follow held"


# ---- quick: whole requests ----

def quick(t: Target) -> str:
    r = random.random()
    if r < 0.55:
        with t.tls() as s:
            s.sendall(req(random.choice(PATHS)))
            read_reply(s)
        return "one request"
    if r < 0.8:
        with t.tls() as s:
            for _ in range(random.randint(2, 6)):
                s.sendall(req(random.choice(PATHS), close=False))
                if not read_reply(s):
                    break
        return "kept-alive requests"
    if r < 0.97:
        with t.tls(timeout=5) as s:
            key = "dGhlIHNhbXBsZSBub25jZQ=="
            s.sendall(req(f"/rest/v1/logs/{UNIT}%3Ffollow=1&metadata=1", close=False,
                          extra=("Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                 f"Sec-WebSocket-Key: {key}\r\n"
                                 "Sec-WebSocket-Version: 13\r\n")))
            end = time.monotonic() + random.uniform(0.2, 3)
            while time.monotonic() < end:
                try:
                    if not s.recv(65536):
                        break
                except socket.timeout:
                    break
            if random.random() < 0.5:
                # A masked close frame, as a client sends it.
                s.sendall(b"\x88\x82\x00\x00\x00\x00\x03\xe8")
            else:
                rst_close(s)
        return "follow"
    # exec: a child process (cell-monitor exec) from a worker.
    cli = t.client()
    try:
        x = cli.exec(UNIT, ["/bin/sh", "-c", "echo hi"])
        try:
            x.collect(timeout=10)
        finally:
            x.close()
    finally:
        cli.close()
    return "exec"


def client_hello(version=None) -> bytes:
    """A real ClientHello, from a memory BIO."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if version:
        ctx.maximum_version = version
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(i, o, server_hostname=SERVER_NAME)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()


HELLOS = [client_hello(), client_hello(ssl.TLSVersion.TLSv1_2)]


# ---- abandon ----

def abandon(t: Target) -> str:
    r = random.random()
    src = random.choice(SOURCES)
    if r < 0.12:
        s = t.tcp(src)
        rst_close(s) if random.random() < 0.5 else s.close()
        return "tcp close at once"
    if r < 0.3:
        s = t.tcp(src)
        h = random.choice(HELLOS)
        s.sendall(h[:random.randint(1, len(h) - 1)])
        if random.random() < 0.5:
            time.sleep(random.uniform(0, 0.5))
        rst_close(s) if random.random() < 0.5 else s.close()
        return "partial ClientHello"
    if r < 0.42:
        s = t.tcp(src)
        s.sendall(random.choice(HELLOS))  # whole, then gone
        rst_close(s) if random.random() < 0.5 else s.close()
        return "ClientHello then close"
    if r < 0.55:
        s = t.tls(src)
        rst_close(s) if random.random() < 0.5 else s.close()
        return "handshake then close"
    if r < 0.7:
        s = t.tls(src)
        q = req(random.choice(PATHS))
        s.sendall(q[:random.randint(1, len(q) - 2)])
        if random.random() < 0.5:
            time.sleep(random.uniform(0, 0.3))
        rst_close(s) if random.random() < 0.5 else s.close()
        return "half a request"
    if r < 0.8:
        s = t.tls(src)
        s.sendall(req(f"/rest/v1/logs/{UNIT}%3Ffollow=1", close=False,
                      extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                            "Sec-WebSocket-Version: 13\r\n")[:-20])
        rst_close(s) if random.random() < 0.5 else s.close()
        return "half an upgrade"
    if r < 0.97:
        s = t.tls(src)
        body = b'{"spec": '
        s.sendall(req("/rest/v1/updatepod", method="POST",
                      extra=f"Content-Length: 5000\r\nContent-Type: application/json\r\n")
                  + body)
        rst_close(s) if random.random() < 0.5 else s.close()
        return "short body"
    # A burst past the per-source cap (32) of silent connections, and a
    # good one through it: the gate pushes out silent peers.
    burst = [t.tcp(src) for _ in range(random.randint(20, 45))]
    try:
        if src == "127.0.0.1":
            with t.tls(src) as g:
                g.sendall(req("/rest/v1/ping"))
                read_reply(g)
    finally:
        for s in burst:
            rst_close(s) if random.random() < 0.5 else s.close()
    with lock:
        conns["abandon/burst member"] += len(burst)
    return "burst"


# ---- bad certificates ----

def badcert(t: Target) -> str:
    stop.wait(0.05)  # leave the CPUs to the good clients
    what = random.choice(sorted(t.bad))
    ctx = t.bad[what]
    try:
        with t.tls(random.choice(SOURCES), ctx=ctx) as s:
            s.sendall(req("/rest/v1/ping"))
            got = s.recv(100)
    except ConnectionRefusedError:
        raise
    except (ssl.SSLError, ConnectionError, socket.timeout):
        return what
    if got.startswith(b"HTTP/"):
        raise AssertionError(f"{what}: the server answered {got!r}")
    return what


# ---- slow ----

def slow(t: Target) -> str:
    """Past the gate's 3 s (a ClientHello) or civetweb's 15 s request
    limit (headers), the agent cuts the connection: that is the answer."""
    if random.random() < 0.3:
        with t.tcp(random.choice(SOURCES), timeout=10) as s:
            try:
                for b in random.choice(HELLOS):
                    s.sendall(bytes([b]))
                    if stop.wait(random.uniform(0.05, 0.4)):
                        break
            except (ConnectionResetError, BrokenPipeError):
                return "slow ClientHello, cut"
        return "slow ClientHello"
    with t.tls(timeout=30) as s:
        q = req(random.choice(PATHS), extra="X-Pad: " + "a" * 200 + "\r\n")
        end = time.monotonic() + random.uniform(2, 25)
        try:
            for b in q[:-1]:
                s.sendall(bytes([b]))
                if stop.wait(random.uniform(0.1, 1.0)) or time.monotonic() > end:
                    break
        except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
            return "slow headers, cut"
    return "slow headers"


# ---- the agent ----

class Cell:
    def __init__(self, d: str, registry: Registry, port: int, asan_dir: str):
        self.d, self.registry, self.port, self.asan_dir = d, registry, port, asan_dir
        self.a = None
        self.runs = 0
        self.kept_boot = None

    def env(self) -> dict:
        opts = f"abort_on_error=1:detect_leaks=0:log_path={self.asan_dir}/asan"
        return {"ASAN_OPTIONS": opts,
                "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:"
                                 f"log_path={self.asan_dir}/ubsan",
                "CELL_AGENT_BACKOFF_UNIT_MS": "100"}

    def start(self, wait: bool = True) -> None:
        # The PKI is made once: every start uses the same boot files, as a
        # cell's restart does (start_agent would make a new CA each time).
        if self.kept_boot is None:
            self.kept_boot = test_agent_api.make_boot(self.d)
        real = test_agent_api.make_boot
        test_agent_api.make_boot = lambda d: self.kept_boot
        try:
            self.a = start_agent(self.d, "--insecure-registry", self.registry.host,
                                 env=self.env(), port=self.port, wait=False,
                                 verbose=False)
        finally:
            test_agent_api.make_boot = real
        self.runs += 1
        if wait:
            self.wait_ping()

    def wait_ping(self) -> float:
        t0 = time.monotonic()
        c = self.a.client()
        try:
            while time.monotonic() - t0 < START_S:
                if not self.a.alive():
                    return -1
                try:
                    c.ping()
                    return time.monotonic() - t0
                except Exception:  # noqa: BLE001
                    time.sleep(0.05)
        finally:
            c.close()
        return -1

    def client(self):
        return self.a.client()


def worker_stack_peak(pid: int) -> int:
    """The deepest use of civetweb's small worker stacks (USE_STACK_SIZE,
    256 KiB in the Makefile) in bytes: the lowest non-zero byte of each
    anonymous mapping of that size just above its guard page (a stack
    starts zeroed) that holds a thread's stack pointer. The crash hunted
    here jumped into its own stack."""
    sps = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                w = f.read().split()
            if len(w) >= 8:  # nr, 6 args, sp, pc (not "running")
                sps.append(int(w[-2], 16))
        with open(f"/proc/{pid}/maps") as f:
            regs = []
            for line in f:
                m = line.split()
                a, b = (int(x, 16) for x in m[0].split("-"))
                regs.append((a, b, m[1], len(m) > 5))
        peak = 0
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for (_, gb, gp, _), (a, b, p, named) in zip(regs, regs[1:]):
                if (gp.startswith("---") and gb == a and p.startswith("rw") and not named
                        and 240 << 10 <= b - a <= 280 << 10
                        and any(a <= sp < b for sp in sps)):
                    mem.seek(a)
                    data = mem.read(b - a)
                    used = len(data.lstrip(b"\0"))
                    peak = max(peak, used)
        return peak
    except OSError:
        return 0


def sanitizer_reports(asan_dir: str) -> list:
    return sorted(glob.glob(os.path.join(asan_dir, "*san.*")))


def running(st: dict) -> bool:
    return any(u.get("name") == UNIT and "running" in (u.get("state") or {})
               for u in st.get("unitStatus") or [])


def unit_running(c) -> bool:
    return running(c.status())


def main() -> int:
    if os.geteuid() != 0:
        print("tls-soak: run as root", file=sys.stderr)
        return 2
    seed = int(os.environ.get("TLS_SOAK_SEED", str(int(time.time()))))
    random.seed(seed)
    total = MINUTES * 60
    base = tempfile.mkdtemp(prefix="cell-tls-soak-")
    d = os.path.join(base, "agent")
    asan_dir = os.path.join(base, "sanitizer")
    os.makedirs(asan_dir)
    keep = OUT or os.path.join(base, "kept")
    os.makedirs(keep, exist_ok=True)
    reg = Registry(os.path.join(base, "registry"))
    findings: list = []
    uptimes: list = []
    starts: list = []
    stats = Counter()
    stack_peak = 0
    cell = None
    t0 = time.monotonic()
    try:
        push(reg, "t/talker", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
        image = f"{reg.host}/t/talker:v1"
        cell = Cell(d, reg, test_agent_api.free_port(), asan_dir)
        cell.start()
        c = cell.client()
        c.update_pod(pod_params(POD, units=[unit(UNIT, image, command=[
            "/bin/sh", "-c", "i=0; while true; do echo line $i; i=$((i+1)); sleep 1; done"])],
            terminationGracePeriodSeconds=1))
        c.wait_status(running, timeout=START_S)
        c.close()
        ca, cli, _ = cell.kept_boot
        pki = os.path.join(base, "bad")
        other = CA.create(os.path.join(pki, "other"))
        other_cli = other.issue_client(os.path.join(pki, "other"), "client")
        now = datetime.datetime.now(datetime.timezone.utc)
        day = datetime.timedelta(days=1)
        expired = ca.issue_client(pki, "expired", not_before=now - 10 * day,
                                  not_after=now - day)
        srv_as_cli = ca.issue_server(pki, "srvcli", dns=[SERVER_NAME], ips=[])
        bad = {}
        for what, (crt, key) in {"no certificate": (None, None),
                                 "another CA's": (other_cli.cert_path, other_cli.key_path),
                                 "expired": (expired.cert_path, expired.key_path),
                                 "serverAuth only": (srv_as_cli.cert_path,
                                                     srv_as_cli.key_path)}.items():
            for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
                ctx = tls_context(ca.cert_path, crt, key)
                ctx.maximum_version = v
                bad[f"{what} {v.name}"] = ctx
        target = Target(cell.port, tls_context(ca.cert_path, cli.cert_path, cli.key_path), bad,
                        cell.client)
        kinds = ([("hold", hold)] * 10 + [("quick", quick)] * 5 + [("abandon", abandon)] * 3
                 + [("badcert", badcert)] + [("slow", slow)] * 3)
        threads = [threading.Thread(target=run_kind, args=(k, f, target), daemon=True)
                   for k, f in kinds]
        for th in threads:
            th.start()
        log(f"seed {seed}, {MINUTES:g} min, agent {test_agent_api.AGENT}, port {cell.port}, "
            f"{len(threads)} client threads, dir {base}")
        last_report = time.monotonic()
        while time.monotonic() - t0 < total:
            r = random.random()
            if r < 0.06:
                up = random.uniform(0.05, 1.0)  # still starting
            elif r < 0.06 + LONG:
                up = random.uniform(35, 50)     # the crash came 40 s in
            else:
                up = random.uniform(1, 6)
            started = time.monotonic()
            end = min(started + up, t0 + total)
            died = None
            while time.monotonic() < end:
                if not cell.a.alive():
                    died = cell.a.proc.returncode
                    break
                time.sleep(0.05)
            uptimes.append(time.monotonic() - started)
            if died is None:
                stack_peak = max(stack_peak, worker_stack_peak(cell.a.proc.pid))
                os.kill(cell.a.proc.pid, signal.SIGKILL)
                rc = cell.a.proc.wait()
                if rc != -signal.SIGKILL:
                    died = rc  # it died on its own just before our kill
            rep = sanitizer_reports(asan_dir)
            if died is not None or rep:
                what = (f"run {cell.runs}: agent exited {died} "
                        f"({signal.Signals(-died).name if died and died < 0 else 'by itself'}) "
                        f"{uptimes[-1]:.1f} s after its start" if died is not None
                        else f"run {cell.runs}: sanitizer report")
                findings.append(what)
                log("FINDING " + what)
                dst = os.path.join(keep, f"run{cell.runs}")
                os.makedirs(dst, exist_ok=True)
                shutil.copy(cell.a.log_path, os.path.join(dst, "agent.log"))
                for f in rep:
                    shutil.move(f, dst)
                log(f"  kept in {dst}; log tail:\n{cell.a.log()[-3000:]}")
            stats["restarts"] += 1
            if time.monotonic() - t0 >= total:
                break
            wait = random.random() < 0.94
            cell.start(wait=False)
            if wait:
                s = cell.wait_ping()
                if s < 0:
                    if cell.a.alive():
                        findings.append(f"run {cell.runs}: no ping within {START_S:g} s")
                        log("FINDING " + findings[-1])
                    continue  # a death is seen by the loop above
                starts.append(s)
                # The running unit is adopted again.
                c = cell.client()
                try:
                    deadline = time.monotonic() + START_S
                    while not unit_running(c):
                        if time.monotonic() > deadline or not cell.a.alive():
                            raise TimeoutError
                        time.sleep(0.2)
                    stats["adopted"] += 1
                except TimeoutError:
                    if cell.a.alive():
                        findings.append(f"run {cell.runs}: {UNIT} not running again "
                                        f"within {START_S:g} s")
                        log("FINDING " + findings[-1])
                except Exception:  # noqa: BLE001 - killed or refused meanwhile
                    pass
                finally:
                    c.close()
            if time.monotonic() - last_report > 60:
                last_report = time.monotonic()
                with lock:
                    log(f"{(last_report - t0) / 60:.1f} min: {stats['restarts']} restarts, "
                        f"{sum(conns.values())} connections, findings {len(findings)}")
        stop.set()
        for th in threads:
            th.join(15)
        # A clean stop at the end, and nothing left behind by it.
        if not cell.a.alive():
            cell.start()
        c = cell.client()
        c.update_pod(pod_params(POD, terminationGracePeriodSeconds=0))
        units = os.path.join(d, "state", "units")
        end = time.monotonic() + 30
        while os.path.isdir(units) and os.listdir(units) and time.monotonic() < end:
            time.sleep(0.2)
        c.close()
        cell.a.proc.send_signal(signal.SIGTERM)
        try:
            rc = cell.a.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            rc = None
        if rc != 0:
            findings.append(f"the last agent's SIGTERM stop: exit {rc}")
        if sanitizer_reports(asan_dir):
            findings.append("sanitizer report at the end")
            for f in sanitizer_reports(asan_dir):
                shutil.move(f, keep)
        findings += served[:10]
        if findings:
            shutil.copy(cell.a.log_path, os.path.join(keep, "last-agent.log"))
    finally:
        stop.set()
        if cell and cell.a and cell.a.alive():
            cell.a.proc.kill()
            cell.a.proc.wait()
        kill_unit_leftovers(d, UNIT)
        reg.close()
    minutes = (time.monotonic() - t0) / 60
    with lock:
        by_kind = Counter()
        for k, v in conns.items():
            by_kind[k.split("/")[0]] += v
        summary = {
            "seed": seed, "agent": test_agent_api.AGENT, "minutes": round(minutes, 2),
            "restarts": stats["restarts"], "adopted": stats["adopted"],
            "killed_while_starting": sum(1 for u in uptimes if u < 1.0),
            "uptimes_over_35s": sum(1 for u in uptimes if u >= 35),
            "uptimes_over_40s": sum(1 for u in uptimes if u >= 40),
            "worker_stack_peak_kib": stack_peak // 1024,
            "start_to_ping_s_median": (round(sorted(starts)[len(starts) // 2], 2)
                                       if starts else None),
            "connections": sum(conns.values()), "by_kind": dict(by_kind),
            "by_what": dict(sorted(conns.items())), "outcomes": dict(sorted(outcome.items())),
            "findings": findings,
        }
    print(json.dumps(summary, indent=1))
    print(f"tls-soak: {minutes:.1f} min, {stats['restarts']} kill -9 restarts, "
          f"{summary['connections']} connections, {len(findings)} findings")
    if OUT:
        with open(os.path.join(OUT, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    if not findings:
        shutil.rmtree(base, ignore_errors=True)
    else:
        log(f"kept: {keep}")
    print("tls-soak: PASS" if not findings else "tls-soak: FAIL")
    return 0 if not findings else 1


if __name__ == "__main__":
    sys.exit(main())
