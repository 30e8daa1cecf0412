# SPDX-License-Identifier: Apache-2.0
"""Seccomp on every unit and exec (issue 23; docs/agent-runtime.md "Seccomp").

A static probe (tests/lib/seccomp-probe.c, built here with gcc -static) in an
image made here calls syscalls with zero arguments and prints their errno; the
expected errno of each comes from the same Debian profile the agent has built
in, evaluated with containers/common's includes/excludes rules for the unit's
capabilities. Units and execs both carry the filter; `--seccomp unconfined`
turns it off; a Localhost profile replaces it; a capability added to a unit
opens the syscalls the profile gates on it; a malformed profile stops the
agent at start with its line.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

import pytest

from images import File, Image, Layer, busybox_layer, push
from registry import free_port
from test_agent_api import pod_agent, start_agent
from wire import pod_params, unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILE = "/usr/share/containers/seccomp.json"
DEFAULT_CAPS = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
                "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
                "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}
# Syscalls the default profile refuses to a unit with the default caps,
# some by name (EPERM), some by its default (ENOSYS).
BLOCKED = ["add_key", "request_key", "bpf", "perf_event_open", "kexec_load",
           "kexec_file_load", "open_by_handle_at", "userfaultfd", "init_module",
           "finit_module", "delete_module", "acct", "iopl", "ioperm",
           "settimeofday", "clock_settime", "lookup_dcookie", "fanotify_init",
           "kcmp", "swapon", "swapoff", "uselib", "vmsplice", "move_pages",
           "migrate_pages", "sysfs", "ustat", "nfsservctl"]
BB = "/bin/busybox"


def expected_errno(profile: dict, name: str, caps: set) -> int | None:
    """What the profile answers to a zero-argument call of name on amd64
    (None: allowed), by containers/common's rules."""
    caps = {c if c.startswith("CAP_") else "CAP_" + c for c in caps}
    for r in profile["syscalls"]:
        if name not in (r.get("names") or [r.get("name")]) or r.get("args"):
            continue
        inc, exc = r.get("includes") or {}, r.get("excludes") or {}
        if "amd64" in (exc.get("arches") or []):
            continue
        if any(c in caps for c in exc.get("caps") or []):
            continue
        if inc.get("arches") and "amd64" not in inc["arches"]:
            continue
        if any(c not in caps for c in inc.get("caps") or []):
            continue
        return None if r["action"] == "SCMP_ACT_ALLOW" else r.get("errnoRet", 1)
    return profile.get("defaultErrnoRet", 1)


def probe_results(out: str) -> dict:
    res = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3:
            res[f[0]] = (int(f[1]), int(f[2]))
    return res


def status_field(text: str, key: str) -> str:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return ""


@pytest.fixture(scope="module")
def profile() -> dict:
    with open(PROFILE) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def image(tmp_path_factory, module_registry) -> str:
    d = tmp_path_factory.mktemp("probe")
    exe = str(d / "seccomp-probe")
    subprocess.run(["gcc", "-static", "-O1", "-pthread", "-o", exe,
                    os.path.join(ROOT, "tests/lib/seccomp-probe.c")], check=True)
    with open(exe, "rb") as f:
        probe = f.read()
    push(module_registry, "t/scprobe", "v1",
         Image([busybox_layer(), Layer([File("probe", probe, mode=0o755)])],
               config={"Cmd": ["/bin/sh"]}))
    return module_registry.ref("t/scprobe", "v1")


@contextlib.contextmanager
def pod(d, reg, name: str, units: list, *extra: str):
    """pod_agent, whose clean-up (empty the pod, stop the agent) runs even
    when the test fails."""
    cm = pod_agent(str(d), reg, name, units, running(len(units)), *extra)
    a, c = cm.__enter__()
    try:
        yield a, c
    finally:
        cm.__exit__(None, None, None)


def running(n: int):
    return lambda s: len(s["unitStatus"]) == n and all(
        "running" in (u.get("state") or {}) for u in s["unitStatus"])


