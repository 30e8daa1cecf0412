# SPDX-License-Identifier: Apache-2.0
"""Lazy pulling against the full pull, side by side in one run.

The image: a Debian-like base (this machine's /etc and /usr/bin files, up
to BENCH_BASE_MB, default 40) and a layer of BENCH_MB (default 300) MB of
random data files plus a small app (app/config, app/run.sh, a few small
files), once as plain gzip and once as eStargz (tests/pylib/estargz.py,
4 MiB chunks; the app's files before the .prefetch.landmark, as
`ctr-remote image optimize` would put what a workload reads first). Both
are served through a loopback proxy that holds the registry's replies to
BENCH_RATE_MBS (default 25) MB/s, all connections together: a registry
in another region.

For each: a cold `cell-pull --mount` into tmpfs (the full pull with
`--lazy off`), then the first read of app/config (the stand-in for a
unit's first log line), then a read of every file of the image. Prints
the time to the first read, the bytes the proxy sent before it as a
share of the image, and the time to have read everything; asserts
nothing. Timings are of this machine at this moment: compare runs made
side by side only.
"""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))

import estargz  # noqa: E402
from estargz import EstargzLayer, annotate  # noqa: E402
from images import Dir, File, Image, Layer, Symlink, push  # noqa: E402
from proxy import Proxy  # noqa: E402
from registry import Registry  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build"))
PULL = os.path.join(BUILD, "bin", "cell-pull")
DATA_MB = int(os.environ.get("BENCH_MB", "300"))
BASE_MB = int(os.environ.get("BENCH_BASE_MB", "40"))
RATE = float(os.environ.get("BENCH_RATE_MBS", "25")) * 1e6
SOURCES = ["/etc", "/usr/bin"]
CHUNK = 4 << 20


class _FastGzip:
    """Level 6 for the eStargz writer's members too (as the plain layer;
    its default 9 only costs time on random data)."""

    @staticmethod
    def compress(data, mtime=0):
        return gzip.compress(data, compresslevel=6, mtime=mtime)


estargz.gzip = _FastGzip


def base_entries():
    """Regular files, symlinks and directories of this machine, as a
    distribution's base layer, up to BASE_MB."""
    out, seen, total = [], set(), 0
    for src in SOURCES:
        for root, dirs, names in os.walk(src):
            dirs.sort()
            rel = root.lstrip("/")
            if rel not in seen:
                seen.add(rel)
                out.append(Dir(rel))
            for n in sorted(names):
                p = os.path.join(root, n)
                try:
                    if os.path.islink(p):
                        out.append(Symlink(p.lstrip("/"), os.readlink(p)))
                    elif os.path.isfile(p):
                        with open(p, "rb") as f:
                            data = f.read()
                        out.append(File(p.lstrip("/"), data,
                                        mode=os.stat(p).st_mode & 0o7777))
                        total += len(data)
                except OSError:
                    continue
                if total >= BASE_MB << 20:
                    return out
    return out


def data_entries():
    """The app (read first), then random data files of 64 KiB to 4 MiB."""
    app = [Dir("app"), File("app/config", "log_level = info\n"),
           File("app/run.sh", "#!/bin/sh\necho started\n", mode=0o755)]
    app += [File(f"app/lib{i}.py", f"# module {i}\n" * 200) for i in range(8)]
    blob = os.urandom(DATA_MB << 20)
    data, at, i = [Dir("data")], 0, 0
    sizes = [64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20]
    while at < len(blob):
        n = sizes[i % len(sizes)]
        data.append(File(f"data/{i:04d}.bin", blob[at:at + n]))
        at += n
        i += 1
    return app, data


def images():
    base = base_entries()
    app, data = data_entries()
    plain = [Layer(base), Layer(app + data)]
    esgz = [EstargzLayer(base, chunk_size=CHUNK, prefetch=None),
            EstargzLayer(app + data, chunk_size=CHUNK, prefetch=len(app))]
    return (Image(plain, fmt="oci"),
            Image(esgz, fmt="oci", mutate_manifest=annotate(esgz)),
            sum(l.size for l in esgz), sum(len(l.tar) for l in plain))


def read_all(root):
    n = 0
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    while True:
                        b = fh.read(1 << 20)
                        if not b:
                            break
                        n += len(b)
    return n


