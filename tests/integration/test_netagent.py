# SPDX-License-Identifier: Apache-2.0
"""The network agent (kube-router) supervised by cell-agent, with a stand-in
executable that records its arguments and crashes when told to. The agent
runs in a simulated cell (tests/pylib/vpc.py) so that the primary IP it
passes is the VPC's."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from test_net import host_untouched  # noqa: F401  (module fixture)
from test_net_agent import CellAgent, vpc  # noqa: F401  (fixtures)
from vpc import PRIMARY_IP
from wire import pod_params

STAND_IN = """#!/bin/sh
echo "$@" >> "$KR_RECORD"
echo "kube-router stand-in $$ started"
if [ -e "$KR_CRASH" ]; then echo "crashing"; exit 3; fi
exec sleep 1000
"""


@pytest.fixture
def kr(vpc, registry, tmp_path):  # noqa: F811
    bin_ = tmp_path / "kube-router"
    bin_.write_text(STAND_IN)
    bin_.chmod(0o755)
    c = CellAgent(vpc, registry, str(tmp_path))
    c.env.update({"CELL_AGENT_KUBE_ROUTER": str(bin_),
                  "CELL_AGENT_NETAGENT_LOG": str(tmp_path / "kr.log"),
                  "KR_RECORD": str(tmp_path / "record"),
                  "KR_CRASH": str(tmp_path / "crash")})
    c.tmp = tmp_path
    yield c
    c.close()
    st = tmp_path / "agent" / "state" / "netagent.json"
    if st.exists():
        try:
            os.kill(json.loads(st.read_text())["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def starts(c) -> list:
    p = c.tmp / "record"
    return p.read_text().splitlines() if p.exists() else []


def wait(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def kr_pid(c) -> int:
    return json.loads((c.tmp / "agent" / "state" / "netagent.json").read_text())["pid"]


def test_kube_router_started_with_itzos_flags_restarted_and_readopted(kr):
    a, c = kr.start()
    c.update_pod(pod_params("ns_pod", node_name="node-1"))
    assert wait(lambda: "no kubeconfig package deployed" in a.log())
    assert starts(kr) == []
    c.deploy("ns_pod", "kubeconfig", {"kubeconfig/kubeconfig": "apiVersion: v1\n"})
    assert wait(lambda: starts(kr))
    args = starts(kr)[0].split()
    kc = [x for x in args if x.startswith("--kubeconfig=")]
    assert kc and kc[0].endswith("/kubeconfig") and os.path.isfile(kc[0].split("=", 1)[1])
    assert args[1:] == ["--hostname-override=node-1", f"--ip-address-override={PRIMARY_IP}",
                        "--hairpin-mode=true", "--disable-source-dest-check=false",
                        "--enable-pod-egress=false", "--enable-cni=false",
                        "--run-router=false", "--v=2"]
    assert wait(lambda: "stand-in" in (kr.tmp / "kr.log").read_text())

    # Crashes are restarted with back-off.
    (kr.tmp / "crash").write_text("")
    os.kill(kr_pid(kr), signal.SIGKILL)
    assert wait(lambda: len(starts(kr)) >= 4, timeout=30), starts(kr)
    assert "network agent" in a.log() and "exited" in a.log()
    (kr.tmp / "crash").unlink()
    n = wait(lambda: (kr.tmp / "agent" / "state" / "netagent.json").exists() and
             os.path.exists(f"/proc/{kr_pid(kr)}") and len(starts(kr)), timeout=30)
    assert n
    pid = kr_pid(kr)
    time.sleep(1)
    assert kr_pid(kr) == pid  # stays up

    # kill -9 of cell-agent: the next one re-adopts it, starts no second.
    count = len(starts(kr))
    a.proc.kill()
    a.proc.wait()
    a, c = kr.start()
    assert wait(lambda: "re-adopted" in a.log())
    time.sleep(2)
    assert len(starts(kr)) == count and kr_pid(kr) == pid

    # No NodeName any more: it is stopped.
    c.update_pod(pod_params("ns_pod"))
    assert wait(lambda: not os.path.exists(f"/proc/{pid}") or
                open(f"/proc/{pid}/stat").read().split()[2] == "Z")


def test_missing_kube_router_is_logged_not_fatal(kr):
    kr.env["CELL_AGENT_KUBE_ROUTER"] = str(kr.tmp / "no-such-binary")
    a, c = kr.start()
    c.deploy("ns_pod", "kubeconfig", {"kubeconfig/kubeconfig": "apiVersion: v1\n"})
    c.update_pod(pod_params("ns_pod", node_name="node-1"))
    assert wait(lambda: "kube-router is not installed" in a.log())
    assert a.alive() and c.status()["unitStatus"] == []