def run_exec(c, name: str, cmd: list) -> str:
    out, err, code = c.exec(name, cmd).collect()
    assert code == 0, (cmd, out, err)
    return out.decode()


def sleeper(name: str, image: str, **extra) -> dict:
    return unit(name, image, command=[BB, "sleep", "100000"], **extra)


def test_default_profile_on_units_and_execs(tmp_path, module_registry, image, profile):
    units = [sleeper("root", image),
             sleeper("user", image, securityContext={"runAsUser": 65534}),
             unit("self", image, command=["/bin/sh", "-c",
                                          f"{BB} cat /proc/self/status; exec {BB} sleep 100000"])]
    with pod(tmp_path, module_registry, "ns_sc", units) as (a, c):
        # The unit's own process (its log) and an exec'd one.
        deadline = time.monotonic() + 10
        log = b""
        while b"Seccomp:" not in log and time.monotonic() < deadline:
            log = c.logs("self")
            time.sleep(0.1)
        assert status_field(log.decode(), "Seccomp") == "2", log
        st = run_exec(c, "user", [BB, "cat", "/proc/self/status"])
        assert status_field(st, "Seccomp") == "2"
        assert status_field(st, "NoNewPrivs") == "1"
        # A root unit keeps setuid binaries working (no no_new_privs, as
        # the kubelet's default allowPrivilegeEscalation); it is filtered
        # all the same.
        st = run_exec(c, "root", [BB, "cat", "/proc/self/status"])
        assert status_field(st, "Seccomp") == "2"
        for name in ("root", "user"):
            res = probe_results(run_exec(c, name, ["/probe", *BLOCKED, "getpid"]))
            for sc in BLOCKED:
                want = expected_errno(profile, sc, DEFAULT_CAPS)
                assert want is not None, sc
                assert res[sc] == (-1, want), (name, sc, res[sc], want)
            assert res["getpid"][0] > 0
        # The common things still work: a shell, threads, wget.
        assert "threads ok" in run_exec(c, "root", ["/probe", "threads"])
        port = free_port()
        out = run_exec(c, "root", ["/bin/sh", "-c",
                                   f"mkdir -p /tmp/www && echo hello > /tmp/www/x && "
                                   f"{{ {BB} httpd -f -p 127.0.0.1:{port} -h /tmp/www & }}; "
                                   f"for i in $({BB} seq 100); do "
                                   f"{BB} wget -q -O - http://127.0.0.1:{port}/x && break; "
                                   f"{BB} sleep 0.1; done; kill %1 2>/dev/null; kill $! 2>/dev/null; true"])
        assert out.strip() == "hello"


def test_capability_opens_gated_syscalls(tmp_path, module_registry, image, profile):
    caps = {"add": ["DAC_READ_SEARCH", "SYS_ADMIN"], "drop": []}
    units = [sleeper("capped", image, securityContext={"capabilities": caps})]
    with pod(tmp_path, module_registry, "ns_sccap", units) as (a, c):
        res = probe_results(run_exec(c, "capped", ["/probe", "open_by_handle_at", "bpf",
                                                   "kexec_load"]))
        have = DEFAULT_CAPS | {"CAP_DAC_READ_SEARCH", "CAP_SYS_ADMIN"}
        assert expected_errno(profile, "open_by_handle_at", have) is None
        assert expected_errno(profile, "bpf", have) is None
        # The kernel's own answer to a NULL argument, not the filter's.
        assert res["open_by_handle_at"][1] not in (0, 1, 38), res
        assert res["bpf"][1] not in (0, 1, 38), res
        assert res["kexec_load"] == (-1, 1), res


