# SPDX-License-Identifier: Apache-2.0
"""What a test run leaves behind (issue 18): processes, mounts, cgroups and
network namespaces that outlive the suite. tests/integration/conftest.py
takes a snapshot when the session starts and fails the session's last
test, listing each one, when anything of the suite's own is left at its
end; then removes it, so one leak does not spoil the next run.

"The suite's own" is narrow on purpose, since other runs may share the
machine: a process (and its descendants) whose command line names the
session's temporary directory, a directory this run noted (note_root) or
a state directory of an agent of this run (a unit's monitor names its
run directory there); a mount below those; the cgroups of a state directory
an agent of this run used (cell/<sha256 of the state dir>, as
agent/sup/supervisor.c names them); a network namespace whose name carries
this run's tag (tests/pylib/fleet.py's, the pid)."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
from typing import Dict, List, Set, Tuple

STATE_DIRS: Set[str] = set()
ROOTS: Set[str] = set()
CGROUP_ROOT = "/sys/fs/cgroup"


def note_state_dir(path: str) -> None:
    """An agent of this run uses path as its --state-dir."""
    STATE_DIRS.add(os.path.abspath(path))


def note_root(path: str) -> None:
    """A directory of this run's own outside pytest's temporary one."""
    ROOTS.add(os.path.abspath(path))


def run_tag() -> str:
    return str(os.getpid() % 100000)


def _procs() -> Dict[int, Tuple[int, str]]:
    """{pid: (ppid, start time)}"""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(pid)] = (int(fields[1]), fields[19])
        except (OSError, IndexError, ValueError):
            pass
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _mounts() -> List[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].replace("\\040", " ") for line in f]


def _netns() -> Set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except OSError:
        return set()


def snapshot() -> dict:
    return {"procs": {(p, s) for p, (_, s) in _procs().items()},
            "mounts": set(_mounts()), "netns": _netns()}


def _below(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _own_procs(base: dict, build: str, roots: List[str]) -> List[int]:
    procs = _procs()
    me, ancestors = os.getpid(), set()
    p = me
    while p > 1 and p in procs and p not in ancestors:
        ancestors.add(p)
        p = procs[p][0]
    names = list(roots) + sorted(STATE_DIRS)
    ours = set()
    for pid, (_, start) in procs.items():
        if pid in ancestors or (pid, start) in base["procs"]:
            continue
        cmd = _cmdline(pid)
        if any(r in cmd for r in names):
            ours.add(pid)
    grew = True
    while grew:  # their descendants: containers, execs
        grew = False
        for pid, (ppid, start) in procs.items():
            if (ppid in ours and pid not in ours and pid not in ancestors
                    and (pid, start) not in base["procs"]):
                ours.add(pid)
                grew = True
    return sorted(ours)


def _own_cgroups() -> List[Tuple[str, str]]:
    """(cgroup dir, the state dir it belongs to)"""
    tags = {hashlib.sha256(d.encode()).hexdigest()[:16]: d for d in STATE_DIRS}
    found = []
    if not tags:
        return found
    for top, dirs, _ in os.walk(CGROUP_ROOT):
        if os.path.basename(top) == "cell":
            found += [(os.path.join(top, d), tags[d]) for d in dirs if d in tags]
            dirs[:] = []
    return found


def leftovers(base: dict, build: str, roots: List[str]) -> List[str]:
    """One line per thing the run left behind."""
    out = [f"process {p}: {_cmdline(p)}" for p in _own_procs(base, build, roots)]
    out += [f"mount {m}" for m in _mounts()
            if m not in base["mounts"] and any(_below(m, r) for r in roots)]
    out += [f"cgroup {c} (of {d})" for c, d in _own_cgroups()]
    out += [f"netns {n}" for n in sorted(_netns() - base["netns"]) if run_tag() in n]
    return out


def kill_below(root: str) -> List[str]:
    """SIGKILL every process whose command line names root (a unit's
    monitor names its run directory) and its descendants; returns their
    command lines."""
    procs = _procs()
    hit = {p for p in procs if root in _cmdline(p)} - {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in hit and pid not in hit:
                hit.add(pid)
                grew = True
    cmds = [_cmdline(p) for p in sorted(hit)]
    for p in hit:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return cmds


def clean(base: dict, build: str, roots: List[str]) -> None:
    """Remove what leftovers() lists, as far as it can."""
    for p in _own_procs(base, build, roots):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    for m in sorted((m for m in _mounts() if m not in base["mounts"]
                     and any(_below(m, r) for r in roots)), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True, timeout=30)
    for c, _ in _own_cgroups():
        for top, _, _ in sorted(os.walk(c), key=lambda t: len(t[0]), reverse=True):
            try:
                os.rmdir(top)
            except OSError:
                pass
    for n in sorted(_netns() - base["netns"]):
        if run_tag() in n:
            subprocess.run(["ip", "netns", "del", n], capture_output=True, timeout=30)
