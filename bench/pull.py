# SPDX-License-Identifier: Apache-2.0
"""Benchmark cell-pull against the tools a user would otherwise pick.

One run, side by side, on this machine:
  * cell-pull cold pull (--extract-to and --mount) from a local registry
    into tmpfs,
  * `skopeo copy` + `umoci raw unpack` of the same image,
  * `tar -xzf` of the same layer blobs already on disk (the floor),
  * a warm `cell-pull --mount` (layers cached),
  * a `cell-pull --mount` with a cold local cache and a warm shared cache
    (`--populate`d once, read through a read-only bind mount as a cell
    reads its NFS share): the shared tier against the cold pull,
and peak RSS of cell-pull. Prints medians and ratios; asserts nothing.
BENCH_SHARED_ONLY=1 runs only the cold --mount pull and the shared one.

The image is built from files of this machine (/usr/lib/gcc, /usr/bin, …)
until ~BENCH_MB of uncompressed data (default 300 MB, about 100 MB gzip'd),
in BENCH_LAYERS layers (default 5).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))

from images import Image, Layer, push  # noqa: E402
from registry import Registry  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build"))
PULL = os.path.join(BUILD, "bin", "cell-pull")
SOURCES = ["/usr/lib/gcc", "/usr/bin", "/usr/share/locale", "/usr/lib/python3",
           "/usr/share/perl", "/usr/lib/x86_64-linux-gnu"]
REPS = int(os.environ.get("BENCH_REPS", "3"))
SHARED_ONLY = os.environ.get("BENCH_SHARED_ONLY", "") not in ("", "0")


def collect(limit):
    """Regular files and symlinks from SOURCES, up to `limit` bytes."""
    files, total = [], 0
    for src in SOURCES:
        for root, dirs, names in os.walk(src):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(root, n)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                files.append(p)
                total += st.st_size if not os.path.islink(p) else 0
                if total >= limit:
                    return files, total
    return files, total


def layer_tar(paths, out):
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        for p in paths:
            t.add(p, arcname=p.lstrip("/"), recursive=False)


class FileLayer(Layer):
    """A Layer whose tar comes from a file rather than entries."""

    def __init__(self, tar_path):
        with open(tar_path, "rb") as f:
            raw = f.read()
        super().__init__([], compression="gzip", tar=raw)


def timed(cmd, **kw):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.monotonic() - t0


def rss_kb(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True).stderr.strip().splitlines()[-1]
    return int(out)


def fresh(path):
    subprocess.run(["umount", "-q", path], stderr=subprocess.DEVNULL)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def median(xs):
    return statistics.median(xs)


def main():
    limit = int(os.environ.get("BENCH_MB", "300")) << 20
    n_layers = int(os.environ.get("BENCH_LAYERS", "5"))
    work = tempfile.mkdtemp(prefix="cell-bench-")
    shm = tempfile.mkdtemp(prefix="cell-bench-", dir="/dev/shm")
    files, total = collect(limit)
    chunks = [files[i::n_layers] for i in range(n_layers)]
    layers = []
    for i, chunk in enumerate(chunks):
        tp = os.path.join(work, f"layer{i}.tar")
        layer_tar(chunk, tp)
        layers.append(FileLayer(tp))
    img = Image(layers)
    csize = sum(len(l.blob) for l in layers)
    print(f"image: {n_layers} layers, {total / 1e6:.0f} MB uncompressed, "
          f"{csize / 1e6:.0f} MB gzip'd", flush=True)
    blobs_dir = fresh(os.path.join(shm, "blobs"))
    for i, l in enumerate(layers):
        with open(os.path.join(blobs_dir, f"{i}.tar.gz"), "wb") as f:
            f.write(l.blob)
    with Registry(os.path.join(work, "registry")) as reg:
        push(reg, "bench/big", "v1", img)
        ref = f"{reg.host}/bench/big:v1"
        flags = ["--insecure-registry", reg.host]
        res = {k: [] for k in ("flat", "mount", "skopeo", "umoci", "tar", "warm",
                               "shared")}
        rss = []
        share = fresh(os.path.join(shm, "share"))
        subprocess.run([PULL, "--populate", share, "--image", ref] + flags, check=True,
                       stdout=subprocess.DEVNULL)
        ro = fresh(os.path.join(shm, "share-ro"))
        subprocess.run(["mount", "--bind", share, ro], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", ro], check=True)
        for _ in range(REPS):
            cache = fresh(os.path.join(shm, "cache"))
            mnt = fresh(os.path.join(shm, "mnt"))
            res["shared"].append(timed([PULL, "--image", ref, "--workdir", cache,
                                        "--mount", mnt, "--shared-cache", ro] + flags))
            subprocess.run([PULL, "--unmount", mnt], check=True)
            if SHARED_ONLY:
                cache = fresh(os.path.join(shm, "cache"))
                mnt = fresh(os.path.join(shm, "mnt"))
                res["mount"].append(timed([PULL, "--image", ref, "--workdir", cache,
                                           "--mount", mnt] + flags))
                subprocess.run([PULL, "--unmount", mnt], check=True)
                continue
            cache = fresh(os.path.join(shm, "cache"))
            res["flat"].append(timed([PULL, "--image", ref, "--workdir", cache,
                                      "--extract-to", fresh(os.path.join(shm, "rootfs"))] + flags))
            cache = fresh(os.path.join(shm, "cache"))
            mnt = fresh(os.path.join(shm, "mnt"))
            res["mount"].append(timed([PULL, "--image", ref, "--workdir", cache,
                                       "--mount", mnt] + flags))
            subprocess.run([PULL, "--unmount", mnt], check=True)
            for _w in range(5):
                res["warm"].append(timed([PULL, "--image", ref, "--workdir", cache,
                                          "--mount", mnt] + flags))
                subprocess.run([PULL, "--unmount", mnt], check=True)
            cache = fresh(os.path.join(shm, "cache"))
            rss.append(rss_kb([PULL, "--image", ref, "--workdir", cache, "--extract-to",
                               fresh(os.path.join(shm, "rootfs"))] + flags))
            layout = fresh(os.path.join(shm, "oci"))
            res["skopeo"].append(timed(["skopeo", "copy", "-q", "--src-tls-verify=false",
                                        f"docker://{ref}", f"oci:{layout}:v1"]))
            out = os.path.join(shm, "umoci-rootfs")
            shutil.rmtree(out, ignore_errors=True)
            res["umoci"].append(timed(["umoci", "raw", "unpack", "--image",
                                       f"{layout}:v1", out]))
            dest = fresh(os.path.join(shm, "tar-rootfs"))
            t0 = time.monotonic()
            for i in range(n_layers):
                subprocess.run(["tar", "-xzf", os.path.join(blobs_dir, f"{i}.tar.gz"),
                                "-C", dest], check=True)
            res["tar"].append(time.monotonic() - t0)
        subprocess.run(["umount", "-q", ro], stderr=subprocess.DEVNULL)
        for p in ("mnt", "rootfs"):
            subprocess.run(["umount", "-q", os.path.join(shm, p)], stderr=subprocess.DEVNULL)
    shutil.rmtree(shm, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)

    m = {k: median(v) for k, v in res.items() if v}
    print(f"medians of {REPS} runs (s):")
    print(f"  cell-pull --mount (cold)       {m['mount']:.3f}")
    print(f"  cell-pull --mount, shared tier {m['shared']:.3f}  (cold local cache, "
          f"warm --shared-cache)")
    print(f"  shared / cold --mount        {m['shared'] / m['mount']:.3f}x  (target <= 0.10)")
    if SHARED_ONLY:
        return
    su = m["skopeo"] + m["umoci"]
    print(f"  cell-pull --extract-to (cold)  {m['flat']:.3f}")
    print(f"  skopeo copy + umoci raw unpack {su:.3f}  ({m['skopeo']:.3f} + {m['umoci']:.3f})")
    print(f"  tar -xzf of the layers on disk {m['tar']:.3f}")
    print(f"  cell-pull --mount (warm)       {m['warm'] * 1000:.1f} ms")
    print(f"  cell-pull peak RSS             {max(rss) / 1024:.1f} MiB")
    print("ratios:")
    print(f"  extract-to / (skopeo+umoci)  {m['flat'] / su:.2f}x  (target <= 0.40)")
    print(f"  mount / (skopeo+umoci)       {m['mount'] / su:.2f}x")
    print(f"  extract-to / tar -xzf        {m['flat'] / m['tar']:.2f}x  (target < 1.00)")
    print(f"  mount / tar -xzf             {m['mount'] / m['tar']:.2f}x")


if __name__ == "__main__":
    main()