def test_unconfined_as_an_itzo_flag(tmp_path, module_registry, image):
    """--seccomp unconfined, given the way Kip gives flags: cell_config.yaml's
    itzoFlag-seccomp."""
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", module_registry.host,
                    env={"CELL_CGROUP_NEST": "1"},
                    boot_config='itzoFlag-seccomp: "unconfined"\n')
    c = a.client()
    try:
        c.update_pod(pod_params("ns_scfree", units=[sleeper("free", image)],
                                terminationGracePeriodSeconds=0))
        c.wait_status(running(1), timeout=60)
        st = run_exec(c, "free", [BB, "cat", "/proc/self/status"])
        # No profile: the one filter left is the keyring guard every unit
        # has (runtime/keyring.c, issue 18), never the profile's.
        assert status_field(st, "Seccomp_filters") == "1", st
        res = probe_results(run_exec(c, "free", ["/probe", "add_key"]))
        assert res["add_key"][1] != 38, res  # the kernel's EFAULT
        # Taken as a flag (an agent without it ignores it with a warning).
        assert "ignoring itzoFlag-seccomp" not in a.log(), a.log()[-2000:]
    finally:
        c.update_pod(pod_params("ns_scfree", terminationGracePeriodSeconds=0))
        units = os.path.join(a.dir, "state", "units")
        end = time.monotonic() + 20
        while os.path.isdir(units) and os.listdir(units) and time.monotonic() < end:
            time.sleep(0.1)
        assert a.stop() == 0, a.log()[-3000:]


def test_localhost_and_unconfined_profiles(tmp_path, module_registry, image):
    d = tmp_path / "profiles"
    d.mkdir()
    (d / "no-mkdir.json").write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                      "errnoRet": 13}]}))
    units = [sleeper("local", image, securityContext={
                 "seccompProfile": {"type": "Localhost",
                                    "localhostProfile": "no-mkdir.json"}}),
             sleeper("none", image, securityContext={
                 "seccompProfile": {"type": "Unconfined"}})]
    with pod(tmp_path, module_registry, "ns_scloc", units,
                   "--seccomp-profile-dir", str(d)) as (a, c):
        out, err, code = c.exec("local", [BB, "mkdir", "/tmp/d"]).collect()
        assert code != 0 and b"Permission denied" in err, (out, err)
        res = probe_results(run_exec(c, "local", ["/probe", "add_key"]))
        assert res["add_key"][1] != 38, res  # not the default profile
        st = run_exec(c, "none", [BB, "cat", "/proc/self/status"])
        # No profile: the one filter left is the keyring guard every unit
        # has (runtime/keyring.c, issue 18), never the profile's.
        assert status_field(st, "Seccomp_filters") == "1", st
        # The file is read again when it changed: a unit started after the
        # change gets the new one, the running one keeps its filter.
        (d / "no-mkdir.json").write_text(json.dumps({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["symlink", "symlinkat"], "action": "SCMP_ACT_ERRNO",
                          "errnoRet": 13}]}))
        later = sleeper("later", image, securityContext={
            "seccompProfile": {"type": "Localhost", "localhostProfile": "no-mkdir.json"}})
        c.update_pod(pod_params("ns_scloc", units=units + [later],
                                terminationGracePeriodSeconds=0))
        c.wait_status(running(3), timeout=60)
        out, err, code = c.exec("later", [BB, "ln", "-s", "x", "/tmp/l"]).collect()
        assert code != 0 and b"Permission denied" in err, (out, err)
        run_exec(c, "later", [BB, "mkdir", "/tmp/d"])
        run_exec(c, "local", [BB, "ln", "-s", "x", "/tmp/l"])


def test_malformed_profile_refused_at_start(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [\n'
                   '    {"names": ["read"], "action": "SCMP_ACT_NOPE"}\n  ]\n}\n')
    a = start_agent(str(tmp_path / "agent"), "--seccomp-profile", str(bad), wait=False)
    try:
        assert a.proc.wait(timeout=20) == 1
    finally:
        if a.alive():
            a.stop()
    log = a.log()
    assert "bad.json" in log and "line 4" in log and "unknown action" in log, log
