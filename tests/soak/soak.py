# SPDX-License-Identifier: Apache-2.0
"""Soak cell-agent (issue 14; `make soak`, never in CI): SOAK_MINUTES
(default 30) of what a long-lived cell sees, then a count of what leaked.

Running together:
* spec churn: every ~2 s a new spec adds, removes or changes units (image,
  env, command; some crash, some exit, most run), restartPolicy Always;
* log follows and execs (some leaving a background child) on running units;
* a flaky registry: the agent pulls through tests/pylib/proxy.py, whose
  rules change every few seconds (503s, cut blobs, slow manifests);
* a state directory on a small tmpfs that is filled to ENOSPC for a while
  and then freed, again and again;
* during the first half, the agent is killed with -9 and started again
  every few minutes (its start-up sweep must leave nothing behind).

At the end the pod is emptied and the script prints, and requires to be 0:
leaked processes (the pod's cgroups, or naming the agent's directory),
mounts below the agent's directory, the pod's cgroup directories, and the
agent's file descriptors beyond the baseline; and the agent's RSS growth
from a baseline taken one minute after its last start, which must stay
within SOAK_RSS_MIB (default 8). It also requires the agent to be alive and
a last spec to reach running after the churn.
"""
from __future__ import annotations

import glob
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import websocket

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "tests", "pylib"), os.path.join(ROOT, "tests", "integration")]

from images import Image, busybox_layer, push, random_layer  # noqa: E402
from procstat import rss_kib  # noqa: E402
from proxy import Proxy  # noqa: E402
from registry import Registry  # noqa: E402
from wire import pod_params, unit  # noqa: E402
from test_agent_api import start_agent  # noqa: E402

MINUTES = float(os.environ.get("SOAK_MINUTES", "30"))
RSS_BOUND_MIB = float(os.environ.get("SOAK_RSS_MIB", "8"))
TMPFS_MIB = int(os.environ.get("SOAK_TMPFS_MIB", "64"))
NAMES = ["u0", "u1", "u2", "u3", "u4"]
SCRIPTS = [
    "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done",
    "echo up; exec sleep 1000",
    "echo bye; sleep 1; exit 0",
    "echo crash >&2; sleep 2; exit 3",
    "head -c 300000 /dev/zero > /tmp/junk; echo wrote; exec sleep 1000",
]

stats = {"specs": 0, "spec_errors": 0, "execs": 0, "exec_errors": 0, "follows": 0,
         "follow_errors": 0, "fills": 0, "restarts": 0, "proxy_rules": 0}
stop = threading.Event()
lock = threading.Lock()


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bump(k: str) -> None:
    with lock:
        stats[k] += 1


class Cell:
    """The agent under test; restartable (kill -9, then start again)."""

    def __init__(self, d: str, proxy: Proxy):
        self.d, self.proxy = d, proxy
        self.a = None
        self.start()

    def start(self) -> None:
        self.a = start_agent(self.d, "--insecure-registry", self.proxy.host,
                             env={"CELL_AGENT_BACKOFF_UNIT_MS": "100"})

    def kill9(self) -> None:
        os.kill(self.a.proc.pid, signal.SIGKILL)
        self.a.proc.wait()

    def client(self):
        return self.a.client()


def spec(images: list) -> dict:
    units = []
    for n in random.sample(NAMES, random.randint(1, 4)):
        u = unit(n, random.choice(images), command=["/bin/sh", "-c", random.choice(SCRIPTS)])
        u["env"] = [{"name": "V", "value": str(random.randint(0, 3))}]
        units.append(u)
    return pod_params("ns_soak", units=units, terminationGracePeriodSeconds=1)


def running_units(c) -> list:
    try:
        return [u["name"] for u in c.status()["unitStatus"]
                if "running" in (u.get("state") or {})]
    except Exception:  # noqa: BLE001 - the agent may be restarting
        return []


def churn(cell: Cell, images: list) -> None:
    while not stop.is_set():
        try:
            c = cell.client()
            c.update_pod(spec(images))
            c.close()
            bump("specs")
        except Exception:  # noqa: BLE001 - restarts, a full disk
            bump("spec_errors")
        stop.wait(random.uniform(1.0, 3.0))


def execs(cell: Cell) -> None:
    while not stop.is_set():
        stop.wait(random.uniform(1.5, 4.0))
        try:
            c = cell.client()
            names = running_units(c)
            if names:
                cmd = random.choice([["/bin/sh", "-c", "echo hi; sleep 60 & echo bg"],
                                     ["/bin/sh", "-c", "cat /proc/self/status | head -3"],
                                     ["/bin/true"]])
                x = c.exec(random.choice(names), cmd)
                try:
                    x.collect(timeout=10)
                finally:
                    x.close()
                bump("execs")
            c.close()
        except Exception:  # noqa: BLE001
            bump("exec_errors")


