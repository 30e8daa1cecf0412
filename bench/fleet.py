# SPDX-License-Identifier: Apache-2.0
"""bench/fleet.sh: dispatch one pod to each of N cells (images cached by a
warm-up round), cellctl against a Python client speaking the same wire
(tests/pylib/wire.py with requests), and print both side by side."""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))

from fleet import Fleet  # noqa: E402
from wire import CellClient  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(ROOT, "build"))
CELLCTL = os.path.join(BUILD, "bin", "cellctl")
N = int(os.environ.get("FLEET_CELLS", "10"))
REPS = int(os.environ.get("BENCH_REPS", "3"))
FAST = {"CELL_CGROUP_NEST": "1"}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cellctl(f, manifest):
    c0, t0 = children_cpu(), time.monotonic()
    r = subprocess.run([CELLCTL, "run", manifest, *f.cell_args(), "--quiet",
                        "--timeout", "120"], capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, children_cpu() - c0
    if r.returncode:
        raise SystemExit("cellctl run failed:\n" + r.stderr)
    return wall, cpu


def run_python(f, params, pkgs):
    c0, t0 = time.process_time(), time.monotonic()
    errors = []

    def one(addr):
        try:
            c = CellClient(addr, 6421, ca=f"{f.pki}/ca.crt", cert=f"{f.pki}/client.crt",
                           key=f"{f.pki}/client.key")
            c.ping()
            for name, data in pkgs.items():
                c.deploy(params["PodName"], name, data)
            c.update_pod(params)
            c.wait_status(lambda s: s.get("unitStatus") and all(
                "running" in (u.get("state") or {}) for u in s["unitStatus"]),
                timeout=120, every=0.25)
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{addr}: {e}")

    ts = [threading.Thread(target=one, args=(a,)) for a in f.addrs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise SystemExit("python dispatch failed: " + "; ".join(errors))
    return time.monotonic() - t0, time.process_time() - c0


def main():
    work = tempfile.mkdtemp(prefix="wtctl-bench-")
    with Fleet(N, "wtctlb", BUILD, env=FAST) as f:
        with open(os.path.join(ROOT, "examples", "hello.yaml")) as src:
            text = re.sub(r"image: busybox\b", f"image: {f.image}", src.read())
        manifest = os.path.join(work, "hello.yaml")
        with open(manifest, "w") as dst:
            dst.write(text)
        pkgdir = os.path.join(work, "pkgs")
        params = json.loads(subprocess.run(
            [CELLCTL, "convert", manifest, "--packages", pkgdir], check=True,
            capture_output=True, text=True).stdout)
        pkgs = {n[:-7]: open(os.path.join(pkgdir, n), "rb").read()
                for n in os.listdir(pkgdir)}
        with f.ctl_ns():
            run_cellctl(f, manifest)  # warm-up: pulls and caches the image
            f.delete_pods()
            rows = {"cellctl": [], "python wire.py": []}
            for _ in range(REPS):
                rows["cellctl"].append(run_cellctl(f, manifest))
                f.delete_pods()
                rows["python wire.py"].append(run_python(f, params, pkgs))
                f.delete_pods()
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in rows.items()}
    print(f"\ndispatch of one pod to each of {N} cells (images cached), "
          f"best of {REPS}:")
    print(f"{'client':<16} {'first run -> all running':>26} {'controller CPU per pod':>24}")
    for k, (w, c) in best.items():
        print(f"{k:<16} {w * 1000:>23.0f} ms {c / N * 1000:>21.1f} ms")
    cw, cc = best["cellctl"]
    pw, pc = best["python wire.py"]
    print(f"ratio (python / cellctl): time {pw / cw:.2f}x, CPU per pod {pc / cc:.1f}x")


if __name__ == "__main__":
    main()
