# SPDX-License-Identifier: Apache-2.0
"""Benchmark cell-agent, side by side with the tool a user would otherwise
pick, in one run on this machine:

  (a) updatepod → unit running, image already cached (mounted by the agent
      itself, no puller child), against `runc run -d` of the same
      (flattened) rootfs, the two timed in turn, rep by rep (0.2 s apart:
      a cgroup attach is slow only on a lock gone cold), so the ratio
      holds on a busy machine; ratio of medians (target <= 0.5x);
  (b) status requests per second over kept-alive mutual TLS with 16
      concurrent clients, and p99 latency (target >= 20,000/s), with the CPU
      time per request of the agent and of the load generator (on a shared
      machine these say more than the rate) and the load average;
  (c) the agent's RSS, idle with one pod running (target <= 8 MiB);
  (d) status reply times while a ~100 MB image is pulled (by the cell-pull
      child), against the same with nothing pulled;
  (e) the agent's CPU per GET /rest/v1/metrics for a 10-unit pod with
      probes (target well under 1 ms), over a kept-alive mutual-TLS
      connection. BENCH_ONLY=metrics runs (e) alone; BENCH_ONLY=start runs
      (a) alone and prints each pair.

Prints the numbers; asserts nothing. Run through bench/agent.sh.
"""
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from images import Image, busybox_layer, push, random_layer  # noqa: E402
from procstat import rss_kib  # noqa: E402
from registry import Registry  # noqa: E402
from wire import pod_params, unit  # noqa: E402
from test_agent_api import start_agent  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build"))
REPS = int(os.environ.get("BENCH_REPS", "10"))


