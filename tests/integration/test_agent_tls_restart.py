# SPDX-License-Identifier: Apache-2.0
"""40 s of tests/soak/tls_restart.py (`make soak-tls` runs it for longer):
clients hold, open and abandon mutual-TLS connections while the agent is
killed with -9 and started again on a pod whose unit keeps running. No
death we did not cause, no sanitizer report (in the ASan suite), every
start answers and adopts the unit, the last SIGTERM stops it cleanly."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import CELL_BUILD, ROOT

DRIVER = os.path.join(ROOT, "tests", "soak", "tls_restart.py")


def test_tls_front_survives_kill9_restarts_under_hostile_clients(tmp_path):
    env = dict(os.environ, CELL_BUILD=CELL_BUILD, TLS_SOAK_MINUTES="0.67",
               TLS_SOAK_OUT=str(tmp_path))
    p = subprocess.run(["/usr/bin/python3", DRIVER], env=env, capture_output=True,
                       text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    with open(tmp_path / "summary.json") as f:
        s = json.load(f)
    # The run did what it says: restarts, adoptions, every kind of client.
    assert s["restarts"] >= 4 and s["adopted"] >= 2, out[-3000:]
    for kind in ("hold", "quick", "abandon", "badcert", "slow"):
        assert s["outcomes"].get(f"{kind}/ok", 0) > 0, (kind, s["outcomes"])
