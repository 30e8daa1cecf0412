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