def follows(cell: Cell) -> None:
    while not stop.is_set():
        stop.wait(random.uniform(1.0, 3.0))
        try:
            c = cell.client()
            names = running_units(c)
            if names:
                f = c.follow_logs(random.choice(names), metadata=random.random() < 0.5)
                end = time.monotonic() + random.uniform(0.5, 3.0)
                try:
                    while time.monotonic() < end and f.recv(0.5) is not None:
                        pass
                except websocket.WebSocketTimeoutException:
                    pass
                finally:
                    f.close()
                bump("follows")
            c.close()
        except Exception:  # noqa: BLE001
            bump("follow_errors")


def flaky(proxy: Proxy, digests: list) -> None:
    while not stop.is_set():
        proxy.clear()
        r = random.random()
        if r < 0.25:
            proxy.status("/manifests/", 503, times=2)
        elif r < 0.45:
            proxy.drop_after(random.choice(digests), 1000, times=1)
        elif r < 0.6:
            proxy.delay("/manifests/", 2.0, times=2)
        bump("proxy_rules")
        stop.wait(random.uniform(3.0, 8.0))
    proxy.clear()


def fill_and_free(state: str, period: float, hold: float) -> None:
    filler = os.path.join(state, "soak-filler")
    while not stop.wait(period):
        try:
            with open(filler, "wb") as f:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
        except OSError:
            pass
        bump("fills")
        stop.wait(hold)
        try:
            os.unlink(filler)
        except OSError:
            pass


