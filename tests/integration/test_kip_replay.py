# SPDX-License-Identifier: Apache-2.0
"""cell-agent fed what the real Kip controller sends (issue 7).

A Kubernetes pod manifest goes through the controller's own conversions
(tests/pylib/kip.py: virtual-kubelet's env population, convert.go,
deploy_util.go, updatePodUnits) and the controller's sequence is replayed:
one package per volume, resolvconf, etchosts, then updatepod; then the
status is decoded as Kip's json.Unmarshal into api.PodStatusReply would.

Kip adds two packagePath volumes to every pod, ``resolvconf`` and
``etchosts`` (path ``/etc/resolv.conf`` and ``/etc/hosts``), and mounts them
on every unit at those paths with no subPath.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import time

import pytest

import kip
from images import Image, busybox_layer, push
from wire import WireError, pod_params, unit
from test_agent_pod import cell, image, state_of, wait_state  # noqa: F401 - fixtures

NS, NAME = "replay", "kip-replay"
POD = f"{NS}_{NAME}"
# The IP Kip would have the cell use for the pod. It goes into /etc/hosts,
# but the spec carries PodIP "" (as for a node without a pod address): a
# PodIP makes the agent build the pod network on this host, which only the
# simulated VPC of test_net_agent.py may do.
POD_IP = "10.0.7.23"
NODE = "virtual-kubelet"
SECRETS = {"db": {"password": b"s3cr3t", "user": b"admin\n"}}
CONFIGMAPS = {"app-config": {"app.conf": "listen 8080\n", "mode": "fast\n"}}
DNS = (["10.96.0.10"], [f"{NS}.svc.cluster.local", "svc.cluster.local", "cluster.local"],
       ["ndots:5"])
APP = ("echo started; "
       # requests without limits: far more than spec.resources.memory
       "dd if=/dev/zero of=/dev/shm/big bs=1M count=40 2>/dev/null; "
       "stat -c %s /dev/shm/big > /tmp/big; "
       "touch /tmp/ready; exec sleep 100000")


@pytest.fixture
def app_image(registry) -> str:
    push(registry, "t/app", "v1", Image(
        [busybox_layer()],
        config={"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "OVERRIDE=image",
                        "IMGONLY=1"], "Cmd": ["/bin/sh"]}))
    return registry.ref("t/app", "v1")


def manifest(img: str, host_network: bool = False) -> dict:
    """A Kubernetes pod as the API server hands it to virtual-kubelet."""
    return {
        "metadata": {"name": NAME, "namespace": NS,
                     "annotations": {"pod.elotl.co/x": "kept", "other/y": "dropped"}},
        "spec": {
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "hostNetwork": host_network, "securityContext": {},
            "initContainers": [{
                "name": "init-work", "image": img,
                "command": ["/bin/sh", "-c", "echo from-init > /work/init-done"],
                "volumeMounts": [{"name": "work", "mountPath": "/work"}]}],
            "containers": [
                {"name": "app", "image": img, "command": ["/bin/sh", "-c", APP],
                 "env": [{"name": "GREETING", "value": "hello"},
                         {"name": "OVERRIDE", "value": "unit"},
                         {"name": "REF", "value": "$(GREETING)-x"},
                         {"name": "ESCAPED", "value": "$$(GREETING)"},
                         {"name": "FROM_SECRET", "valueFrom": {
                             "secretKeyRef": {"name": "db", "key": "password"}}}],
                 "resources": {"requests": {"memory": "8Mi", "cpu": "100m"}},
                 "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"},
                                  {"name": "sec", "mountPath": "/sec"},
                                  {"name": "proj", "mountPath": "/proj"},
                                  {"name": "work", "mountPath": "/work"}],
                 "readinessProbe": {"exec": {"command": ["/bin/sh", "-c", "test -f /tmp/ready"]},
                                    "periodSeconds": 1},
                 # A handler Kip cannot convert: it sends the timings only.
                 "livenessProbe": {"grpc": {"port": 9}, "periodSeconds": 1,
                                   "failureThreshold": 1}},
                {"name": "side", "image": img,
                 "command": ["/bin/sh", "-c", "exec sleep 100000"],
                 "resources": {"requests": {"memory": "4Mi"}}}],
            "volumes": [
                {"name": "cfg", "configMap": {
                    "name": "app-config", "defaultMode": 0o440,
                    "items": [{"key": "app.conf", "path": "conf/app.conf"},
                              {"key": "mode", "path": "mode", "mode": 0o600}]}},
                {"name": "sec", "secret": {"secretName": "db", "defaultMode": 0o400,
                                           "items": [{"key": "password", "path": "pw"}]}},
                {"name": "proj", "projected": {"defaultMode": 0o444, "sources": [
                    {"secret": {"name": "db", "items": [{"key": "user", "path": "user"}]}},
                    {"configMap": {"name": "app-config",
                                   "items": [{"key": "app.conf", "path": "app.conf"}]}}]}},
                {"name": "work", "emptyDir": {}}]}}


class Controller:
    """The controller's side of one pod: conversion, then its sequence."""

    def __init__(self, client, pod: dict, seed: int = 1, pod_ip: str = ""):
        self.c, self.pod, self.rng = client, pod, random.Random(seed)
        self.pod_ip = pod_ip

    def params(self, shuffle: bool = False) -> dict:
        cs = self.pod["spec"].get("initContainers", []) + self.pod["spec"]["containers"]
        envs = {c["name"]: kip.vk_env(c, SECRETS, CONFIGMAPS,
                                      shuffle=self.rng if shuffle else None) for c in cs}
        spec = kip.k8s_to_milpa_pod(self.pod, envs)
        if shuffle:
            # Go maps all the way: another order for the lists Kip rebuilds.
            self.rng.shuffle(spec["volumes"])
            for u in spec["units"] + spec["initUnits"]:
                self.rng.shuffle(u["volumeMounts"])
        return kip.pod_parameters(self.pod, spec, self.pod_ip, NODE, NAME)

    def etchosts(self) -> str:
        return kip.etchosts_text([POD_IP], NAME, "", [])

    def dispatch(self, shuffle: bool = False) -> dict:
        p = self.params(shuffle)
        for name, pkg in kip.volume_packages(p["spec"], SECRETS, CONFIGMAPS):
            self.c.deploy(POD, name, pkg)
        self.c.deploy(POD, kip.RESOLVCONF, kip.resolvconf_package(*DNS))
        self.c.deploy(POD, kip.ETCHOSTS, kip.etchosts_package(self.etchosts()))
        self.c.update_pod(p)
        return p

    def status(self) -> dict:
        return kip.decode_status(self.c.request("GET", "rest/v1/status", ok=False).text)


