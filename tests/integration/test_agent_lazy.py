# SPDX-License-Identifier: Apache-2.0
"""The agent and lazy pulling (issue 29; docs/agent.md `--lazy-pull`,
"Metrics"): a pod whose image has an eStargz layer runs on a lazily served
layer (a `lazy/` lower in its rootfs overlay), the servers' counters show
in the agent's metrics, and the annotation `pod.elotl.co/lazy-pull:
"false"` makes the same pod pull the image whole (no `lazy/` lower)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from estargz import EstargzLayer, annotate
from images import File, Image, busybox_layer, push
from wire import pod_params
from test_agent_metrics import samples
from test_agent_pod import (FAST, cell, sh, wait_state, wait_units_gone)  # noqa: F401
from test_pull_lazy_image import lazy_mounts, servers

GREETING = "hello from a lazy layer\n"


def rootfs_lowers(agent_dir: str) -> list:
    """The lowerdir= of every overlay mounted under the agent's state."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            fs = line.split(" - ")[1].split()
            if mp.startswith(agent_dir) and fs[0] == "overlay":
                opts = fs[2].split(",")
                out += [o[len("lowerdir="):] for o in opts if o.startswith("lowerdir=")]
    return out


def metric(c, name: str, **labels) -> float:
    for n, l, v in samples(c.request("GET", "rest/v1/metrics").text):
        if n == name and all(l.get(k) == w for k, w in labels.items()):
            return v
    raise AssertionError(f"no {name}{labels}")


def lazy_image(registry) -> tuple:
    lazy = EstargzLayer([File("app/hello", GREETING), File("app/big", os.urandom(40000))])
    layers = [busybox_layer(), lazy]
    img = Image(layers, fmt="oci", config={"Cmd": ["/bin/sh"]},
                mutate_manifest=annotate(layers))
    push(registry, "lazyagent/app", "v1", img)
    return registry.ref("lazyagent/app", "v1"), lazy


def gc(a, run_pull) -> None:
    cache = os.path.join(a.dir, "cache")
    rc, _, err = run_pull("--gc", "--workdir", cache)
    assert rc == 0, err
    left = servers(cache)
    info = [open(f"/proc/{p}/cmdline", "rb").read() for p in left]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    for m in lazy_mounts(cache):
        subprocess.run(["umount", "-l", m], capture_output=True)
    assert not left, f"lazy servers left after gc: {left} {info} {err[-2000:]}"


def test_pod_runs_on_a_lazy_layer_and_the_annotation_turns_it_off(cell, registry,
                                                                  run_pull):
    ref, lazy = lazy_image(registry)
    a, c = cell(env={"CELL_PULL_LAZY_BACKGROUND": "0", "CELL_PULL_LAZY_STATS_MS": "100"})
    try:
        c.update_pod(pod_params("ns_pod", units=[
            sh(ref, "app", "cat /app/hello; wc -c /app/big; sleep 600")]))
        wait_state(c, "app", "running")
        deadline = time.monotonic() + 20
        while GREETING.strip() not in c.logs("app").decode() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert GREETING.strip() in c.logs("app").decode(), a.log()[-3000:]
        lowers = rootfs_lowers(a.dir)
        assert any(f"lazy/sha256-{lazy.hex}/mnt" in lw for lw in lowers), lowers
        # the server's counters reach the metrics (bytes read on demand)
        deadline = time.monotonic() + 10
        while metric(c, "cell_lazy_bytes_total", how="demand") == 0 and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(c, "cell_lazy_bytes_total", how="demand") > 0
        assert metric(c, "cell_lazy_demand_fetch_seconds_count") >= 1
        assert metric(c, "cell_lazy_chunks_refused_total") == 0

        # the same pod with the annotation: pulled whole, no lazy lower
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
        c.update_pod(pod_params("ns_pod", annotations={"pod.elotl.co/lazy-pull": "false"},
                                units=[sh(ref, "app", "cat /app/hello; sleep 600")]))
        wait_state(c, "app", "running")
        deadline = time.monotonic() + 20
        while GREETING.strip() not in c.logs("app").decode() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert GREETING.strip() in c.logs("app").decode(), a.log()[-3000:]
        lowers = rootfs_lowers(a.dir)
        assert lowers and not any("lazy/" in lw for lw in lowers), lowers
        assert os.path.isdir(os.path.join(a.dir, "cache", "layers", "sha256", lazy.diff_hex))
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        gc(a, run_pull)


