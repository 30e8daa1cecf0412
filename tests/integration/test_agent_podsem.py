# SPDX-License-Identifier: Apache-2.0
"""Pod semantics beyond Kip (issue 22): the wire's extensions, sent by
cellctl and never by Kip (docs/agent-wire.md "Extensions"), on real
containers: securityContext (readOnlyRootFilesystem, runAsNonRoot,
allowPrivilegeEscalation, privileged, procMount), fsGroup, lifecycle hooks,
activeDeadlineSeconds. Each test fails on an agent that ignores the field.
"""
from __future__ import annotations

import time

import pytest

from wire import pod_params
from test_agent_pod import cell, image, sh, state_of, units_by_name, wait_state  # noqa: F401


_runs = [0]


def run_once(c, u, **spec) -> str:
    """Run one unit to its end (restartPolicy Never); its log as text. Each
    run gets a unit name of its own, so no earlier end is mistaken for it."""
    _runs[0] += 1
    u = {**u, "name": f"{u['name']}{_runs[0]}"}
    c.update_pod(pod_params("ns_pod", units=[u], restart_policy="Never", **spec))
    wait_state(c, u["name"], "terminated", timeout=60)
    deadline = time.monotonic() + 10
    out = c.logs(u["name"]).decode()
    while not out.endswith("end\n") and time.monotonic() < deadline:
        time.sleep(0.1)
        out = c.logs(u["name"]).decode()
    return out


def sc(**kw) -> dict:
    return {"securityContext": kw}


def test_read_only_root_filesystem(cell, image):
    a, c = cell()
    script = "touch /x 2>/dev/null && echo rw || echo ro; touch /tmp/y 2>/dev/null && echo tmp-rw; echo end"
    assert run_once(c, sh(image, "u", script, **sc(ReadOnlyRootFilesystem=True))) == "ro\nend\n"
    assert run_once(c, sh(image, "u", script, **sc(ReadOnlyRootFilesystem=False))) \
        == "rw\ntmp-rw\nend\n"


def test_run_as_non_root_refuses_root(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", restart_policy="Never",
                            units=[sh(image, "u", "exit 0", **sc(runAsNonRoot=True))]))
    st = wait_state(c, "u", "waiting", pred=lambda u: u["state"]["waiting"]["startFailure"])
    w = state_of(st, "u")["waiting"]
    assert w["reason"].startswith("CreateContainerConfigError: container has runAsNonRoot"), w
    # The pod's runAsNonRoot too; a unit's runAsUser satisfies it.
    out = run_once(c, sh(image, "v", "id -u; echo end", **sc(runAsUser=1000)),
                   securityContext={"runAsNonRoot": True})
    assert out == "1000\nend\n"


@pytest.mark.parametrize("ctx,want", [
    ({}, "0"),                                   # root: as before
    ({"AllowPrivilegeEscalation": False}, "1"),  # no_new_privs even for root
    ({"runAsUser": 1000}, "1"),                  # non-root: as before
    ({"runAsUser": 1000, "AllowPrivilegeEscalation": True}, "0"),
])
def test_allow_privilege_escalation(cell, image, ctx, want):
    a, c = cell()
    out = run_once(c, sh(image, "u", "grep NoNewPrivs /proc/self/status | tr -dc 0-9; echo; echo end",
                         **sc(**ctx)))
    assert out == want + "\nend\n"


def test_privileged_and_proc_mount(cell, image):
    a, c = cell()
    script = ("grep CapEff /proc/self/status | cut -f2; "
              "grep -c ' /proc/sys ' /proc/self/mountinfo; echo end")
    plain = run_once(c, sh(image, "u", script)).split("\n")
    priv = run_once(c, sh(image, "u", script, **sc(privileged=True))).split("\n")
    unmasked = run_once(c, sh(image, "u", script, **sc(ProcMount="Unmasked"))).split("\n")
    assert int(plain[1]) == 1 and int(priv[1]) == 0 and int(unmasked[1]) == 0
    assert int(priv[0], 16) > int(plain[0], 16)
    assert int(priv[0], 16) & (1 << 21)  # CAP_SYS_ADMIN
    assert plain[0] == unmasked[0]


# ---- lifecycle hooks ----