def fresh(path):
    subprocess.run(["umount", "-q", path], stderr=subprocess.DEVNULL)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def one(proxy, ref, shm, lazy):
    cache = fresh(os.path.join(shm, "cache-" + ("lazy" if lazy else "full")))
    mnt = fresh(os.path.join(shm, "mnt"))
    flags = ["--insecure-registry", proxy.host] + ([] if lazy else ["--lazy", "off"])
    b0 = proxy.sent_bytes()
    t0 = time.monotonic()
    subprocess.run([PULL, "--image", ref, "--workdir", cache, "--mount", mnt] + flags,
                   check=True)
    t_mount = time.monotonic() - t0
    with open(os.path.join(mnt, "app/config"), "rb") as f:
        f.read()
    t_first = time.monotonic() - t0
    b_first = proxy.sent_bytes() - b0
    n = read_all(mnt)
    t_all = time.monotonic() - t0
    b_all = proxy.sent_bytes() - b0
    promoted = None
    if lazy:  # the background fetch's end: the layers become cached ones
        layers = os.path.join(cache, "layers", "sha256")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(os.listdir(layers)) < 2:
            time.sleep(0.1)
        promoted = time.monotonic() - t0 if len(os.listdir(layers)) >= 2 else None
    subprocess.run(["umount", mnt], check=True)
    subprocess.run([PULL, "--gc", "--workdir", cache], check=True,
                   stdout=subprocess.DEVNULL)
    return dict(mount=t_mount, first=t_first, first_bytes=b_first, all=t_all,
                all_bytes=proxy.sent_bytes() - b0, read=n, promoted=promoted,
                read_bytes=b_all)


def main():
    work = tempfile.mkdtemp(prefix="cell-bench-lazy-")
    shm = tempfile.mkdtemp(prefix="cell-bench-lazy-", dir="/dev/shm")
    t0 = time.monotonic()
    plain, esgz, esgz_size, tar_size = images()
    print(f"image: 2 layers, {tar_size / 1e6:.0f} MB uncompressed; gzip "
          f"{sum(l.size for l in plain.layers) / 1e6:.0f} MB, eStargz "
          f"{esgz_size / 1e6:.0f} MB (made in {time.monotonic() - t0:.0f} s); "
          f"link {RATE / 1e6:.0f} MB/s", flush=True)
    try:
        with Registry(os.path.join(work, "registry")) as reg:
            push(reg, "bench/lazy", "gzip", plain)
            push(reg, "bench/lazy", "estargz", esgz)
            proxy = Proxy(reg.port, rate=RATE, timeout=120)
            try:
                full = one(proxy, f"{proxy.host}/bench/lazy:gzip", shm, False)
                lazy = one(proxy, f"{proxy.host}/bench/lazy:estargz", shm, True)
            finally:
                proxy.close()
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'':34}{'full (gzip)':>14}{'lazy (eStargz)':>16}{'ratio':>8}")
    for k, label in (("mount", "cell-pull --mount returned (s)"),
                     ("first", "first read of app/config (s)"),
                     ("all", "every file read (s)")):
        print(f"  {label:32}{full[k]:>14.2f}{lazy[k]:>16.2f}"
              f"{lazy[k] / full[k]:>8.2f}x")
    print(f"  bytes before the first read     "
          f"{full['first_bytes'] / 1e6:>11.1f} MB{lazy['first_bytes'] / 1e6:>13.1f} MB"
          f"   ({100 * lazy['first_bytes'] / esgz_size:.1f}% of the eStargz image)")
    print(f"  bytes by the end of the read    "
          f"{full['read_bytes'] / 1e6:>11.1f} MB{lazy['read_bytes'] / 1e6:>13.1f} MB")
    print(f"  bytes in all (promotion incl.)  "
          f"{full['all_bytes'] / 1e6:>11.1f} MB{lazy['all_bytes'] / 1e6:>13.1f} MB")
    if lazy["promoted"]:
        print(f"  both lazy layers cached (promoted) {lazy['promoted']:.1f} s after the start")
    else:
        print("  the lazy layers were not promoted within 300 s")
    print(f"  bytes read by the workload: {full['read'] / 1e6:.0f} MB (full), "
          f"{lazy['read'] / 1e6:.0f} MB (lazy)")


if __name__ == "__main__":
    main()