def test_agent_flag_turns_lazy_off(cell, registry, run_pull):
    ref, lazy = lazy_image(registry)
    a, c = cell(extra=("--lazy-pull", "off"))
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "app", "cat /app/hello; sleep 600")]))
        wait_state(c, "app", "running")
        lowers = rootfs_lowers(a.dir)
        assert lowers and not any("lazy/" in lw for lw in lowers), lowers
        assert not servers(os.path.join(a.dir, "cache"))
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        gc(a, run_pull)


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def unit_root(a, name: str) -> str:
    """The rootfs of the unit's current run, as the host sees it."""
    d = os.path.join(a.dir, "state", "units", name)
    runs = sorted((int(r) for r in os.listdir(d) if r.isdigit()), reverse=True)
    return os.path.join(d, str(runs[0]), "rootfs")


def test_stalled_lazy_read_is_eio_and_a_unit_status_message(cell, registry, make_proxy,
                                                           run_pull):
    """The registry stalls while a unit reads a file not fetched yet
    (issue 29, Faults): the read fails with EIO in bounded time (2 tries
    of 1 s), the running unit's status says why (running.message, which
    Kip ignores), and once the unit ends with no termination message of
    its own (`cat … || exit 3`) its terminated.message carries it, its
    reason its own; logged once, counted in the metrics."""
    ref, lazy = lazy_image(registry)
    proxy = make_proxy(registry)
    ref = f"{proxy.host}/lazyagent/app:v1"
    a, c = cell(env={"CELL_PULL_LAZY_BACKGROUND": "0", "CELL_PULL_LAZY_STATS_MS": "100",
                     "CELL_PULL_RANGE_TIMEOUT_MS": "1000", "CELL_PULL_RANGE_RETRIES": "1",
                     "CELL_PULL_RETRY_BASE_MS": "50"},
                extra=("--insecure-registry", proxy.host))
    script = ("cat /app/hello; while [ ! -e /tmp/go ]; do sleep 0.1; done; "
              "if cat /app/big >/dev/null; then echo READ-OK; else echo READ-EIO; fi; "
              "while [ ! -e /tmp/end ]; do sleep 0.1; done; "
              "cat /app/big >/dev/null || exit 3")
    want = (f"range read of layer sha256:{lazy.hex[:12]}... from {proxy.host}: "
            "timed out after 2 tries")
    try:
        c.update_pod(pod_params("ns_pod", restart_policy="Never",
                                units=[sh(ref, "app", script)]))
        wait_state(c, "app", "running")
        wait_for(lambda: GREETING.strip() in c.logs("app").decode(), 20,
                 "the unit's first read")
        proxy.delay("/blobs/", 30)
        t0 = time.monotonic()
        open(os.path.join(unit_root(a, "app"), "tmp", "go"), "w").close()
        wait_for(lambda: b"READ-" in c.logs("app"), 20, "the stalled read's end")
        took = time.monotonic() - t0
        logs = c.logs("app").decode()
        assert "READ-EIO" in logs and "Input/output error" in logs, logs
        assert took < 8, took
        st = wait_state(c, "app", "running", timeout=10,
                        pred=lambda u: u["state"]["running"].get("message") == want)
        assert "terminated" not in st["unitStatus"][0]["state"]
        assert metric(c, "cell_lazy_reads_failed_total") >= 1

        open(os.path.join(unit_root(a, "app"), "tmp", "end"), "w").close()
        st = wait_state(c, "app", "terminated", timeout=30)
        t = st["unitStatus"][0]["state"]["terminated"]
        assert t["exitCode"] == 3 and t["reason"] == "Error", t
        assert t["message"] == "lazy pull: " + want, t
        log = a.log()
        assert log.count(f"lazy layer sha256-{lazy.hex}: reads fail: ") == 1, log[-3000:]
        proxy.clear()
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        proxy.clear()
        gc(a, run_pull)