def pod_tag(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()[:16]


def pod_cgroup_dirs(state: str) -> list:
    tag = pod_tag(state)
    out = []
    for top in glob.glob(f"/sys/fs/cgroup/*/cell/{tag}") + glob.glob(f"/sys/fs/cgroup/cell/{tag}"):
        out += [t for t, _, _ in os.walk(top)]
    return out


def leaked_processes(d: str, state: str, agent_pid: int) -> list:
    tag = "/cell/" + pod_tag(state)
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in (agent_pid, os.getpid()):
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in cg or (d + "/") in cmd:
            out.append(f"{pid} {cmd[:100]}")
    return out


def mounts_below(d: str, state: str) -> list:
    with open("/proc/self/mountinfo") as f:
        mps = [line.split()[4].replace("\\040", " ") for line in f]
    return [m for m in mps if m.startswith(d + "/") and m != state]


def fds(pid: int) -> dict:
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def quiet_fds(cell: Cell) -> dict:
    """The agent's descriptors with no client connected: past the 15 s
    after which a silent stream peer is dropped."""
    time.sleep(20)
    return fds(cell.a.proc.pid)


def main() -> int:
    if os.geteuid() != 0:
        print("soak: run as root", file=sys.stderr)
        return 2
    random.seed(int(os.environ.get("SOAK_SEED", str(int(time.time())))))
    total = MINUTES * 60
    base = tempfile.mkdtemp(prefix="cell-soak-leaks-")
    d = os.path.join(base, "agent")
    state = os.path.join(d, "state")
    os.makedirs(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m", "cell-soak", state],
                   check=True)
    reg = Registry(os.path.join(base, "registry"))
    proxy = Proxy(reg.port)
    proxy.httpd.handle_error = lambda req, addr: None  # cut blobs are the point
    cell = None
    try:
        digests, images = [], []
        for i in range(4):
            extra = random_layer(200_000 + i * 50_000, name=f"r{i}.bin", seed=b"soak%d" % i)
            digests.append(extra.digest)
            push(reg, "t/app", f"v{i}", Image([busybox_layer(), extra],
                                               config={"Cmd": ["/bin/sh"]}))
            images.append(f"{proxy.host}/t/app:v{i}")
        cell = Cell(d, proxy)
        log(f"agent pid {cell.a.proc.pid}, dir {d}, {MINUTES:g} min, state tmpfs {TMPFS_MIB} MiB")
        workers = [threading.Thread(target=f, args=a, daemon=True) for f, a in (
            (churn, (cell, images)), (execs, (cell,)), (follows, (cell,)),
            (flaky, (proxy, digests)),
            (fill_and_free, (state, min(180.0, total / 6), min(45.0, total / 15))))]
        for w in workers:
            w.start()
        t0 = time.monotonic()
        restart_every = min(300.0, total / 6)
        next_restart = t0 + restart_every
        baseline_at = None
        rss0 = None
        while time.monotonic() - t0 < total:
            time.sleep(1)
            now = time.monotonic()
            if now - t0 < total / 2 and now >= next_restart:
                log("kill -9 the agent, start it again")
                cell.kill9()
                cell.start()
                bump("restarts")
                next_restart = now + restart_every
                baseline_at = None
            if baseline_at is None and now - t0 >= total / 2 - 60:
                baseline_at = now + 60
            if baseline_at and rss0 is None and now >= baseline_at:
                rss0 = rss_kib(cell.a.proc.pid)
                log(f"baseline RSS {rss0} KiB")
            if int(now - t0) % 60 == 0:
                with lock:
                    log(f"{int((now - t0) / 60)} min: {stats}, "
                        f"RSS {rss_kib(cell.a.proc.pid)} KiB, fds {len(fds(cell.a.proc.pid))}")
        stop.set()
        for w in workers:
            w.join(30)
        # Space is back, the registry behaves: a last spec must run.
        proxy.clear()
        try:
            os.unlink(os.path.join(state, "soak-filler"))
        except OSError:
            pass
        c = cell.client()
        c.update_pod(pod_params("ns_soak", units=[
            unit("u0", images[0], command=["/bin/sh", "-c", SCRIPTS[1]]),
            unit("u1", images[1], command=["/bin/sh", "-c", SCRIPTS[0]])],
            terminationGracePeriodSeconds=1))
        converged = True
        try:
            c.wait_status(lambda s: sorted(u["name"] for u in s["unitStatus"]
                                           if "running" in (u.get("state") or {}))
                          == ["u0", "u1"], timeout=120)
        except Exception as e:  # noqa: BLE001
            converged = False
            log(f"the last spec did not reach running: {e}")
        c.update_pod(pod_params("ns_soak", terminationGracePeriodSeconds=1))
        units = os.path.join(state, "units")
        end = time.monotonic() + 60
        while os.listdir(units) and time.monotonic() < end:
            time.sleep(0.5)
        c.close()
        time.sleep(2)
        pid = cell.a.proc.pid
        rss1 = rss_kib(pid)
        procs = leaked_processes(d, state, pid)
        mnts = mounts_below(d, state)
        cgs = pod_cgroup_dirs(state)
        # Descriptors: against a fresh agent over the same state with
        # nothing running (what an idle agent holds).
        fd_end = quiet_fds(cell)
        alive = cell.a.alive()
        leftover_units = os.listdir(units)
        cell.kill9()
        cell.start()
        fd_idle = quiet_fds(cell)
        fd_leak = sorted(set(fd_end.values()) - set(fd_idle.values()))
        extra_fds = max(0, len(fd_end) - len(fd_idle))
        growth = (rss1 - (rss0 or rss1)) / 1024
        with lock:
            log(f"counts: {stats}")
        print(f"soak: {MINUTES:g} min, {stats['specs']} specs, {stats['execs']} execs, "
              f"{stats['follows']} log follows, {stats['fills']} fill/free cycles, "
              f"{stats['restarts']} kill -9 restarts, {stats['proxy_rules']} proxy rules")
        print(f"leaked processes: {len(procs)}")
        for p in procs[:20]:
            print(f"  {p}")
        print(f"leaked mounts: {len(mnts)}")
        for m in mnts[:20]:
            print(f"  {m}")
        print(f"leaked cgroups: {len(cgs)}")
        for g in cgs[:20]:
            print(f"  {g}")
        print(f"leaked fds: {extra_fds} (end {len(fd_end)}, idle agent {len(fd_idle)})")
        for f in fd_leak[:20]:
            print(f"  {f}")
        print(f"unit directories left: {len(leftover_units)} {leftover_units[:10]}")
        print(f"RSS: baseline {rss0} KiB, end {rss1} KiB, growth {growth:.2f} MiB "
              f"(bound {RSS_BOUND_MIB:g} MiB)")
        print(f"agent alive: {alive}; last spec reached running: {converged}")
        ok = (not procs and not mnts and not cgs and extra_fds == 0 and not leftover_units
              and growth <= RSS_BOUND_MIB and alive and converged)
        print("soak: PASS" if ok else "soak: FAIL")
        return 0 if ok else 1
    finally:
        stop.set()
        if cell and cell.a.alive():
            try:
                cell.a.client().update_pod(pod_params("ns_soak", terminationGracePeriodSeconds=0))
                end = time.monotonic() + 30
                while os.listdir(os.path.join(state, "units")) and time.monotonic() < end:
                    time.sleep(0.5)
            except Exception:  # noqa: BLE001
                pass
            cell.a.stop()
        from test_agent_api import kill_unit_leftovers
        for n in NAMES:
            kill_unit_leftovers(d, n)
        proxy.close()
        reg.close()
        subprocess.run(["umount", "-l", state], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
