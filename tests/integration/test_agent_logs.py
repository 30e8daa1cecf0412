# SPDX-License-Identifier: Apache-2.0
"""Where Kip and operators look for logs (issue 7), against a real unit:

- the agent's own log also goes to a file (--agent-log, itzo.log on a real
  cell), size-rotated, and the controller can read it through file/;
- each unit run's CRI log is linked as <dir>/<pod>_<namespace>_<unit>-<id>.log
  (the kubelet's /var/log/containers, here a directory of the test's own);
- unit logs rotate by size, keeping N files, and `logs` and a follow read
  across rotations without losing or repeating a line, including a line
  whose pieces (P records) landed in two files.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest

from images import Image, busybox_layer, push
from wire import unit
from test_agent_api import pod_agent

BB = "/bin/busybox"
N = 600
LONG = "y" * 20000 + "END"
# Waits for the test's go (a file made through exec), then writes N
# numbered lines, 4 ms apart, and one 20000-byte line: the monitor cuts it
# into a 16 KiB P record and an F record, and with 4 KiB files each goes to
# a file of its own.
SCRIPT = (f"while [ ! -e /tmp/go ]; do {BB} usleep 10000; done; "
          f"i=0; while [ $i -lt {N} ]; do echo line-$i; i=$((i+1)); {BB} usleep 4000; done; "
          f"{BB} printf '%s\\n' {LONG}; echo last; exec {BB} sleep 100000")


@pytest.fixture(scope="module")
def cell(tmp_path_factory, module_registry):
    reg = module_registry
    push(reg, "t/bbl", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    name = f"lg{os.getpid()}"
    units = [unit(name, reg.ref("t/bbl", "v1"), command=["/bin/sh", "-c", SCRIPT])]
    with pod_agent(str(tmp_path_factory.mktemp("logs")), reg, "ns-logs_web", units,
                   lambda s: s["unitStatus"] and
                   "running" in (s["unitStatus"][0].get("state") or {}),
                   "--container-log-max-size", "4Ki", "--container-log-max-files", "5",
                   "--agent-log-max-size", "8192", "--agent-log-max-files", "3") as (a, c):
        yield a, c, name


def collect_follow(s, until: bytes, timeout: float = 60.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and until not in out:
        f = s.recv(max(0.1, deadline - time.monotonic()))
        if f is None:
            break
        assert f[0] == 1, f
        out += f[1]
    return out


def check_numbered(lines, what, from_start=True):
    nums = [int(l[5:]) for l in lines if l.startswith("line-")]
    assert nums, what
    if from_start:
        assert nums[0] == 0, (what, nums[:5])
    assert nums == list(range(nums[0], nums[0] + len(nums))), \
        (what, [n for i, n in enumerate(nums) if i and n != nums[i - 1] + 1][:10])
    assert nums[-1] == N - 1, (what, nums[-5:])


def test_logs_and_follows_across_rotations(cell):
    a, c, name = cell
    plain = c.follow_logs(name)
    meta = c.follow_logs(name, metadata=True)
    time.sleep(0.3)
    assert c.exec(name, [BB, "touch", "/tmp/go"]).collect()[2] == 0
    # Both read at once: a client that does not read does not answer
    # pings either, and the agent drops a peer silent for 15 s.
    res = {}
    t = threading.Thread(target=lambda: res.update(meta=collect_follow(meta, b" F last\n")))
    t.start()
    got = collect_follow(plain, b"last\n")
    t.join()
    got_meta = res["meta"]
    plain.close()
    meta.close()

    run_log = os.path.realpath(os.path.join(a.dir, "state", "units", name))
    logs_dir = [os.path.join(run_log, d) for d in os.listdir(run_log) if d.isdigit()]
    assert len(logs_dir) == 1, logs_dir
    files = sorted(f for f in os.listdir(logs_dir[0]) if f.startswith("log"))
    # Rotated, and only 5 files kept, none much over 4 KiB but the ones
    # holding a single big record.
    assert files == ["log", "log.1", "log.2", "log.3", "log.4"], files

    # A plain follow: every line once, in order, the long one whole.
    lines = got.decode().split("\n")
    check_numbered(lines, "plain follow")
    assert lines.count(LONG) == 1, [len(l) for l in lines if l.startswith("y")]
    assert lines.index(LONG) == lines.index(f"line-{N - 1}") + 1
    # With metadata: whole CRI lines, the long one merged into one F line.
    mlines = got_meta.decode().split("\n")
    assert all(re.match(r"\S+ stdout F ", l) for l in mlines if l), mlines[:3]
    texts = [l.split(" ", 3)[3] for l in mlines if l]
    check_numbered(texts, "metadata follow")
    assert texts.count(LONG) == 1

    # logs: what the files still hold, across all of them, each line once.
    out = c.logs(name).decode().split("\n")
    assert out.count(LONG) == 1 and out[-2:] == ["last", ""], out[-3:]
    check_numbered(out, "logs", from_start=False)
    tail = c.logs(name, lines=3).decode()
    assert tail == f"line-{N - 1}\n{LONG}\nlast\n"
    meta_tail = c.logs(name, query="?lines=2&metadata=1").decode().split("\n")
    assert meta_tail[0].endswith(" stdout F " + LONG) and meta_tail[1].endswith(" F last")
    # Lines that only the rotated files hold.
    many = c.logs(name, lines=60).decode().split("\n")
    check_numbered(many, "logs lines=60", from_start=False)
    assert len(many) == 61


def test_follow_from_lines_then_rotation(cell):
    """lines= sends the end of the existing log first, read from the same
    open file that is then followed: nothing twice, nothing missing."""
    a, c, name = cell
    s = c.stream(f"rest/v1/logs/{name}%3Ffollow=1&lines=2")
    got = collect_follow(s, b"last\n", timeout=10)
    s.close()
    assert got == f"{LONG}\nlast\n".encode(), got[-100:]


def test_container_log_link(cell):
    a, c, name = cell
    d = os.path.join(a.dir, "varlog", "containers")
    links = [f for f in os.listdir(d) if f.startswith(f"web_ns-logs_{name}-")]
    assert len(links) == 1, os.listdir(d)
    # The kubelet's shape, which log shippers parse.
    assert re.fullmatch(rf"web_ns-logs_{name}-[0-9a-f]{{64}}\.log", links[0])
    p = os.path.join(d, links[0])
    assert os.path.islink(p)
    target = os.readlink(p)
    assert target.startswith(os.path.join(a.dir, "state", "units", name)), target
    with open(p) as f:
        last = f.read().splitlines()[-1]
    assert re.fullmatch(r"\S+Z stdout F last", last), last


def test_agent_log_file_rotates_and_is_served(cell):
    a, c, name = cell
    path = os.path.join(a.dir, "varlog", "itzo", "itzo.log")
    # Debug logging writes a line per request: enough to rotate a few times.
    for _ in range(300):
        c.ping()
    files = sorted(f for f in os.listdir(os.path.dirname(path)))
    assert files == ["itzo.log", "itzo.log.1", "itzo.log.2"], files
    for f in files:
        assert os.path.getsize(os.path.join(os.path.dirname(path), f)) <= 8192
    # What the controller does to show it: file/ with the absolute path.
    body = c.file(path, lines=5).decode()
    lines = body.splitlines()
    assert len(lines) == 5, body
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z cell-agent: ", l)
               for l in lines), lines
    with open(path + ".2") as f:
        first = f.readline()
    assert "cell-agent: " in first