def heavy_mapped(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return any("libcurl" in line or "libarchive" in line for line in f)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def status_times(c, until) -> list:
    out = []
    while not until(out):
        t0 = time.monotonic()
        st = c.status()
        out.append((time.monotonic() - t0, st))
        time.sleep(0.005)
    return [t for t, _ in out]


def big_pull(c, img: str) -> tuple:
    """Status reply times (ms) idle, then during the pull of img."""
    idle = status_times(c, lambda out: len(out) >= 200)
    c.update_pod(pod_params("bench_pod", units=[unit(
        "big", img, command=["/bin/busybox", "sleep", "1000"])],
                            terminationGracePeriodSeconds=0))

    def running(out):
        return out and any(u["name"] == "big" and "running" in (u.get("state") or {})
                           for u in out[-1][1]["unitStatus"])
    during = status_times(c, running)
    return [t * 1000 for t in idle], [t * 1000 for t in during]


def time_to_running(c, img: str, i: int, pod: str = "bench_pod") -> float:
    name = f"u{i}"
    t0 = time.monotonic()
    c.update_pod(pod_params(pod, units=[unit(name, img, command=["/bin/busybox", "sleep", "1000"])],
                            terminationGracePeriodSeconds=0))
    while time.monotonic() - t0 < 60:
        st = c.status()
        for u in st["unitStatus"]:
            if u["name"] == name and "running" in (u.get("state") or {}):
                return time.monotonic() - t0
        time.sleep(0.002)
    raise TimeoutError(f"unit {name} never ran: {json.dumps(st)[:1500]}")


def runc_bundle(work: str, rootfs_src: str) -> str:
    b = os.path.join(work, "bundle")
    os.makedirs(b)
    shutil.copytree(rootfs_src, os.path.join(b, "rootfs"), symlinks=True)
    subprocess.run(["runc", "spec"], cwd=b, check=True)
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = ["/bin/busybox", "sleep", "1000"]
    cfg["process"]["terminal"] = False
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    return b


def time_runc(bundle: str, i: int) -> float:
    cid = f"cellbench{os.getpid()}-{i}"
    t0 = time.monotonic()
    subprocess.run(["runc", "run", "-d", "--bundle", bundle, cid], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    took = time.monotonic() - t0
    subprocess.run(["runc", "delete", "-f", cid], check=True)
    return took


def metrics_cost(c, a, img: str, n: int = 500) -> tuple:
    """(agent CPU us per scrape, wall us per scrape, bytes) for 10 units."""
    probe = {"exec": {"command": ["/bin/busybox", "true"]}, "periodSeconds": 10,
             "successThreshold": 1, "failureThreshold": 3}
    units = [unit(f"u{i}", img, command=["/bin/busybox", "sleep", "100000"],
                  readinessProbe=probe) for i in range(10)]
    c.update_pod(pod_params("bench_metrics", units=units, terminationGracePeriodSeconds=0))
    c.wait_status(lambda s: len(s["unitStatus"]) == 10 and all(
        "running" in (u.get("state") or {}) for u in s["unitStatus"]), timeout=120)
    time.sleep(1)
    size = len(c.request("GET", "rest/v1/metrics").content)
    cpu0, t0 = cpu_s(a.proc.pid), time.monotonic()
    for _ in range(n):
        c.request("GET", "rest/v1/metrics")
    cpu, wall = cpu_s(a.proc.pid) - cpu0, time.monotonic() - t0
    c.update_pod(pod_params("bench_metrics", terminationGracePeriodSeconds=0))
    return cpu / n * 1e6, wall / n * 1e6, size


def start_pairs(c, img: str, bundle: str) -> tuple:
    """(agent, runc) start times, timed in turn, rep by rep."""
    agent_t, runc_t = [], []
    for i in range(1, REPS + 1):
        # Apart, so that neither starts with the kernel's cgroup
        # attach lock still warm from the other (agent/base/cgprime.c).
        time.sleep(0.2)
        agent_t.append(time_to_running(c, img, i))
        time.sleep(0.2)
        runc_t.append(time_runc(bundle, i))
    return agent_t, runc_t


def report_start(agent_t: list, runc_t: list, load0: tuple):
    ma, mr = statistics.median(agent_t), statistics.median(runc_t)
    pair = statistics.median(x / y for x, y in zip(agent_t, runc_t))
    print("    pairs (agent/runc ms): " + " ".join(
        f"{x * 1000:.1f}/{y * 1000:.1f}" for x, y in zip(agent_t, runc_t)))
    print(f"(a) updatepod -> running, cached image: median {ma * 1000:.1f} ms "
          f"(of {REPS}); runc run -d: {mr * 1000:.1f} ms; ratio {ma / mr:.2f}x "
          f"(target <= 0.5); pair by pair {pair:.2f}x; load average "
          f"{load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")


def only_metrics():
    work = tempfile.mkdtemp(prefix="cell-bench-metrics-")
    with Registry(os.path.join(work, "registry")) as reg:
        push(reg, "bench/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
        a = start_agent(os.path.join(work, "agent"), "--insecure-registry", reg.host,
                        verbose=False, env={"CELL_CGROUP_NEST": "1"})
        c = a.client()
        try:
            cpu_us, wall_us, size = metrics_cost(c, a, f"{reg.host}/bench/bb:v1")
        finally:
            units = os.path.join(a.dir, "state", "units")
            end = time.monotonic() + 30
            while os.path.isdir(units) and os.listdir(units) and time.monotonic() < end:
                time.sleep(0.1)
            a.stop()
    print(f"(e) GET metrics, 10 units with probes: agent CPU {cpu_us:.0f} us per scrape "
          f"(target well under 1000), wall {wall_us:.0f} us, {size} bytes; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    shutil.rmtree(work, ignore_errors=True)


def main():
    if os.environ.get("BENCH_ONLY") == "metrics":
        only_metrics()
        return
    work = tempfile.mkdtemp(prefix="cell-bench-agent-")
    try:
        bench_all(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_all(work: str):
    load0 = os.getloadavg()
    with Registry(os.path.join(work, "registry")) as reg:
        push(reg, "bench/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
        img = f"{reg.host}/bench/bb:v1"
        # As deployed (the service runs it without -v, which logs a line
        # per request).
        a = start_agent(os.path.join(work, "agent"), "--insecure-registry", reg.host,
                        verbose=False)
        c = a.client()
        try:
            rootfs = os.path.join(work, "flat")
            subprocess.run([os.path.join(BUILD, "bin", "cell-pull"), "--image", img,
                            "--insecure-registry", reg.host, "--workdir",
                            os.path.join(work, "pullcache"), "--extract-to", rootfs],
                           check=True)
            bundle = runc_bundle(work, rootfs)
            time_to_running(c, img, 0)  # warms the image caches
            agent_t, runc_t = start_pairs(c, img, bundle)
            if os.environ.get("BENCH_ONLY") == "start":
                report_start(agent_t, runc_t, load0)
                return
            c.update_pod(pod_params("bench_pod", units=[unit(
                "idle", img, command=["/bin/busybox", "sleep", "1000"])],
                                    terminationGracePeriodSeconds=0))
            time.sleep(2)
            rss = rss_kib(a.proc.pid)
            heavy = heavy_mapped(a.proc.pid)
            load1 = os.getloadavg()[0]
            cpu0, ru0 = cpu_s(a.proc.pid), children_cpu_s()
            load = subprocess.run(
                [os.path.join(BUILD, "bench", "statusload"),
                 f"https://MilpaNode:{a.port}/rest/v1/status", a.ca.cert_path,
                 a.client_cert, a.client_key, "16", "10"],
                capture_output=True, text=True)
            agent_cpu, load_cpu = cpu_s(a.proc.pid) - cpu0, children_cpu_s() - ru0
            push(reg, "bench/big", "v1", Image(
                [busybox_layer(), random_layer(100 << 20, seed=b"bench")],
                config={"Cmd": ["/bin/sh"]}))
            idle_ms, during_ms = big_pull(c, f"{reg.host}/bench/big:v1")
            m_cpu, m_wall, m_size = metrics_cost(c, a, img)
        finally:
            c.update_pod(pod_params("bench_pod", terminationGracePeriodSeconds=0))
            time.sleep(1)
            a.stop()
    ma, mr = statistics.median(agent_t), statistics.median(runc_t)
    print(f"(a) updatepod -> running, cached image: median {ma * 1000:.1f} ms "
          f"(of {REPS}); runc run -d: {mr * 1000:.1f} ms; ratio {ma / mr:.2f}x "
          "(target <= 0.5)")
    nreq = int(load.stdout.split()[1]) if load.stdout.startswith("requests") else 0
    per = (f"; CPU per request: agent {agent_cpu / nreq * 1e6:.0f} us, load generator "
           f"{load_cpu / nreq * 1e6:.0f} us" if nreq else "")
    pair = statistics.median(x / y for x, y in zip(agent_t, runc_t))
    print(f"    pair by pair: median {pair:.2f}x; agent min/max "
          f"{min(agent_t) * 1000:.1f}/{max(agent_t) * 1000:.1f} ms")
    print(f"    load average {load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"(b) status over mutual TLS, 16 clients, 10 s: {load.stdout.strip()} "
          f"(target >= 20000 rps){per}; load average {load1:.1f} on "
          f"{os.cpu_count()} CPUs")
    if load.returncode:
        print(f"    load generator: {load.stderr.strip()}")
    print(f"(c) agent RSS, idle with one pod: {rss / 1024:.1f} MiB (target <= 8); "
          f"libcurl/libarchive {'MAPPED' if heavy else 'not mapped'}")
    print(f"(d) status during a 100 MB pull: p50 {statistics.median(during_ms):.2f} ms, "
          f"max {max(during_ms):.1f} ms over {len(during_ms)} replies; idle: p50 "
          f"{statistics.median(idle_ms):.2f} ms, max {max(idle_ms):.1f} ms; "
          f"max ratio {max(during_ms) / max(idle_ms):.1f}x")
    print(f"(e) GET metrics, 10 units with probes: agent CPU {m_cpu:.0f} us per scrape "
          f"(target well under 1000), wall {m_wall:.0f} us, {m_size} bytes")


if __name__ == "__main__":
    main()
