# SPDX-License-Identifier: Apache-2.0
"""Lazy pulling against the full pull, through the agent, side by side in
one run (issue 29's "Must show").

The image: a Debian 12 root (scripts/canonical-root.sh's minbase with
cloud-init, its /dev left out) and a layer of BENCH_MB (default 300) MiB of
random data files of 64 KiB to 4 MiB, pushed as plain gzip and converted to
eStargz by Debian's `ctr-remote image convert --estargz --oci` against a
throwaway containerd (tests/pylib/containerd.py; its default chunks, no
prefetch profile). Both are served through a loopback proxy that holds the
registry's replies to BENCH_RATE_MBS (default 25) MB/s, all connections
together: a registry in another region.

Each round dispatches the same pod twice, once per image, each time to a
fresh cell-agent (new state directory and image cache on tmpfs, so both
are cold pulls; the agent's defaults, lazy pulling on): one unit, restart
policy Never,

    echo first; find / -xdev -type f -exec cat {} + >/dev/null; echo done

and times, from the `updatepod` request, its first log line ("first")
and the end of the read of every file of the image ("done"), polling the
agent's logs endpoint (GET rest/v1/logs/<unit>, mutual TLS, kept alive)
every 20 ms until the first line and every 100 ms after. The bytes the
proxy sent by the first line are given as a share of the image's
compressed size, with the agent's cell_lazy_bytes_total (demand and
background; the servers' counters written every 100 ms) read just after.
The two dispatches of a round go in turn, the first alternating, and the
figures are medians of BENCH_REPS (default 3) rounds; ratios are of the
medians, and pair by pair. Asserts nothing: timings are of this machine
at this moment, compare runs made side by side only.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from containerd import Containerd, convert_estargz  # noqa: E402
from images import Dir, File, Image, Layer, push  # noqa: E402
from proxy import Proxy  # noqa: E402
from registry import Registry  # noqa: E402
from wire import WireError, pod_params  # noqa: E402
from test_agent_api import start_agent  # noqa: E402
from test_agent_lazy import gc, metric  # noqa: E402
from test_agent_pod import FAST, sh, wait_units_gone  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build"))
PULL = os.path.join(BUILD, "bin", "cell-pull")
DATA_MB = int(os.environ.get("BENCH_MB", "300"))
RATE = float(os.environ.get("BENCH_RATE_MBS", "25")) * 1e6
REPS = int(os.environ.get("BENCH_REPS", "3"))
ROOT = os.environ.get("BENCH_DEBIAN_ROOT", "")
UNIT = "app"
SCRIPT = "echo first; find / -xdev -type f -exec cat {} + >/dev/null; echo done"
FIRST_EVERY, DONE_EVERY = 0.02, 0.1
TIMEOUT = 600


def debian_layer(root: str) -> Layer:
    """The Debian root as one layer (owners kept, /dev's nodes left out:
    a unit gets its own /dev)."""
    names = sorted(n for n in os.listdir(root) if n != ".cell-complete")
    tar = subprocess.run(["tar", "--numeric-owner", "--format=pax", "--xattrs",
                          "--exclude=dev/*", "-C", root, "-cf", "-", *names],
                         check=True, stdout=subprocess.PIPE).stdout
    return Layer([], tar=tar)


def data_layer() -> Layer:
    blob = os.urandom(DATA_MB << 20)
    out, at, i = [Dir("data")], 0, 0
    sizes = [64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20]
    while at < len(blob):
        n = sizes[i % len(sizes)]
        out.append(File(f"data/{i:04d}.bin", blob[at:at + n]))
        at += n
        i += 1
    return Layer(out)


def make_images(reg, work: str) -> tuple:
    """Pushes bench/lazy:v1 (gzip) and bench/lazy-esgz:v1 (ctr-remote's
    eStargz of it); (gzip size, eStargz size, uncompressed size)."""
    layers = [debian_layer(ROOT), data_layer()]
    push(reg, "bench/lazy", "v1", Image(layers, fmt="oci", config={"Cmd": ["/bin/sh"]}))
    with Containerd(os.path.join(work, "containerd"), timeout=900) as ctr:
        man = convert_estargz(ctr, reg, "bench/lazy", "v1", "bench/lazy-esgz")
    assert all("containerd.io/snapshot/stargz/toc.digest" in l.get("annotations", {})
               for l in man["layers"]), man["layers"]
    return (sum(l.size for l in layers), sum(l["size"] for l in man["layers"]),
            sum(len(l.tar) for l in layers))


def wait_log(c, needle: bytes, t0: float, every: float) -> float:
    """Seconds from t0 to needle in the unit's log, polling the logs
    endpoint every `every` s."""
    while True:
        try:
            out = c.logs(UNIT)
        except (WireError, requests.RequestException):
            out = b""
        now = time.monotonic()
        if needle in out:
            return now - t0
        if now - t0 > TIMEOUT:
            raise TimeoutError(f"no {needle!r} in {UNIT}'s log after {TIMEOUT} s: {out[-500:]!r}")
        time.sleep(every)


def lazy_bytes(c) -> tuple:
    try:
        return (metric(c, "cell_lazy_bytes_total", how="demand"),
                metric(c, "cell_lazy_bytes_total", how="background"))
    except AssertionError:  # no lazy layer served
        return 0, 0


def dispatch(proxy, ref: str, d: str) -> dict:
    """One pod on a fresh agent (cold cache): its timings and bytes."""
    a = start_agent(d, "--insecure-registry", proxy.host, verbose=False,
                    env={**FAST, "CELL_PULL_LAZY_STATS_MS": "100"})
    c = a.client()
    try:
        b0 = proxy.sent_bytes()
        t0 = time.monotonic()
        c.update_pod(pod_params("bench_pod", restart_policy="Never",
                                units=[sh(ref, UNIT, SCRIPT)],
                                terminationGracePeriodSeconds=0))
        first = wait_log(c, b"first\n", t0, FIRST_EVERY)
        first_bytes = proxy.sent_bytes() - b0
        demand, background = lazy_bytes(c)
        done = wait_log(c, b"done\n", t0, DONE_EVERY)
        done_bytes = proxy.sent_bytes() - b0
        c.update_pod(pod_params("bench_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a, timeout=60)
    except BaseException:
        print(f"agent log ({ref}):\n{a.log()[-3000:]}", file=sys.stderr)
        raise
    finally:
        try:
            gc(a, _run_pull)
        finally:
            a.stop()
    return dict(first=first, done=done, first_bytes=first_bytes, done_bytes=done_bytes,
                demand=demand, background=background)


def _run_pull(*args: str) -> tuple:
    r = subprocess.run([PULL, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    if not ROOT or not os.path.isdir(ROOT):
        sys.exit("BENCH_DEBIAN_ROOT: a Debian root (bench/lazy.sh gives "
                 "scripts/canonical-root.sh's)")
    work = tempfile.mkdtemp(prefix="cell-bench-lazy-")
    shm = tempfile.mkdtemp(prefix="cell-bench-lazy-", dir="/dev/shm")
    load0 = os.getloadavg()
    try:
        with Registry(os.path.join(work, "registry")) as reg:
            t0 = time.monotonic()
            gz, esgz, raw = make_images(reg, work)
            print(f"image: Debian 12 root + {DATA_MB} MiB of data files, "
                  f"{raw / 1e6:.0f} MB uncompressed; gzip {gz / 1e6:.0f} MB, eStargz "
                  f"(ctr-remote) {esgz / 1e6:.0f} MB (made in {time.monotonic() - t0:.0f} s); "
                  f"link {RATE / 1e6:.0f} MB/s; first line polled on GET rest/v1/logs "
                  f"every {FIRST_EVERY * 1000:.0f} ms", flush=True)
            proxy = Proxy(reg.port, rate=RATE, timeout=120)
            res = {"gzip": [], "esgz": []}
            try:
                for i in range(REPS):
                    order = ("gzip", "esgz") if i % 2 == 0 else ("esgz", "gzip")
                    for k in order:
                        ref = f"{proxy.host}/bench/{'lazy' if k == 'gzip' else 'lazy-esgz'}:v1"
                        r = dispatch(proxy, ref, os.path.join(shm, f"agent-{i}-{k}"))
                        res[k].append(r)
                        print(f"  round {i + 1} {k:5}: first line {r['first']:6.2f} s "
                              f"({r['first_bytes'] / 1e6:6.1f} MB), done {r['done']:6.2f} s "
                              f"({r['done_bytes'] / 1e6:6.1f} MB)", flush=True)
            finally:
                proxy.close()
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    report(res, gz, esgz, load0)


def report(res: dict, gz: int, esgz: int, load0: tuple):
    def med(k, f):
        return statistics.median(r[f] for r in res[k])

    def pairs(f):
        return statistics.median(z[f] / g[f] for g, z in zip(res["gzip"], res["esgz"]))
    print(f"medians of {REPS} rounds:{'':16}{'full (gzip)':>14}{'lazy (eStargz)':>16}"
          f"{'ratio':>8}{'pairs':>8}")
    for f, label, target in (("first", "dispatch -> first log line (s)", "<= 0.10"),
                             ("done", "dispatch -> every file read (s)", "<= 1.30")):
        g, z = med("gzip", f), med("esgz", f)
        print(f"  {label:38}{g:>14.2f}{z:>16.2f}{z / g:>7.2f}x{pairs(f):>7.2f}x"
              f"  (target {target})")
    gb, zb = med("gzip", "first_bytes"), med("esgz", "first_bytes")
    print(f"  {'bytes before the first line (MB)':38}{gb / 1e6:>14.1f}{zb / 1e6:>16.1f}"
          f"  {100 * zb / esgz:.1f}% of the eStargz image, {100 * gb / gz:.0f}% of the "
          f"gzip one (target <= 10%)")
    print(f"  {'bytes by the end of the read (MB)':38}"
          f"{med('gzip', 'done_bytes') / 1e6:>14.1f}{med('esgz', 'done_bytes') / 1e6:>16.1f}")
    print(f"  lazy: cell_lazy_bytes_total at the first line: demand "
          f"{med('esgz', 'demand') / 1e6:.1f} MB, background "
          f"{med('esgz', 'background') / 1e6:.1f} MB")
    print(f"  load average {load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
