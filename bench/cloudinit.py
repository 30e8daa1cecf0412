"""cell-cloudinit vs Debian's cloud-init, applying one document.

Run by bench/cloudinit.sh inside a private mount and UTS namespace. The
document: 10 write_files (plain, base64, gzip+base64; modes and owners) and
one runcmd. Both tools read it from a NoCloud seed and apply it to the same
Debian root:

* cloud-init 22.4 (the root's own, chrooted): ``cloud-init init``, then
  ``modules --mode config`` and ``modules --mode final`` -- the boot
  sequence; write_files runs in init, runcmd is written in config and run in
  final by scripts-user. Its module lists are cut down to exactly those
  modules (write-files, runcmd, scripts-user), so what is measured is its
  own start-up and bookkeeping, not unrelated modules.
* cell-cloudinit: ``--datasource nocloud --seed-dir SEED --root ROOT
  --chroot-commands`` (runcmd runs chrooted, like cloud-init's).

Between repetitions every trace of the previous run (written files, both
tools' state) is removed, so each run is a first boot of a new instance.
Medians of BENCH_REPS runs (default 5); the peak RSS comes from GNU time.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CLOUD_CFG = """\
datasource_list: [NoCloud, None]
cloud_init_modules: [write-files]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts-user]
users: []
disable_root: false
preserve_hostname: true
"""
BENCH_DIR = "/var/tmp/cell-bench"


def document() -> str:
    files = []
    for i in range(10):
        body = f"file {i}\n" + "x" * (64 * i) + "\n"
        if i % 3 == 0:
            f = {"content": body}
        elif i % 3 == 1:
            f = {"content": base64.b64encode(body.encode()).decode(), "encoding": "b64"}
        else:
            z = gzip.compress(body.encode(), mtime=0)
            f = {"content": base64.b64encode(z).decode(), "encoding": "gz+b64"}
        f.update({"path": f"{BENCH_DIR}/f{i}.txt", "owner": "root:root",
                  "permissions": "0400" if i < 5 else "0644"})
        files.append(f)
    doc = {"write_files": files,
           "runcmd": [f"echo done > {BENCH_DIR}/runcmd.out"]}
    return "#cloud-config\n" + json.dumps(doc, indent=1) + "\n"


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def mount_api(root: str) -> None:
    for d in ("proc", "sys", "dev", "run"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    sh("mount", "--make-rprivate", "/")
    sh("mount", "-t", "proc", "proc", f"{root}/proc")
    sh("mount", "--rbind", "/sys", f"{root}/sys")
    sh("mount", "--rbind", "/dev", f"{root}/dev")
    sh("mount", "-t", "tmpfs", "tmpfs", f"{root}/run")


def reset(root: str, state: str) -> None:
    for p in (BENCH_DIR.lstrip("/"), "var/lib/cloud/instance", "var/lib/cloud/instances",
              "var/lib/cloud/data", "var/lib/cloud/sem", "var/lib/cloud/handlers",
              "var/lib/cloud/scripts", "run/cloud-init"):
        full = os.path.join(root, p)
        if os.path.islink(full) or os.path.isfile(full):
            os.unlink(full)
        else:
            shutil.rmtree(full, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)


def check(root: str, tool: str) -> None:
    for i in range(10):
        with open(os.path.join(root, BENCH_DIR.lstrip("/"), f"f{i}.txt")) as f:
            assert f.read().startswith(f"file {i}\n"), (tool, i)
    with open(os.path.join(root, BENCH_DIR.lstrip("/"), "runcmd.out")) as f:
        assert f.read() == "done\n", tool


def run_cloud_init(root: str) -> float:
    t0 = time.perf_counter()
    for args in (["init"], ["modules", "--mode", "config"], ["modules", "--mode", "final"]):
        p = subprocess.run(["chroot", root, "cloud-init", *args], capture_output=True,
                           text=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                           "LANG": "C.UTF-8"})
        if p.returncode != 0:
            sys.exit(f"cloud-init {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return time.perf_counter() - t0


def cell_cmd(binary: str, root: str, seed: str, state: str, log: str) -> list:
    return [binary, "-q", "--datasource", "nocloud", "--seed-dir", seed, "--root", root,
            "--state-dir", state, "--log-file", log, "--chroot-commands"]


def run_cell(cmd: list) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"cell-cloudinit failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return dt


def peak_rss_kib(cmd: list) -> int:
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cell-cloudinit failed under time:\n{p.stderr[-3000:]}")
    return int(p.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    reps = int(os.environ.get("BENCH_REPS", "5"))
    root, binary = os.path.abspath(a.root), os.path.abspath(a.binary)
    work = tempfile.mkdtemp(prefix="cell-bench-cloudinit.")
    doc = document()
    meta = "instance-id: iid-bench\n"
    seed = os.path.join(work, "seed")
    os.makedirs(seed)
    for d in (seed, os.path.join(root, "var/lib/cloud/seed/nocloud")):
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "user-data"), "w") as f:
            f.write(doc)
        with open(os.path.join(d, "meta-data"), "w") as f:
            f.write(meta)
    os.makedirs(os.path.join(root, "etc/cloud/cloud.cfg.d"), exist_ok=True)
    with open(os.path.join(root, "etc/cloud/cloud.cfg.d/99-cell-bench.cfg"), "w") as f:
        f.write(CLOUD_CFG)
    mount_api(root)
    state, log = os.path.join(work, "state"), os.path.join(work, "cell.log")
    cmd = cell_cmd(binary, root, seed, state, log)
    ci, cell = [], []
    ver = subprocess.run(["chroot", root, "cloud-init", "--version"], capture_output=True,
                         text=True).stdout.strip() or "cloud-init"
    for _ in range(reps):  # interleaved, so drift hits both alike
        reset(root, state)
        ci.append(run_cloud_init(root))
        check(root, "cloud-init")
        reset(root, state)
        cell.append(run_cell(cmd))
        check(root, "cell-cloudinit")
    reset(root, state)
    rss = peak_rss_kib(cmd)
    reset(root, state)
    shutil.rmtree(work, ignore_errors=True)
    m_ci, m_cell = statistics.median(ci), statistics.median(cell)
    ratio = m_cell / m_ci
    print(f"document: 10 write_files + 1 runcmd, NoCloud seed, {reps} runs each (median)")
    print(f"  {ver:<28} {m_ci * 1000:9.1f} ms   (min {min(ci) * 1000:.1f}, max "
          f"{max(ci) * 1000:.1f})")
    print(f"  {'cell-cloudinit':<28} {m_cell * 1000:9.1f} ms   (min {min(cell) * 1000:.1f}, "
          f"max {max(cell) * 1000:.1f})")
    print(f"  ratio cell-cloudinit/cloud-init: {ratio:.4f}  (target <= 0.05: "
          f"{'met' if ratio <= 0.05 else 'MISSED'})")
    print(f"  cell-cloudinit peak RSS: {rss} KiB = {rss / 1024:.2f} MiB  (target <= 4 MiB: "
          f"{'met' if rss <= 4096 else 'MISSED'})")
    sys.exit(0 if ratio <= 0.05 and rss <= 4096 else 1)


if __name__ == "__main__":
    main()
