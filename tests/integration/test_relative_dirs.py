# SPDX-License-Identifier: Apache-2.0
"""Relative directory flags mean the directory the user meant (issue 18):
every binary makes them absolute at start. `cell-agent --state-dir state`
once accepted pods and then failed every pull (`mount overlay on
…/rootfs: No such file or directory`: the puller changes directory)."""
from __future__ import annotations

import os
import subprocess

from conftest import CELL_BUILD
from images import Image, busybox_layer, push
from test_agent_api import start_agent
from test_agent_helpers import wait_for
from test_agent_pod import FAST, sh, state_of
from wire import pod_params
import leakcheck


def test_agent_with_relative_state_dir_and_cache_runs_a_pod(tmp_path, registry):
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    d = tmp_path / "agent"
    os.makedirs(d)
    leakcheck.note_state_dir(str(d / "rel-state"))
    a = start_agent(str(d), "--insecure-registry", registry.host,
                    "--state-dir", "rel-state", "--image-cache", "./rel-cache",
                    env=FAST, cwd=str(d))
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(registry.ref("t/bb", "v1"), "rel",
                                                    "exec sleep 1000")],
                                terminationGracePeriodSeconds=0))
        st = c.wait_status(lambda s: "running" in state_of(s, "rel")
                           or "waiting" in state_of(s, "rel") and "ContainerCreating"
                           not in str(state_of(s, "rel")), timeout=60)
        assert "running" in state_of(st, "rel"), st
        assert os.path.isdir(d / "rel-state" / "units" / "rel")
        assert os.path.isdir(d / "rel-cache")
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        units = d / "rel-state" / "units"
        wait_for(lambda: not os.listdir(units), timeout=30, what="the pod emptied")
    finally:
        assert a.stop() == 0, a.log()[-3000:]
        left = leakcheck.kill_below(str(d))
        assert not left, left


def test_cell_pull_relative_mount_and_upper_dir(tmp_path, registry):
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    r = subprocess.run([os.path.join(CELL_BUILD, "bin", "cell-pull"),
                        "--image", registry.ref("t/bb", "v1"), "--insecure-registry",
                        registry.host, "--workdir", "cache", "--mount", "root",
                        "--upper-dir", "upper", "--progress", "none"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert os.path.exists(tmp_path / "root" / "bin" / "busybox")
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "root")], capture_output=True)
