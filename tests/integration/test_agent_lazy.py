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
    assert not left, f"lazy servers left after gc: {left} {info}"


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
