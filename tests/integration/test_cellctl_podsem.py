# SPDX-License-Identifier: Apache-2.0
"""Issue 22: the example pods of the Kubernetes documentation's task pages
(kubernetes/website content/en/examples/pods/...), rewritten here with the
test registry's busybox, converted by cellctl and run on a real cell; each
gives what its page says (docs/cellctl.md lists them). Also: `convert
--kip` stays exactly Kip's (no extension), and the default sends them.
"""
from __future__ import annotations

import json
import os
import tarfile
import time

import pytest

from test_cellctl import cell, cellctl, image  # noqa: F401

NODE = ["--node-name", "cell-node", "--pod-ip", "10.9.8.7"]


def manifest(tmp_path, pod: dict) -> str:
    os.makedirs(tmp_path, exist_ok=True)
    p = tmp_path / (pod["metadata"]["name"] + ".json")
    p.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", **pod}))
    return str(p)


def convert(tmp_path, pod: dict, *extra: str) -> dict:
    return json.loads(cellctl("convert", manifest(tmp_path, pod), *NODE, *extra).stdout)


def packages(tmp_path, pod: dict) -> dict:
    out = tmp_path / "pkgs"
    cellctl("convert", manifest(tmp_path, pod), *NODE, "--packages", str(out))
    files = {}
    for name in os.listdir(out):
        with tarfile.open(out / name) as t:
            for m in t.getmembers():
                files[name[:-len(".tar.gz")] + ":" + m.name[len("ROOTFS/"):]] = \
                    t.extractfile(m).read().decode()
    return files


def sh_container(name: str, image: str, script: str, **kw) -> dict:
    return {"name": name, "image": image, "command": ["sh", "-c"], "args": [script], **kw}


# ---- the pods (modeled on the website's examples; local images) ----

def lifecycle_events(image):  # pods/lifecycle-events.yaml
    return {"metadata": {"name": "lifecycle-demo"}, "spec": {"containers": [sh_container(
        "lifecycle-demo-container", image, "exec sleep 1000",
        lifecycle={"postStart": {"exec": {"command": [
            "/bin/sh", "-c",
            "mkdir -p /usr/share; echo Hello from the postStart handler > /usr/share/message"]}},
            "preStop": {"exec": {"command": ["/bin/sh", "-c", "kill -TERM 1; sleep 1"]}}})]}}


def security_context(image):  # pods/security/security-context.yaml
    return {"metadata": {"name": "security-context-demo"}, "spec": {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
        "volumes": [{"name": "sec-ctx-vol", "emptyDir": {}}],
        "containers": [sh_container(
            "sec-ctx-demo", image, "exec sleep 1000",
            volumeMounts=[{"name": "sec-ctx-vol", "mountPath": "/data/demo"}],
            securityContext={"allowPrivilegeEscalation": False})]}}


def security_context_2(image):  # pods/security/security-context-2.yaml
    return {"metadata": {"name": "security-context-demo-2"}, "spec": {
        "securityContext": {"runAsUser": 1000},
        "containers": [sh_container(
            "sec-ctx-demo-2", image, "exec sleep 1000",
            securityContext={"runAsUser": 2000, "allowPrivilegeEscalation": False})]}}


