# SPDX-License-Identifier: Apache-2.0
"""Interactive exec against a real unit, driven by a Python websocket client
the way the controller's RunInContainer drives it (issue 7), and exec's
process trees (issue 14).

- With a TTY: the command has the pty as its controlling terminal, the size
  sent on channel 4 is what `stty size` reports, everything comes back on
  channel 1, and `cat` echoes stdin until the end of stdin (an empty
  channel-0 frame).
- Without a TTY: stdin is a pipe that the empty frame closes; the resize
  frame the controller always sends is ignored.
- An interactive attach writes into the unit's stdin (a FIFO, as Itzo gives
  every unit, which never reads an end: a unit reading stdin waits).
- Closing the stream kills everything the command started, whatever it
  did to escape (background jobs, a new session), and the exec'd processes
  are accounted to the unit's cgroup (a child cgroup of it) meanwhile. A
  command that exits normally takes its background children along too.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from images import Image, busybox_layer, push
from wire import unit
from test_agent_api import pod_agent

BB = "/bin/busybox"


@pytest.fixture(scope="module")
def pod(tmp_path_factory, module_registry):
    reg = module_registry
    push(reg, "t/bbx", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    name = f"ex{os.getpid()}"
    units = [unit(name, reg.ref("t/bbx", "v1"), command=[BB, "sleep", "100000"]),
             unit(name + "r", reg.ref("t/bbx", "v1"),
                  command=["/bin/sh", "-c", "while read l; do echo \"got $l\"; done; echo eof"],
                  stdin=True)]
    with pod_agent(str(tmp_path_factory.mktemp("exec")), reg, "ns_exec", units,
                   lambda s: len(s["unitStatus"]) == 2 and
                   all("running" in (u.get("state") or {}) for u in s["unitStatus"])) as (a, c):
        yield a, c, name


def read_until(s, pred, timeout=10.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred(out):
        f = s.recv(max(0.1, deadline - time.monotonic()))
        if f is None:
            break
        assert f[0] in (1, 3), f  # a TTY sends everything on channel 1
        if f[0] == 1:
            out += f[1]
    return out


def test_tty_exec_size_and_controlling_terminal(pod):
    a, c, name = pod
    s = c.exec(name, ["/bin/sh", "-c",
                      f"read x; {BB} stty size; {BB} cut -d' ' -f7 /proc/self/stat; "
                      "echo to-stderr >&2"], interactive=True, tty=True)
    # What RunInContainer does: the default size first, then the user's.
    s.resize(25, 80)
    s.resize(33, 101)
    time.sleep(0.2)
    s.send(0, "go\r")  # a terminal's Enter; the line discipline makes it \n
    out, err, code = s.collect()
    assert code == 0 and err == b"", (out, err, code)
    lines = out.decode().replace("\r", "").split("\n")
    assert "33 101" in lines, out
    # Field 7 of /proc/self/stat: the controlling terminal (0 when none).
    tty_nr = [l for l in lines if l.isdigit()]
    assert tty_nr and int(tty_nr[0]) != 0, out
    assert "to-stderr" in lines, out


def test_tty_cat_echoes_until_eof(pod):
    a, c, name = pod
    s = c.exec(name, [BB, "cat"], interactive=True, tty=True)
    s.resize(25, 80)
    s.send(0, "hello\r")
    # The terminal echoes the line, then cat prints it.
    got = read_until(s, lambda o: o.count(b"hello") >= 2)
    assert got.count(b"hello") >= 2, got
    s.send(0, "world\r")
    got = read_until(s, lambda o: o.count(b"world") >= 2)
    assert got.count(b"world") >= 2, got
    s.send(0, b"")  # the end of stdin
    out, err, code = s.collect(timeout=10)
    assert code == 0, (out, err, code)


def test_pipe_stdin_eof_and_resize_ignored(pod):
    a, c, name = pod
    s = c.exec(name, [BB, "cat"], interactive=True, tty=False)
    s.resize(25, 80)  # the controller sends it even without a TTY
    s.send(0, "one\ntwo")
    s.send(0, b"")
    assert s.collect(timeout=10) == (b"one\ntwo", b"", 0)
    # Without Interactive there is no stdin at all: EOF at once.
    out, err, code = c.exec(name, [BB, "cat"]).collect(timeout=10)
    assert (out, err, code) == (b"", b"", 0)


def procs_with(marker: str) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:3] == [BB.encode(), b"sleep", marker.encode()]:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return f.read()


def wait_gone(markers, timeout=10.0) -> dict:
    deadline = time.monotonic() + timeout
    left = {}
    while time.monotonic() < deadline:
        left = {m: procs_with(m) for m in markers}
        if not any(left.values()):
            return {}
        time.sleep(0.1)
    return left


def test_closing_the_stream_kills_the_whole_tree(pod):
    a, c, name = pod
    base = 200000 + os.getpid() % 10000 * 10
    bg, own_session, fg = (str(base + i) for i in range(3))
    s = c.exec(name, ["/bin/sh", "-c",
                      f"{BB} sleep {bg} & {BB} setsid {BB} sleep {own_session} & "
                      f"echo started; {BB} sleep {fg}"])
    got = read_until(s, lambda o: b"started" in o)
    assert b"started" in got
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(procs_with(m) for m in (bg, own_session, fg)):
        time.sleep(0.05)
    pids = {m: procs_with(m) for m in (bg, own_session, fg)}
    assert all(pids.values()), pids
    # Accounted to the unit: a cgroup below the unit's, in every hierarchy.
    for m, ps in pids.items():
        cg = cgroup_of(ps[0])
        assert re.search(rf"/{re.escape(name)}[^/\n]*/exec-\d+\n", cg) or \
            re.search(rf"{re.escape(name)}.*/exec-\d+", cg), (m, cg)
    s.close()
    left = wait_gone((bg, own_session, fg))
    assert not left, f"left running after the stream closed: {left}"
    # The unit itself is untouched.
    st = c.status()
    assert "running" in (st["unitStatus"][0].get("state") or {}), st
    assert st["unitStatus"][0]["restartCount"] == 0


def test_a_finished_command_takes_its_background_along(pod):
    a, c, name = pod
    marker = str(300000 + os.getpid() % 10000)
    out, err, code = c.exec(name, ["/bin/sh", "-c",
                                   f"{BB} setsid {BB} sleep {marker} >/dev/null 2>&1 & "
                                   "echo done"]).collect()
    assert (out, code) == (b"done\n", 0), (out, err, code)
    assert not wait_gone((marker,)), "a background child outlived its exec"


def test_exec_cgroups_are_removed(pod):
    a, c, name = pod
    assert c.exec(name, [BB, "true"]).collect()[2] == 0
    time.sleep(0.3)
    with open("/proc/self/mountinfo") as f:
        roots = [l.split()[4] for l in f if " - cgroup" in l]
    left = []
    for r in roots:
        for top, dirs, _ in os.walk(r):
            left += [os.path.join(top, d) for d in dirs
                     if d.startswith("exec-") and name in top]
    assert not left, left


def test_attach_stdin_reaches_the_unit(pod):
    a, c, name = pod
    s = c.attach(name + "r", interactive=True)
    time.sleep(0.3)
    s.send(0, "hello\n")
    got = read_until(s, lambda o: b"got hello\n" in o)
    assert b"got hello\n" in got, got
    # The end of this client's stdin is not the end of the unit's: it
    # keeps reading, and a second attach reaches it too (stdinOnce false).
    s.send(0, b"")
    s.close()
    s = c.attach(name + "r", interactive=True)
    time.sleep(0.3)
    s.send(0, "again\n")
    got = read_until(s, lambda o: b"got again\n" in o)
    s.close()
    assert b"got again\n" in got and b"eof" not in got, got
    st = c.status()
    assert all("running" in (u.get("state") or {}) for u in st["unitStatus"]), st
