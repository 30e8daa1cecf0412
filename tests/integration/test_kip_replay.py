"""cell-agent fed what the real Kip controller sends (issue 7).

Kip adds two packagePath volumes to every pod, ``resolvconf`` and
``etchosts`` (path ``/etc/resolv.conf`` and ``/etc/hosts``), and mounts them
on every unit at those paths with no subPath; the packages hold
``ROOTFS/etc/resolv.conf`` and ``ROOTFS/etc/hosts``
(pkg/server/convert.go: containerToUnit, k8sToMilpaPod).
"""
from __future__ import annotations

import time

import pytest

from wire import WireError, pod_params, unit
from test_agent_pod import cell, image, state_of, wait_state  # noqa: F401 - fixtures


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