def wait_log(c, name: str, want: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = c.logs(name).decode()
        if want in out:
            return out
        time.sleep(0.1)
    raise AssertionError(f"{want!r} never in the log of {name}: {out!r}")


def hooks(post=None, pre=None) -> dict:
    lc = {}
    if post:
        lc["PostStart"] = post
    if pre:
        lc["PreStop"] = pre
    return {"lifecycle": lc}


def test_post_start_runs_after_the_start_and_gates_readiness(cell, image):
    """pods/lifecycle-events.yaml: the hook writes /usr/share/message,
    which the container then finds. The unit is ready only once the hook
    has ended."""
    a, c = cell()
    main = ("while ! test -e /usr/share/message; do sleep 0.1; done; "
            "cat /usr/share/message; exec sleep 1000")
    hook = {"exec": {"command": ["/bin/sh", "-c",
                                 "sleep 1; mkdir -p /usr/share; echo Hello from the postStart handler "
                                 "> /usr/share/message"]}}
    c.update_pod(pod_params("ns_pod", units=[sh(image, "u", main, **hooks(post=hook))],
                            terminationGracePeriodSeconds=1))
    st = c.wait_status(lambda s: units_by_name(s).get("u", {}).get("ready"))
    assert "running" in state_of(st, "u")
    assert wait_log(c, "u", "Hello") == "Hello from the postStart handler\n"


def test_failing_post_start_kills_the_unit(cell, image):
    a, c = cell()
    hook = {"exec": {"command": ["/bin/sh", "-c", "exit 3"]}}
    c.update_pod(pod_params("ns_pod", restart_policy="Never",
                            units=[sh(image, "u", "exec sleep 1000", **hooks(post=hook))],
                            terminationGracePeriodSeconds=1))
    st = wait_state(c, "u", "terminated")
    t = state_of(st, "u")["terminated"]
    assert t["reason"] == "FailedPostStartHook", t
    assert units_by_name(st)["u"]["ready"] is False


PRE_STOP_MAIN = ("trap 'read up idle < /proc/uptime; "
                 "echo $(cat /tmp/prestop 2>/dev/null || echo none) $up > /dev/termination-log; "
                 "exit 0' TERM; while :; do sleep 0.1; done")


def uptime() -> float:
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


@pytest.mark.parametrize("pre,want,delay", [
    ({"exec": {"command": ["/bin/sh", "-c", "sleep 1; echo ran > /tmp/prestop"]}}, "ran", 1),
    # A hook longer than the grace is cut; the signal still comes.
    ({"exec": {"command": ["/bin/sh", "-c", "echo ran > /tmp/prestop; sleep 1000"]}}, "ran", 3),
    # A sleep hook leaves no file: it shows only as the signal's delay.
    ({"sleep": {"seconds": 2}}, "none", 2),
    (None, "none", 0),
])
def test_pre_stop_runs_before_the_signal(cell, image, pre, want, delay):
    """A spec change restarts the unit: its preStop runs first, then TERM
    (caught: exit 0), whose handler reports what the hook left and when
    the signal came (the kernel's uptime, the host's clock too): never
    before the hook's length (the grace, 3 s, for one cut there)."""
    a, c = cell()
    spec = {"terminationGracePeriodSeconds": 3}
    u = sh(image, "u", PRE_STOP_MAIN, **hooks(pre=pre))
    c.update_pod(pod_params("ns_pod", units=[u], **spec))
    wait_state(c, "u", "running")
    u2 = {**u, "env": [{"name": "CHANGED", "value": "1"}]}
    t0 = uptime()
    c.update_pod(pod_params("ns_pod", units=[u2], **spec))
    st = c.wait_status(lambda s: units_by_name(s)["u"]["restartCount"] == 1 and
                       "terminated" in (units_by_name(s)["u"]["lastState"] or {}), timeout=60)
    t = units_by_name(st)["u"]["lastState"]["terminated"]
    left, term = t["message"].split()
    assert (t["exitCode"], left) == (0, want), t
    assert float(term) >= t0 + delay - 0.3, f"TERM {float(term) - t0:.2f} s after the stop"


def test_http_get_post_start_hook(cell, image):
    """An httpGet hook reaches a server (busybox httpd, which logs the
    request); the server runs in a unit of its own that is ready first, as
    the hook runs right after the start and is not retried."""
    import random
    port = random.randrange(20000, 60000)
    a, c = cell()
    srv = sh(image, "srv", f"mkdir -p /www; echo ok > /www/hook.html; "
                           f"exec httpd -f -vv -p 127.0.0.1:{port} -h /www",
             readinessProbe={"tcpSocket": {"port": port, "host": "127.0.0.1"},
                             "periodSeconds": 1})
    spec = {"terminationGracePeriodSeconds": 1}
    c.update_pod(pod_params("ns_pod", units=[srv], **spec))
    c.wait_status(lambda s: units_by_name(s).get("srv", {}).get("ready"))
    hook = {"httpGet": {"path": "/hook.html", "port": port, "host": "127.0.0.1"}}
    u = sh(image, "u", "exec sleep 1000", **hooks(post=hook))
    c.update_pod(pod_params("ns_pod", units=[srv, u], **spec))
    c.wait_status(lambda s: units_by_name(s).get("u", {}).get("ready"))
    assert "/hook.html" in wait_log(c, "srv", "/hook.html")


# ---- fsGroup ----

@pytest.mark.parametrize("policy", [None, "OnRootMismatch"])
def test_fs_group_owns_volumes_with_setgid(cell, image, policy):
    """pods/security/security-context.yaml: the emptyDir is the group's,
    setgid, and a file a unit creates there gets the group."""
    a, c = cell()
    psc = {"fsGroup": 2000, "runAsUser": 1000, "runAsGroup": 3000}
    if policy:
        psc["fsGroupChangePolicy"] = policy
    vol = {"name": "sec-ctx-vol", "emptyDir": {}}
    script = ("stat -c '%g %A' /data/demo; echo hi > /data/demo/f; "
              "stat -c '%g' /data/demo/f; echo end")
    u = sh(image, "u", script,
           volumeMounts=[{"name": "sec-ctx-vol", "mountPath": "/data/demo"}])
    out = run_once(c, u, volumes=[vol], securityContext={
        "namespaceOptions": None, "supplementalGroups": [], "sysctls": [], **psc})
    assert out == "2000 drwxrwsrwx\n2000\nend\n", out


@pytest.mark.parametrize("fs_group", [None, 2000])
def test_sub_path_dirs_usable_by_a_non_root_unit(cell, image, fs_group):
    """Bitnami's layout (issue 31): one emptyDir mounted several times by
    subPath into a uid-1001 unit. The kubelet makes a missing subPath with
    the volume root's mode (0777; 2777 and the group with fsGroup), so the
    unit can write it; 0755 root:root made nginx die on mkdir()."""
    a, c = cell()
    psc = {"namespaceOptions": None, "supplementalGroups": [], "sysctls": [],
           "runAsUser": 1001}
    if fs_group:
        psc["fsGroup"] = fs_group
    script = ("mkdir /var/lib/nginx/body/x && echo made; "
              "stat -c '%a %g' /var/lib/nginx/body /opt/conf; "
              "touch /opt/conf/f && echo wrote; echo end")
    u = sh(image, "u", script, volumeMounts=[
        {"name": "empty", "mountPath": "/var/lib/nginx/body", "subPath": "body"},
        {"name": "empty", "mountPath": "/opt/conf", "subPath": "app-conf/nginx"}])
    out = run_once(c, u, volumes=[{"name": "empty", "emptyDir": {}}], securityContext=psc)
    mode = f"2777 {fs_group}" if fs_group else "777 0"
    assert out == f"made\n{mode}\n{mode}\nwrote\nend\n", out


def test_fs_group_once_leaves_an_init_units_0700(cell, image):
    """PostgreSQL's initdb in an init unit leaves PGDATA 0700; the main
    unit must find it so (the kubelet applies fsGroup when it sets the
    volume up, not at every container start). Before: 2770, and
    postgres refused to start."""
    a, c = cell()
    psc = {"namespaceOptions": None, "supplementalGroups": [], "sysctls": [],
           "fsGroup": 2000}
    mounts = [{"name": "data", "mountPath": "/bitnami/postgresql"}]
    init = sh(image, "init", "mkdir -p /bitnami/postgresql/data && "
              "chmod 0700 /bitnami/postgresql/data && chown 1001:1001 /bitnami/postgresql/data",
              volumeMounts=mounts)
    main = sh(image, "main", "stat -c '%a %u %g' /bitnami/postgresql/data "
              "/bitnami/postgresql; echo end", volumeMounts=mounts)
    _runs[0] += 1
    name = f"main{_runs[0]}"
    c.update_pod(pod_params("ns_pod", units=[{**main, "name": name}], init_units=[init],
                            restart_policy="Never", securityContext=psc,
                            volumes=[{"name": "data", "emptyDir": {}}]))
    wait_state(c, name, "terminated", timeout=60)
    deadline = time.monotonic() + 10
    out = c.logs(name).decode()
    while not out.endswith("end\n") and time.monotonic() < deadline:
        time.sleep(0.1)
        out = c.logs(name).decode()
    assert out == "700 1001 1001\n2777 0 2000\nend\n", out


# ---- activeDeadlineSeconds ----

def test_active_deadline_fails_the_pod(cell, image):
    a, c = cell()
    c.update_pod(pod_params("ns_pod", restart_policy="Always", activeDeadlineSeconds=2,
                            terminationGracePeriodSeconds=1,
                            units=[sh(image, "u", "exec sleep 1000")]))
    st = wait_state(c, "u", "terminated", timeout=60)
    t = state_of(st, "u")["terminated"]
    assert t["reason"] == "DeadlineExceeded", t
    time.sleep(1.0)  # several back-offs (50 ms units): none may restart it
    st = c.status()
    assert units_by_name(st)["u"]["restartCount"] == 0
    assert "terminated" in state_of(st, "u")


# ---- imagePullPolicy, against a registry whose tag moves ----

def mark_image(registry, mark: str, tag: str = "moving") -> str:
    from images import Image, busybox_layer, push
    push(registry, "t/mv", tag, Image([busybox_layer()],
                                      config={"Cmd": ["/bin/sh"], "Env": [f"MARK={mark}"]}))
    return registry.ref("t/mv", tag)


def marks_seen(c, name: str, after: int) -> str:
    """The MARK of a run later than restart number `after`."""
    st = c.wait_status(lambda s: units_by_name(s).get(name, {}).get("restartCount", 0) > after + 1,
                       timeout=60)
    del st
    return c.logs(name).decode().strip()


@pytest.mark.parametrize("tag", ["moving", "latest"])
@pytest.mark.parametrize("policy,moves", [("Always", True), ("IfNotPresent", False)])
def test_pull_policy_with_a_moving_tag(cell, registry, policy, moves, tag):
    a, c = cell()
    ref = mark_image(registry, "A", tag)
    u = sh(ref, "u", "echo $MARK; sleep 0.2", imagePullPolicy=policy)
    c.update_pod(pod_params("ns_pod", units=[u]))
    c.wait_status(lambda s: units_by_name(s).get("u", {}).get("restartCount", 0) >= 1, timeout=60)
    assert c.logs("u").decode().strip() == "A"
    mark_image(registry, "B", tag)
    n = units_by_name(c.status())["u"]["restartCount"]
    assert marks_seen(c, "u", n) == ("B" if moves else "A")


def test_pull_policy_never(cell, registry):
    a, c = cell()
    ref = mark_image(registry, "A")
    c.update_pod(pod_params("ns_pod", units=[sh(ref, "u", "echo $MARK; exec sleep 1000",
                                                  imagePullPolicy="Never")]))
    st = wait_state(c, "u", "waiting", pred=lambda u: "ErrImageNeverPull" in
                    u["state"]["waiting"]["reason"])
    assert units_by_name(st)["u"]["state"]["waiting"]["startFailure"] is False
    # Once another unit has pulled it, Never finds it in the cache.
    c.update_pod(pod_params("ns_pod", units=[
        sh(ref, "u", "echo $MARK; exec sleep 1000", imagePullPolicy="Never"),
        sh(ref, "puller", "exec sleep 1000")], terminationGracePeriodSeconds=0))
    wait_state(c, "u", "running", timeout=60)


# ---- tty units and attach ----

def read_until(s, pred, timeout=15.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred(out):
        f = s.recv(max(0.1, deadline - time.monotonic()))
        if f is None:
            break
        if f[0] == 1:
            out += f[1]
    return out


def test_tty_unit_and_attach_it(cell, image):
    """A unit with tty: its stdio is a terminal, and `attach -it` drives
    the shell on it."""
    a, c = cell()
    u = sh(image, "t", "[ -t 0 ] && [ -t 1 ] && echo on-a-tty; exec /bin/sh -i",
           tty=True, stdin=True)
    c.update_pod(pod_params("ns_pod", units=[u], terminationGracePeriodSeconds=1))
    wait_state(c, "t", "running")
    deadline = time.monotonic() + 10
    while b"on-a-tty" not in c.logs("t") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert b"on-a-tty" in c.logs("t")
    s = c.attach("t", interactive=True, tty=True)
    time.sleep(0.3)
    s.send(0, "echo sum-$((40+2))\n")
    got = read_until(s, lambda o: b"sum-42\r\n" in o)
    s.close()
    assert b"sum-42\r\n" in got, got  # the terminal's ONLCR: \r\n
