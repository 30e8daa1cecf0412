# SPDX-License-Identifier: Apache-2.0
"""Platforms across the pieces (issue 30, arm64 cells): the puller takes
this machine's platform from an index and refuses a single-platform image
of another architecture (no exec format error later), the agent's unit
waits with a reason that names the platforms the image has, and cellctl
asks the registry which architectures a pod's images have before it picks
an instance type (never an arm64 type for an amd64-only image, nor the
reverse). This machine is amd64: an image without amd64 plays the part an
image without arm64 plays on an arm64 cell (the same code; the arm64
default itself is checked by running the arm64 cell-pull under qemu-user in
tests/image/test_arm64_static.py)."""
from __future__ import annotations

import json
import os

import pytest

from images import Image, Index, busybox_layer, platform_image, push
from test_agent_api import start_agent
from test_agent_pod import FAST, sh, units_by_name, wait_state
from test_cellctl import cellctl
from wire import pod_params

ARM_ONLY = [platform_image("linux", "arm64", "v8"), platform_image("linux", "arm", "v7")]
MULTI = [platform_image("linux", "amd64"), platform_image("linux", "arm64", "v8")]


def test_index_without_this_machine_names_what_it_has(registry, pull, workdir, tmp_path):
    push(registry, "t/armonly", "v1", Index(ARM_ONLY))
    rc, _, err = pull(registry, registry.ref("t/armonly", "v1"), str(tmp_path / "r"), workdir)
    assert rc == 1
    assert "no image for platform linux/amd64" in err, err
    assert "available: linux/arm64/v8, linux/arm/v7" in err, err


def test_single_image_of_another_architecture_is_refused(registry, pull, workdir, tmp_path):
    """A plain manifest (no index) whose config says arm64: refused on
    amd64 with the platform it has, taken when that platform is asked."""
    push(registry, "t/arm64", "v1", platform_image("linux", "arm64", "v8", fmt="docker"))
    ref = registry.ref("t/arm64", "v1")
    rc, _, err = pull(registry, ref, str(tmp_path / "r1"), workdir)
    assert rc == 1
    assert "no image for platform linux/amd64" in err, err
    assert "single-platform image (available: linux/arm64/v8)" in err, err
    assert not os.path.exists(tmp_path / "r1" / "platform")
    rc, _, err = pull(registry, ref, str(tmp_path / "r2"), workdir, "--platform", "linux/arm64")
    assert rc == 0, err
    assert open(tmp_path / "r2" / "platform").read() == "linux/arm64/v8\n"


def test_single_image_without_architecture_is_taken(registry, pull, workdir, tmp_path):
    img = Image([busybox_layer()], config={"Cmd": ["/bin/sh"]},
                mutate_config=lambda c: c.pop("architecture"))
    push(registry, "t/noarch", "v1", img)
    rc, _, err = pull(registry, registry.ref("t/noarch", "v1"), str(tmp_path / "r"), workdir)
    assert rc == 0, err


@pytest.mark.parametrize("kind", ["index", "single"])
def test_unit_waits_with_the_platforms_the_image_has(tmp_path, registry, kind):
    """The pod's image has no variant for this cell: the unit waits with
    ErrImagePull naming the platforms there are, never starts (no exec
    format error), and the agent keeps serving."""
    push(registry, "t/elsewhere", "v1",
         Index(ARM_ONLY) if kind == "index" else platform_image("linux", "arm64", "v8"))
    ref = registry.ref("t/elsewhere", "v1")
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    env={**FAST, "CELL_AGENT_BACKOFF_UNIT_MS": "3000"})
    c = a.client()
    try:
        c.update_pod(pod_params("ns_pod", units=[sh(ref, "one", "true")]))
        st = wait_state(c, "one", "waiting", timeout=30,
                        pred=lambda u: "ErrImagePull" in (u["state"]["waiting"].get("reason")
                                                           or ""))
        reason = units_by_name(st)["one"]["state"]["waiting"]["reason"]
        assert "no image for platform linux/amd64" in reason, reason
        assert "linux/arm64/v8" in reason, reason
        assert "exec format" not in reason
        assert units_by_name(st)["one"]["restartCount"] == 0
        assert c.ping() == "pong" and a.alive()
    finally:
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        assert a.stop() == 0, a.log()[-3000:]