def by_name(units):
    return {u["Name"]: u for u in units}


def sh_in(c, unit_name: str, script: str) -> str:
    out, err, code = c.exec(unit_name, ["/bin/sh", "-c", script]).collect()
    assert code == 0, (script, out, err, code)
    return out.decode()


def wait_kip(ctl: Controller, pred, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    st = ctl.status()
    while not pred(st) and time.monotonic() < deadline:
        time.sleep(0.2)
        st = ctl.status()
    assert pred(st), json.dumps(st, default=str)[:3000]
    return st


def all_running(st: dict) -> bool:
    u = by_name(st["UnitStatuses"])
    return all(u.get(n, {}).get("State", {}).get("Running") and u[n]["Ready"]
               for n in ("app", "side"))


def run_dirs(a, name: str) -> list:
    return sorted(os.listdir(os.path.join(a.dir, "state", "units", name)))


def test_kip_pod_runs_as_under_itzo(cell, app_image):
    a, c = cell()
    ctl = Controller(c, manifest(app_image))
    sent = ctl.dispatch()
    # What went out is what Kip sends: checked against convert.go.
    app = sent["spec"]["units"][0]
    assert app["resources"] == {"Limits": None, "Requests": None}
    assert app["livenessProbe"] == {"periodSeconds": 1, "failureThreshold": 1}
    assert sent["spec"]["resources"] == {"cpu": "0.10", "memory": "0.01Gi"}
    assert sent["Annotations"] == {"pod.elotl.co/x": "kept"}

    st = wait_kip(ctl, all_running)
    init = by_name(st["InitUnitStatuses"])["init-work"]
    assert init["State"]["Terminated"]["ExitCode"] == 0 and init["Ready"] is True
    assert init["State"]["Terminated"]["Reason"] == "Completed"
    units = by_name(st["UnitStatuses"])
    for n in ("app", "side"):
        assert units[n]["RestartCount"] == 0 and units[n]["Started"] is True
        assert units[n]["Image"] == app_image
        assert units[n]["State"]["Running"]["StartedAt"] is not None
    assert st["PodIP"] == primary_ip()  # no PodIP sent: the cell's own
    assert st["ResourceUsage"]

    # Volumes: content and mode inside the container (stat -L: a package's
    # top-level names are links into its ..data, as under the kubelet).
    got = sh_in(c, "app", "for f in /cfg/conf/app.conf /cfg/mode /sec/pw /proj/user "
                "/proj/app.conf /work/init-done; do "
                "echo \"$(stat -L -c %a $f) $f $(cat $f | tr '\\n' '|')\"; done")
    assert got.splitlines() == [
        "440 /cfg/conf/app.conf listen 8080|", "600 /cfg/mode fast|", "400 /sec/pw s3cr3t",
        "444 /proj/user admin|", "444 /proj/app.conf listen 8080|",
        "644 /work/init-done from-init|"], got
    # /etc/resolv.conf and /etc/hosts from the packages, each bound once.
    assert sh_in(c, "app", "cat /etc/resolv.conf") == (
        "nameserver 10.96.0.10\nsearch replay.svc.cluster.local svc.cluster.local "
        "cluster.local\noptions ndots:5\n")
    assert sh_in(c, "app", "cat /etc/hosts") == ctl.etchosts()
    assert sh_in(c, "side", "cat /etc/hosts") == ctl.etchosts()
    assert sh_in(c, "app", "grep -c -e ' /etc/resolv.conf ' -e ' /etc/hosts ' "
                 "/proc/self/mountinfo") == "2\n"

    # The environment of the unit's own process.
    env = sh_in(c, "app", "tr '\\0' '\\n' < /proc/1/environ").splitlines()
    names = [e.split("=", 1)[0] for e in env]
    assert len(names) == len(set(names)), env
    d = dict(e.split("=", 1) for e in env)
    assert d["GREETING"] == "hello" and d["OVERRIDE"] == "unit" and d["IMGONLY"] == "1"
    assert d["REF"] == "hello-x" and d["ESCAPED"] == "$(GREETING)"
    assert d["FROM_SECRET"] == "s3cr3t"
    assert d["HOSTNAME"] == NAME and d["HOME"] == "/root"
    assert d["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin" and "TERM" not in d

    # Requests are no limit: 40 MiB of tmpfs (charged to the unit's
    # cgroup) where spec.resources.memory says 0.01Gi.
    assert sh_in(c, "app", "cat /tmp/big") == "41943040\n"
    # The handler-less liveness probe is ignored (no restarts), and said once.
    time.sleep(2)
    ctl.dispatch()
    time.sleep(1)
    st = ctl.status()
    assert by_name(st["UnitStatuses"])["app"]["RestartCount"] == 0
    assert a.log().count("livenessProbe: no handler this cell supports") == 1, a.log()[-2000:]


def test_same_spec_in_another_order_restarts_nothing(cell, app_image):
    a, c = cell()
    ctl = Controller(c, manifest(app_image), seed=7)
    ctl.dispatch()
    st = wait_kip(ctl, all_running)
    before = {n: u["State"]["Running"]["StartedAt"] for n, u in by_name(st["UnitStatuses"]).items()}
    pids = {n: sh_in(c, n, "cat /proc/1/stat | cut -d' ' -f22") for n in ("app", "side")}
    orders = set()
    for _ in range(3):
        p = ctl.dispatch(shuffle=True)
        orders.add(tuple(e["name"] for e in p["spec"]["units"][0]["env"]))
        orders.add(tuple(m["mountPath"] for m in p["spec"]["units"][0]["volumeMounts"]))
    assert len(orders) > 2, orders  # the lists really came in other orders
    time.sleep(2)
    st = ctl.status()
    for n, u in by_name(st["UnitStatuses"]).items():
        assert u["RestartCount"] == 0 and u["State"]["Running"]["StartedAt"] == before[n]
        assert sh_in(c, n, "cat /proc/1/stat | cut -d' ' -f22") == pids[n]
        assert run_dirs(a, n) == ["1", "unit.json"], run_dirs(a, n)


def test_an_image_change_restarts_that_unit_only(cell, app_image, registry):
    push(registry, "t/app", "v2", Image([busybox_layer()], config={
        "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "OVERRIDE=image2"], "Cmd": ["/bin/sh"]}))
    a, c = cell()
    pod = manifest(app_image)
    # side ends on SIGTERM: `exec sleep` as PID 1 ignores it, and its
    # restart would wait out the 30 s grace (Kip sends none).
    pod["spec"]["containers"][1]["command"] = [
        "/bin/sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]
    ctl = Controller(c, pod, seed=3)
    ctl.dispatch()
    st = wait_kip(ctl, all_running)
    app_started = by_name(st["UnitStatuses"])["app"]["State"]["Running"]["StartedAt"]
    pod["spec"]["containers"][1]["image"] = registry.ref("t/app", "v2")
    ctl.dispatch(shuffle=True)
    st = wait_kip(ctl, lambda s: by_name(s["UnitStatuses"])["side"]["RestartCount"] == 1
                  and all_running(s))
    u = by_name(st["UnitStatuses"])
    assert u["side"]["Image"] == registry.ref("t/app", "v2")
    assert u["app"]["RestartCount"] == 0
    assert u["app"]["State"]["Running"]["StartedAt"] == app_started
    assert sh_in(c, "side", "tr '\\0' '\\n' < /proc/1/environ | grep OVERRIDE") == \
        "OVERRIDE=image2\n"


def primary_ip() -> str:
    """The address on the default route's interface, found the way an
    operator would (ip route, ip addr)."""
    route = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True,
                           text=True, check=True).stdout.split()
    dev = route[route.index("dev") + 1]
    addr = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", dev], capture_output=True,
                          text=True, check=True).stdout.split()
    return addr[addr.index("inet") + 1].split("/")[0]


def test_host_network_pod_ip_is_the_primary_ip(cell, app_image):
    a, c = cell()
    pod = manifest(app_image, host_network=True)
    pod["spec"]["containers"] = pod["spec"]["containers"][1:]
    pod["spec"]["initContainers"] = []
    # A hostNetwork pod builds no pod network, so the PodIP Kip always
    # sends can go out here: the reply must carry the primary IP instead.
    ctl = Controller(c, pod, pod_ip=POD_IP)
    sent = ctl.dispatch()
    assert sent["PodIP"] == POD_IP
    assert sent["spec"]["securityContext"]["namespaceOptions"] == {
        "network": 2, "pid": 1, "ipc": 1}
    st = wait_kip(ctl, lambda s: by_name(s["UnitStatuses"]).get("side", {})
                  .get("State", {}).get("Running"))
    assert st["PodIP"] == primary_ip() != POD_IP


# ---------------------------------------------------------------------------
# packagePath volumes

def pkg_volume(name: str, path: str) -> dict:
    return {"name": name, "packagePath": {"path": path}}


def dns_mounts() -> list:
    return [{"name": "resolvconf", "mountPath": "/etc/resolv.conf", "subPath": ""},
            {"name": "etchosts", "mountPath": "/etc/hosts", "subPath": ""}]


def test_package_path_volumes_bind_the_path_beneath_the_package(cell, image):
    a, c = cell()
    c.deploy("ns_pod", "resolvconf", {"etc/resolv.conf": "nameserver 10.9.8.7\n"})
    c.deploy("ns_pod", "etchosts", {"etc/hosts": "127.0.0.1 localhost\n10.1.1.1 kiphost\n"})
    c.deploy("ns_pod", "tree", {"data/sub/a.txt": "aaa\n", "other/b.txt": "bbb\n"})
    c.deploy("ns_pod", "whole", {"other/b.txt": "bbb\n"})
    mounts = dns_mounts() + [{"name": "tree", "mountPath": "/mnt/tree"},
                             {"name": "whole", "mountPath": "/mnt/whole"}]
    script = ("cat /etc/resolv.conf /etc/hosts /mnt/tree/sub/a.txt /mnt/whole/other/b.txt; "
              "test -e /mnt/tree/other && echo LEAK; "
              "grep -c ' /etc/resolv.conf ' /proc/self/mountinfo; "
              "grep -c ' /etc/hosts ' /proc/self/mountinfo; exec sleep 1000")
    c.update_pod(pod_params(
        "ns_pod", units=[unit("u", image, command=["/bin/sh", "-c", script],
                              volumeMounts=mounts)],
        volumes=[pkg_volume("resolvconf", "/etc/resolv.conf"),
                 pkg_volume("etchosts", "/etc/hosts"),
                 pkg_volume("tree", "data"), pkg_volume("whole", "")],
        terminationGracePeriodSeconds=0))
    wait_state(c, "u", "running")
    want = (b"nameserver 10.9.8.7\n127.0.0.1 localhost\n10.1.1.1 kiphost\naaa\nbbb\n"
            b"1\n1\n")
    deadline = time.monotonic() + 10
    while c.logs("u") != want and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.logs("u") == want


def test_missing_package_path_is_a_clear_start_failure(cell, image):
    a, c = cell()
    c.deploy("ns_pod", "resolvconf", {"etc/other": "x\n"})
    c.update_pod(pod_params(
        "ns_pod", units=[unit("u", image, command=["/bin/sh", "-c", "exec sleep 1000"],
                              volumeMounts=dns_mounts()[:1])],
        volumes=[pkg_volume("resolvconf", "/etc/resolv.conf")],
        terminationGracePeriodSeconds=0))
    st = c.wait_status(lambda s: state_of(s, "u").get("waiting", {}).get("startFailure"))
    reason = state_of(st, "u")["waiting"]["reason"]
    assert "/etc/resolv.conf" in reason and "resolvconf" in reason, reason
    assert "not in package" in reason, reason
    # Kip reacts to startFailure by restarting the pod elsewhere (a few
    # times, pod_controller_utils.go): the unit is not retried here.


def test_package_path_escaping_the_package_is_refused(cell, image):
    a, c = cell()
    with pytest.raises(WireError) as ei:
        c.update_pod(pod_params(
            "ns_pod", units=[unit("u", image, command=["/bin/true"],
                                  volumeMounts=[{"name": "tree", "mountPath": "/m"}])],
            volumes=[pkg_volume("tree", "../../etc")]))
    assert ei.value.status == 400 and "packagePath" in ei.value.body, ei.value


def test_a_mount_of_a_volume_kip_dropped_fails_that_unit_only(cell, image):
    """Kip drops a volume it cannot convert (a PVC here) but keeps the
    container's mount of it: accepted, and that unit alone fails to start,
    saying why."""
    a, c = cell()
    c.update_pod(pod_params(
        "ns_pod", units=[unit("u", image, command=["/bin/sh", "-c", "exec sleep 1000"],
                              volumeMounts=[{"name": "claim", "mountPath": "/data"}]),
                         unit("ok", image, command=["/bin/sh", "-c", "exec sleep 1000"])],
        terminationGracePeriodSeconds=0))
    st = c.wait_status(lambda s: state_of(s, "u").get("waiting", {}).get("startFailure")
                       and "running" in state_of(s, "ok"))
    assert "unknown volume claim" in state_of(st, "u")["waiting"]["reason"]


# ---------------------------------------------------------------------------
# sysctls

def sysctl_pod(img: str, sysctls: list) -> dict:
    return {"metadata": {"name": NAME, "namespace": NS},
            "spec": {"securityContext": {"sysctls": sysctls},
                     "containers": [{"name": "u", "image": img,
                                     "command": ["/bin/sh", "-c", "exec sleep 100000"]}]}}


def read_host(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_ipc_sysctls_apply_in_the_unit_namespace_only(cell, app_image):
    host = read_host("/proc/sys/kernel/shmmni"), read_host("/proc/sys/fs/mqueue/msg_max")
    a, c = cell()
    ctl = Controller(c, sysctl_pod(app_image, [{"name": "kernel.shmmni", "value": "1234"},
                                               {"name": "fs.mqueue.msg_max", "value": "33"}]))
    ctl.dispatch()
    wait_kip(ctl, lambda s: by_name(s["UnitStatuses"]).get("u", {}).get("State", {})
             .get("Running"))
    assert sh_in(c, "u", "cat /proc/sys/kernel/shmmni /proc/sys/fs/mqueue/msg_max") == \
        "1234\n33\n"
    assert (read_host("/proc/sys/kernel/shmmni"),
            read_host("/proc/sys/fs/mqueue/msg_max")) == host


@pytest.mark.parametrize("name,value,why", [
    ("net.core.somaxconn", "1024", "net.* needs the pod's own network namespace"),
    ("kernel.domainname", "x", "not namespaced"),
    ("vm.swappiness", "1", "not namespaced"),
])
def test_other_sysctls_are_refused_with_a_reason(cell, app_image, name, value, why):
    path = "/proc/sys/" + name.replace(".", "/")
    before = read_host(path)
    a, c = cell()
    ctl = Controller(c, sysctl_pod(app_image, [{"name": name, "value": value}]))
    ctl.dispatch()
    st = wait_kip(ctl, lambda s: (by_name(s["UnitStatuses"]).get("u", {}).get("State", {})
                                  .get("Waiting") or {}).get("StartFailure"))
    reason = by_name(st["UnitStatuses"])["u"]["State"]["Waiting"]["Reason"]
    assert reason.startswith("SysctlForbidden: ") and name in reason and why in reason, reason
    assert read_host(path) == before


# ---------------------------------------------------------------------------
# the pod-wide memory cap

def test_the_pod_is_capped_at_instance_memory_minus_the_reserve(tmp_path, registry, app_image):
    from test_agent_api import start_agent
    from test_agent_pod import FAST, wait_units_gone
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    "--pod-memory-reserve", "300Mi", env=FAST)
    try:
        c = a.client()
        c.update_pod(pod_params("ns_pod", units=[unit("u", app_image,
                                                      command=["/bin/sh", "-c", "exec sleep 1000"])],
                                terminationGracePeriodSeconds=0))
        wait_state(c, "u", "running")
        with open(os.path.join(a.dir, "state", "units", "u", "1", "state.json")) as f:
            dirs = json.load(f)["cgroups"]
        with open("/proc/meminfo") as f:
            total = int(next(l for l in f if l.startswith("MemTotal:")).split()[1]) * 1024
        want = (total - (300 << 20)) // 4096 * 4096  # the kernel keeps whole pages
        got = None
        for d in dirs:
            parent = os.path.dirname(d)
            for name in ("memory.max", "memory.limit_in_bytes"):
                p = os.path.join(parent, name)
                if os.path.exists(p) and os.path.exists(os.path.join(d, name)):
                    with open(p) as f:
                        got = int(f.read())
        assert got == want, (got, want, dirs)
        # The unit itself has no limit of its own (no resources.limits).
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        assert a.stop() == 0, a.log()[-3000:]
