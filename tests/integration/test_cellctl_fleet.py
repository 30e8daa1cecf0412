# SPDX-License-Identifier: Apache-2.0
"""A fleet: 10 cell-agents, each in its own network namespace with its own
address (a simulated VPC; namespaces named wtctl…), one cellctl dispatching
examples/hello.yaml to all of them at once; every pod reaches Running and
`cellctl watch` shows them."""
from __future__ import annotations

import re
import subprocess

from conftest import CELL_BUILD
from fleet import Fleet
from test_cellctl import CELLCTL, FAST, local_manifest


def test_fleet_of_ten_cells(tmp_path):
    with Fleet(10, "wtctl", CELL_BUILD, env=FAST) as f:
        m = local_manifest(tmp_path, "hello.yaml", f.image)
        with f.ctl_ns():
            r = subprocess.run([CELLCTL, "run", m, *f.cell_args(), "--timeout", "120"],
                               capture_output=True, text=True, timeout=180)
            assert r.returncode == 0, r.stdout + r.stderr + f.log(0)[-2000:]
            running = set(re.findall(r"on (10\.214\.\d+\.2): Running", r.stdout))
            assert running == set(f.addrs), r.stdout
            w = subprocess.run([CELLCTL, "watch", *f.cell_args(), "--count", "1"],
                               capture_output=True, text=True, timeout=60)
        assert w.returncode == 0, w.stderr
        lines = w.stdout.strip().split("\n")
        assert lines[0].split()[:3] == ["CELL", "PHASE", "READY"]
        rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
        assert set(rows) == set(f.addrs), w.stdout
        assert all(r[1] == "Running" and r[2] == "1/1" for r in rows.values()), w.stdout
        assert "\033[" not in w.stdout  # piped: plain lines, no redraw