POD = """apiVersion: v1
kind: Pod
metadata: {name: plat, namespace: default}
spec:
  containers:
  - name: app
    image: %s
    resources:
      requests: {cpu: "1", memory: 1Gi}
"""


def convert(tmp_path, registry, image: str, *extra: str, annotations: str = "",
            check=0):
    pod = tmp_path / "pod.yaml"
    text = POD % image
    if annotations:
        text = text.replace("namespace: default}", f"namespace: default, {annotations}}}")
    pod.write_text(text)
    return cellctl("convert", str(pod), "--image-arch", "registry", "--insecure-registry",
                   registry.host, *extra, check=check)


def test_cellctl_platforms_asks_the_registry(registry):
    push(registry, "t/multi", "v1", Index(MULTI + [platform_image("linux", "arm", "v7")]))
    push(registry, "t/one", "v1", platform_image("linux", "arm64", "v8", fmt="docker"))
    r = cellctl("platforms", registry.ref("t/multi", "v1"), "--insecure-registry", registry.host)
    assert r.stdout == ("linux/amd64, linux/arm64/v8, linux/arm/v7\n"
                        "architectures: amd64, arm64\n"), r.stdout
    r = cellctl("platforms", registry.ref("t/one", "v1"), "--insecure-registry", registry.host)
    assert r.stdout == "linux/arm64/v8\narchitectures: arm64\n", r.stdout
    r = cellctl("platforms", registry.ref("t/absent", "v1"), "--insecure-registry",
                registry.host, check=1)
    assert "HTTP 404" in r.stderr, r.stderr


def test_cellctl_selection_follows_the_images(tmp_path, registry):
    """1 CPU, 1 GiB: the cheapest type of the architectures the image has
    (c6g.medium when arm64 is allowed, t3a.small otherwise), an exact arm64
    type refused for an amd64-only image, and the reverse."""
    push(registry, "t/multi", "v1", Index(MULTI))
    push(registry, "t/amd", "v1", Index([platform_image("linux", "amd64")]))
    push(registry, "t/amdsingle", "v1", platform_image("linux", "amd64", fmt="docker"))
    push(registry, "t/arm", "v1", Index(ARM_ONLY))

    def chosen(name, *extra):
        out = json.loads(convert(tmp_path, registry, registry.ref(name, "v1"), *extra).stdout)
        return out["spec"]["instanceType"]
    assert chosen("t/multi") == "c6g.medium"
    assert chosen("t/amd") == "t3a.small"
    assert chosen("t/amdsingle") == "t3a.small"
    assert chosen("t/arm") == "c6g.medium"
    # Without asking (Kip's behaviour): amd64 types only.
    pod = tmp_path / "pod.yaml"
    out = json.loads(cellctl("convert", str(pod)).stdout)
    assert out["spec"]["instanceType"] == "t3a.small"
    # An exact type of the wrong architecture is refused, either way round.
    for name, typ, want in (("t/amd", "m6g.large", "m6g.large is arm64, but the pod's images "
                                                   "are for amd64 only"),
                            ("t/arm", "m5.large", "m5.large is amd64, but the pod's images "
                                                  "are for arm64 only")):
        r = convert(tmp_path, registry, registry.ref(name, "v1"), annotations=(
            f"annotations: {{pod.elotl.co/instance-type: {typ}}}"), check=1)
        assert want in r.stderr, r.stderr
    r = convert(tmp_path, registry, registry.ref("t/multi", "v1"), annotations=(
        "annotations: {pod.elotl.co/instance-type: m6g.large}"))
    assert json.loads(r.stdout)["spec"]["instanceType"] == "m6g.large"
    # Given instead of asked.
    pod.write_text(POD % registry.ref("t/amd", "v1"))
    out = json.loads(cellctl("convert", str(pod), "--image-arch", "arm64").stdout)
    assert out["spec"]["instanceType"] == "c6g.medium"
