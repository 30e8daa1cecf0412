# SPDX-License-Identifier: Apache-2.0
"""cell-cloudinit vs Debian's cloud-init 22.4, applying one document.

Run by bench/cloudinit.sh. Both tools apply the same document (10
write_files: plain, base64, gzip+base64, modes 0400/0644; one runcmd) from
a NoCloud seed to the same Debian root (scripts/canonical-root.sh), each run
on a fresh overlay of it in private namespaces, first boot of a new
instance each time (tests/pylib/cloudinit_canon.py):

* cloud-init chrooted as a boot runs it: ``init --local``, ``init``,
  ``modules --mode config``, ``modules --mode final``, with the module lists
  the comparison tests use (bootcmd, write-files, hostname, users, ssh;
  runcmd; scripts-user, final-message);
* cell-cloudinit with ``--seed-dir --root --chroot-commands``.

The overlay's upper layer (where both tools write) is on ext4 (/var/tmp)
and then on tmpfs. Wall time: medians of BENCH_REPS runs (default 5),
interleaved; peak RSS from wait4 (cloud-init: the largest of its four
stages).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "tests", "pylib"))
import cloudinit_canon as canon  # noqa: E402

BENCH_DIR = "/var/tmp/cell-bench"


def document() -> bytes:
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
    doc = {"write_files": files, "runcmd": [f"echo done > {BENCH_DIR}/runcmd.out"]}
    return ("#cloud-config\n" + json.dumps(doc, indent=1) + "\n").encode()


def one(tool: str, root: str, binary: str, tmpfs: bool) -> list:
    res = canon.run(tool, root, document(), canon.INSTANCE_ID and
                    f"instance-id: {canon.INSTANCE_ID}\nlocal-hostname: bench\n",
                    binary=binary, boots=1, timing=True, tmpfs=tmpfs,
                    workdir="/var/tmp")
    if res["rc"][0] != 0:
        sys.exit(f"{tool} failed ({res['rc'][0]}):\n{res['log'][-3000:]}")
    return res["timing"][0]


def main() -> None:
    root, binary = sys.argv[1], os.path.abspath(sys.argv[2])
    reps = int(os.environ.get("BENCH_REPS", "5"))
    ver = canon.cloud_init_version(root)
    worst = 0.0
    print(f"document: 10 write_files + 1 runcmd, NoCloud seed, first boot, {reps} runs "
          f"each (median), cloud-init {ver} vs cell-cloudinit")
    print(f"  {'fs':<6} {'cloud-init':>12} {'cell-cloudinit':>15} {'ratio':>8} "
          f"{'RSS cloud-init':>15} {'RSS cell':>10}")
    for fs, tmpfs in (("ext4", False), ("tmpfs", True)):
        ci, cell = [], []
        for _ in range(reps):  # interleaved, so drift hits both alike
            ci.append(one("canonical", root, binary, tmpfs))
            cell.append(one("cell", root, binary, tmpfs))
        m_ci = statistics.median(t for t, _ in ci)
        m_cell = statistics.median(t for t, _ in cell)
        rss_ci, rss_cell = max(r for _, r in ci), max(r for _, r in cell)
        ratio = m_cell / m_ci
        worst = max(worst, ratio)
        print(f"  {fs:<6} {m_ci * 1000:9.1f} ms {m_cell * 1000:12.1f} ms {ratio:8.4f} "
              f"{rss_ci / 1024:11.1f} MiB {rss_cell / 1024:6.2f} MiB")
    print(f"  worst ratio {worst:.4f} (target <= 0.05: "
          f"{'met' if worst <= 0.05 else 'MISSED'})")
    sys.exit(0 if worst <= 0.05 else 1)


if __name__ == "__main__":
    main()