def test_lazy_layer_survives_an_agent_kill_9(cell, registry, run_pull, tmp_path):
    """The agent is killed -9 while a unit reads a lazy layer, a file a
    second, most not fetched yet (issue 29, Faults): the unit keeps
    reading, every file right and no EIO, through the same server; the
    agent restarted on the same state finds the pod Running and the
    server's counts (its metrics go on counting the layer's bytes); once
    the pod is deleted and the gc has run, no server, mount or directory
    of the layer is left."""
    import hashlib
    files = {f"app/f{i}": os.urandom(3000) for i in range(30)}
    lazy = EstargzLayer([File("app/hello", GREETING)] +
                        [File(n, d) for n, d in files.items()])
    layers = [busybox_layer(), lazy]
    push(registry, "lazyagent/kill", "v1",
         Image(layers, fmt="oci", config={"Cmd": ["/bin/sh"]}, mutate_manifest=annotate(layers)))
    ref = registry.ref("lazyagent/kill", "v1")
    env = {"CELL_PULL_LAZY_BACKGROUND": "0", "CELL_PULL_LAZY_STATS_MS": "100"}
    d = tmp_path / "agent"
    cache = os.path.join(str(d), "cache")
    layer_dir = os.path.join(cache, "lazy", "sha256-" + lazy.hex)
    script = ("cat /app/hello; i=0; while [ $i -lt 30 ]; do "
              "echo \"read $(busybox md5sum /app/f$i 2>&1)\"; i=$((i+1)); sleep 1; done; "
              "exec sleep 600")

    def reads() -> list:
        return [l.split()[1:] for l in c.logs("app").decode().splitlines()
                if l.startswith("read ")]

    a, c = cell(env=env, d=d)
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "app", script)]))
        wait_state(c, "app", "running")
        wait_for(lambda: len(reads()) >= 3, 30, "the unit's first reads")
        (server,) = servers(cache)
        wait_for(lambda: metric(c, "cell_lazy_bytes_total", how="demand") > 0, 10,
                 "the server's counts in the metrics")
        n_at_kill = len(reads())
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        time.sleep(3)  # the unit reads on with no agent
        a, c = cell(env=env, d=d)
        st = wait_state(c, "app", "running")
        assert st["unitStatus"][0]["restartCount"] == 0, st
        wait_for(lambda: len(reads()) >= n_at_kill + 6, 30, "reads after the restart")
        got = reads()
        for i, r in enumerate(got):
            want = hashlib.md5(files[f"app/f{i}"]).hexdigest()
            assert r == [want, f"/app/f{i}"], (i, r, c.logs("app").decode())
        assert "error" not in c.logs("app").decode().lower()
        assert servers(cache) == [server], "the same server serves on"
        assert "message" not in st["unitStatus"][0]["state"]["running"], st
        # the restarted agent's metrics: the server's counts, still growing
        before = metric(c, "cell_lazy_bytes_total", how="demand")
        assert before > 0
        wait_for(lambda: metric(c, "cell_lazy_bytes_total", how="demand") > before, 15,
                 "more bytes counted after the restart")
        assert metric(c, "cell_lazy_reads_failed_total") == 0

        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        gc(a, run_pull)
    assert not os.path.exists(layer_dir), os.listdir(layer_dir)
    assert not lazy_mounts(cache)