def security_context_4(image):  # pods/security/security-context-4.yaml
    return {"metadata": {"name": "security-context-demo-4"}, "spec": {
        "containers": [sh_container(
            "sec-ctx-4", image, "exec sleep 1000",
            securityContext={"capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}})]}}


def dapi_volume(image):  # pods/inject/dapi-volume.yaml
    return {"metadata": {"name": "kubernetes-downwardapi-volume-example",
                         "labels": {"zone": "us-est-coast", "cluster": "test-cluster1",
                                    "rack": "rack-22"},
                         "annotations": {"build": "two", "builder": "john-doe"}},
            "spec": {"containers": [sh_container(
                "client-container", image, "exec sleep 1000",
                volumeMounts=[{"name": "podinfo", "mountPath": "/etc/podinfo"}])],
                "volumes": [{"name": "podinfo", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "annotations",
                     "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]}}


RESOURCES = {"requests": {"memory": "32Mi", "cpu": "125m"},
             "limits": {"memory": "64Mi", "cpu": "250m"}}


def dapi_volume_resources(image):  # pods/inject/dapi-volume-resources.yaml
    def item(path, res, div):
        return {"path": path, "resourceFieldRef": {
            "containerName": "client-container", "resource": res, "divisor": div}}
    return {"metadata": {"name": "kubernetes-downwardapi-volume-example-2"},
            "spec": {"containers": [sh_container(
                "client-container", image, "exec sleep 1000", resources=RESOURCES,
                volumeMounts=[{"name": "podinfo", "mountPath": "/etc/podinfo"}])],
                "volumes": [{"name": "podinfo", "downwardAPI": {"items": [
                    item("cpu_limit", "limits.cpu", "1m"),
                    item("cpu_request", "requests.cpu", "1m"),
                    item("mem_limit", "limits.memory", "1Mi"),
                    item("mem_request", "requests.memory", "1Mi")]}}]}}


def dapi_envars_container(image):  # pods/inject/dapi-envars-container.yaml
    def var(name, res):
        return {"name": name, "valueFrom": {"resourceFieldRef": {
            "containerName": "test-container", "resource": res}}}
    return {"metadata": {"name": "dapi-envars-resourcefieldref"},
            "spec": {"restartPolicy": "Never", "containers": [sh_container(
                "test-container", image,
                # printenv, as on the page (this busybox has no printenv)
                "echo $MY_CPU_REQUEST; echo $MY_CPU_LIMIT; "
                "echo $MY_MEM_REQUEST; echo $MY_MEM_LIMIT",
                resources=RESOURCES,
                env=[var("MY_CPU_REQUEST", "requests.cpu"), var("MY_CPU_LIMIT", "limits.cpu"),
                     var("MY_MEM_REQUEST", "requests.memory"),
                     var("MY_MEM_LIMIT", "limits.memory")])]}}


def dapi_envars_pod(image):  # pods/inject/dapi-envars-pod.yaml
    def var(name, path):
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
    return {"metadata": {"name": "dapi-envars-fieldref"},
            "spec": {"restartPolicy": "Never", "containers": [sh_container(
                "test-container", image,
                "echo $MY_NODE_NAME; echo $MY_POD_NAME; echo $MY_POD_NAMESPACE; "
                "echo $MY_POD_IP; echo $MY_POD_SERVICE_ACCOUNT",
                env=[var("MY_NODE_NAME", "spec.nodeName"), var("MY_POD_NAME", "metadata.name"),
                     var("MY_POD_NAMESPACE", "metadata.namespace"),
                     var("MY_POD_IP", "status.podIP"),
                     var("MY_POD_SERVICE_ACCOUNT", "spec.serviceAccountName")])]}}


ALL = [lifecycle_events, security_context, security_context_2, security_context_4,
       dapi_volume, dapi_volume_resources,
       dapi_envars_container, dapi_envars_pod]
EXTENSION_KEYS = {"lifecycle", "imagePullPolicy", "fsGroup", "fsGroupChangePolicy",
                  "activeDeadlineSeconds", "runAsNonRoot", "stdin", "tty", "downwardAPI"}


def keys_in(j) -> set:
    if isinstance(j, dict):
        return set(j) | set().union(*(keys_in(v) for v in j.values()))
    if isinstance(j, list):
        return set().union(*(keys_in(v) for v in j)) if j else set()
    return set()


def non_null_untagged(params: dict) -> list:
    out = []
    for u in params["spec"]["units"] or []:
        sc = u.get("securityContext") or {}
        out += [k for k in ("Privileged", "RunAsNonRoot", "ReadOnlyRootFilesystem",
                            "AllowPrivilegeEscalation", "ProcMount") if sc.get(k) is not None]
    return out


@pytest.mark.parametrize("pod", ALL, ids=lambda f: f.__name__)
def test_kip_mode_sends_no_extension(tmp_path, pod):
    got = convert(tmp_path, pod("busybox:1"), "--kip")
    assert not keys_in(got) & EXTENSION_KEYS, keys_in(got) & EXTENSION_KEYS
    assert not non_null_untagged(got)


def test_default_mode_sends_extensions(tmp_path):
    u = convert(tmp_path, lifecycle_events("busybox"))["spec"]["units"][0]
    assert set(u["lifecycle"]) == {"PostStart", "PreStop"}
    assert u["imagePullPolicy"] == "Always"  # no tag: the API server's default
    s = convert(tmp_path, security_context("busybox:1"))["spec"]
    assert s["securityContext"]["fsGroup"] == 2000
    assert s["units"][0]["securityContext"]["AllowPrivilegeEscalation"] is False
    assert s["units"][0]["imagePullPolicy"] == "IfNotPresent"
    v = convert(tmp_path, dapi_volume("busybox:1"))["spec"]["volumes"][0]
    assert v["name"] == "podinfo" and "downwardAPI" in v["projected"]["sources"][0]


def test_downward_api_env(tmp_path):
    env = {e["name"]: e.get("value") for e in
           convert(tmp_path, dapi_envars_container("busybox:1"))["spec"]["units"][0]["env"]}
    assert env == {"MY_CPU_REQUEST": "1", "MY_CPU_LIMIT": "1",
                   "MY_MEM_REQUEST": "33554432", "MY_MEM_LIMIT": "67108864"}
    env = {e["name"]: e.get("value") for e in
           convert(tmp_path, dapi_envars_pod("busybox:1"))["spec"]["units"][0]["env"]}
    assert env == {"MY_NODE_NAME": "cell-node", "MY_POD_NAME": "dapi-envars-fieldref",
                   "MY_POD_NAMESPACE": "default", "MY_POD_IP": "10.9.8.7",
                   "MY_POD_SERVICE_ACCOUNT": "default"}
    # Kip: resourceFieldRef dropped, status.podIP empty, serviceAccountName as given.
    env = {e["name"]: e.get("value") for e in
           convert(tmp_path, dapi_envars_pod("busybox:1"), "--kip")["spec"]["units"][0]["env"]}
    assert env["MY_POD_IP"] is None and env["MY_POD_SERVICE_ACCOUNT"] is None


def test_downward_api_volume_files(tmp_path):
    f = packages(tmp_path, dapi_volume("busybox:1"))
    assert f["podinfo:labels"] == 'cluster="test-cluster1"\nrack="rack-22"\nzone="us-est-coast"'
    assert f["podinfo:annotations"] == 'build="two"\nbuilder="john-doe"'
    f = packages(tmp_path / "2", dapi_volume_resources("busybox:1"))
    assert [f["podinfo:" + k] for k in ("cpu_limit", "cpu_request", "mem_limit", "mem_request")] \
        == ["250", "125", "64", "32"]


# ---- on a cell ----

def run_pod(c, tmp_path, pod: dict, *extra: str) -> str:
    return c.ctl("run", manifest(tmp_path, pod), "--timeout", "60", *extra).stdout


def exec_out(c, script: str) -> str:
    return c.ctl("exec", "--", "/bin/sh", "-c", script).stdout


def wait_logs(c, unit: str, want: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = c.ctl("logs", unit, check=None).stdout
        if want in out:
            return out
        time.sleep(0.2)
    raise AssertionError(f"{want!r} not in {out!r}")


def test_example_lifecycle_events(cell, image, tmp_path):
    c = cell()
    run_pod(c, tmp_path, lifecycle_events(image))
    assert exec_out(c, "cat /usr/share/message") == "Hello from the postStart handler\n"


def test_example_security_context(cell, image, tmp_path):
    c = cell()
    run_pod(c, tmp_path, security_context(image))
    out = exec_out(c, "id -u; id -g; stat -c '%a %g' /data/demo; cd /data/demo; "
                      "echo hello > testfile; stat -c '%U %g' testfile; "
                      "grep NoNewPrivs /proc/self/status | tr -dc 0-9")
    assert out.split("\n") == ["1000", "3000", "2777 2000", "UNKNOWN 2000", "1"], out


def test_example_security_context_2(cell, image, tmp_path):
    """The container's runAsUser wins over the pod's; no_new_privs."""
    c = cell()
    run_pod(c, tmp_path, security_context_2(image))
    assert exec_out(c, "ps -o user,comm | grep sleep | tr -s ' ' | cut -d' ' -f1; "
                       "grep NoNewPrivs /proc/1/status | tr -dc 0-9") == "2000\n1"


def test_example_security_context_4(cell, image, tmp_path):
    """CAP_NET_ADMIN (12) and CAP_SYS_TIME (25) added to the default set."""
    c = cell()
    run_pod(c, tmp_path, security_context_4(image))
    eff = int(exec_out(c, "grep CapEff /proc/1/status | cut -f2").strip(), 16)
    assert eff & (1 << 12) and eff & (1 << 25), hex(eff)


def test_example_dapi_volume(cell, image, tmp_path):
    c = cell()
    run_pod(c, tmp_path, dapi_volume(image))
    assert exec_out(c, "cat /etc/podinfo/labels; echo; cat /etc/podinfo/annotations") == \
        'cluster="test-cluster1"\nrack="rack-22"\nzone="us-est-coast"\nbuild="two"\nbuilder="john-doe"'


def test_example_dapi_volume_resources(cell, image, tmp_path):
    c = cell()
    run_pod(c, tmp_path, dapi_volume_resources(image))
    assert exec_out(c, "cd /etc/podinfo; for f in cpu_limit cpu_request mem_limit mem_request; "
                       "do cat $f; echo; done") == "250\n125\n64\n32\n"


def test_example_dapi_envars(cell, image, tmp_path):
    c = cell()
    run_pod(c, tmp_path, dapi_envars_container(image), "--wait")
    assert wait_logs(c, "test-container", "67108864") == "1\n1\n33554432\n67108864\n"
    c.ctl("delete", "--pod", "default_dapi-envars-resourcefieldref", "--grace", "0")
    run_pod(c, tmp_path, dapi_envars_pod(image), "--wait", *NODE)
    assert wait_logs(c, "test-container", "default\n") == \
        "cell-node\ndapi-envars-fieldref\ndefault\n10.9.8.7\ndefault\n"
