# SPDX-License-Identifier: Apache-2.0
"""Units get devices through the Container Device Interface (issue 20).

CDI specs of the test's own stand for a GPU: device nodes made with mknod
under new names with /dev/null's, /dev/zero's and /dev/full's numbers, a file
standing for a driver library, environment, and a createContainer hook that
writes the OCI state it reads to a marker file. A real agent runs real units
(busybox from a real registry) with --cdi-spec-dirs pointing at them.
"""
from __future__ import annotations

import json
import os
import stat
import time

import pytest

from images import Image, busybox_layer, push
from wire import WireError, pod_params, unit
from test_agent_api import start_agent
from test_agent_pod import (FAST, state_of, unmount_below, units_by_name,
                            wait_state, wait_units_gone)

# Inside the unit: each node's type and numbers (stat's hex major/minor),
# whether it opens, then the library, the env and the startContainer
# hook's state; "/tmp/mem" (c 1 1, /dev/mem's numbers) must not open: the
# device cgroup allows exactly the default list and the CDI nodes.
PROBE = r"""
for d in /dev/fakegpu0 /dev/fakegpu1 /dev/fakectl /dev/fakefpga; do
  if [ -e $d ]; then
    echo "node $d $(stat -c '%F %t %T' $d)"
    if head -c 1 $d >/dev/null 2>&1 || echo x 2>/dev/null >$d; then
      echo "open $d ok"
    else
      echo "open $d denied"
    fi
  else
    echo "node $d absent"
  fi
done
mknod /tmp/mem c 1 1 && (head -c 1 /tmp/mem >/dev/null 2>&1 && echo "mem open" || echo "mem denied")
echo "lib $(cat /usr/lib/libfake.so 2>/dev/null || echo absent)"
(echo y >> /usr/lib/libfake.so) 2>/dev/null && echo "lib writable" || echo "lib readonly"
echo "env FAKE_DRIVER=${FAKE_DRIVER:-unset} KEEP=${KEEP:-unset}"
echo "start-hook $(cat /tmp/start-state.json 2>/dev/null || echo none)"
echo done
exec sleep 1000
"""


@pytest.fixture
def image(registry) -> str:
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/bb", "v1")


class Host:
    """The stand-in GPU's host side: nodes, a library, a hook, spec dir."""

    def __init__(self, d: str):
        self.d = d
        self.dev = os.path.join(d, "hostdev")
        self.cdi = os.path.join(d, "cdi")
        self.marker = os.path.join(d, "create-hook.log")
        self.lib = os.path.join(d, "libfake.so")
        os.makedirs(self.dev)
        os.makedirs(self.cdi)
        for name, minor in (("fakegpu0", 3), ("fakegpu1", 5), ("fakectl", 7),
                            ("fakefpga", 3)):
            os.mknod(os.path.join(self.dev, name), 0o666 | stat.S_IFCHR,
                     os.makedev(1, minor))
        with open(self.lib, "w") as f:
            f.write("FAKE-DRIVER")
        self.hook = os.path.join(d, "hook.sh")
        with open(self.hook, "w") as f:
            f.write("#!/bin/sh\n{ cat; echo; } >> \"$MARKER\"\n")
        os.chmod(self.hook, 0o755)

    def node(self, name: str) -> dict:
        return {"path": "/dev/" + name, "hostPath": os.path.join(self.dev, name)}

    def gpu_spec(self) -> dict:
        return {
            "cdiVersion": "0.6.0", "kind": "nvidia.com/gpu",
            "containerEdits": {
                "env": ["FAKE_DRIVER=1", "KEEP=cdi"],
                "deviceNodes": [self.node("fakectl")],
                "mounts": [{"hostPath": self.lib, "containerPath": "/usr/lib/libfake.so",
                            "options": ["ro", "nosuid", "nodev", "bind"]}],
                "hooks": [
                    {"hookName": "createContainer", "path": self.hook,
                     "env": ["PATH=/usr/bin:/bin", "MARKER=" + self.marker],
                     "timeout": 10},
                    {"hookName": "startContainer", "path": "/bin/sh",
                     "args": ["sh", "-c", "cat > /tmp/start-state.json"]}],
            },
            "devices": [
                {"name": "0", "containerEdits": {"deviceNodes": [self.node("fakegpu0")]}},
                {"name": "1", "containerEdits": {"deviceNodes": [self.node("fakegpu1")]}},
            ],
        }

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.cdi, name), "w") as f:
            f.write(text)

    def write_yaml(self, name: str, spec: dict) -> None:
        # JSON is YAML too, but write real YAML the way nvidia-ctk does.
        self.write(name, to_yaml(spec))

    def hook_states(self) -> list:
        if not os.path.exists(self.marker):
            return []
        with open(self.marker) as f:
            return [json.loads(line) for line in f if line.strip()]


def to_yaml(v, indent: int = 0) -> str:
    pad = " " * indent
    if isinstance(v, dict):
        out = ""
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                out += f"{pad}{k}:\n{to_yaml(x, indent + 2)}"
            else:
                out += f"{pad}{k}: {json.dumps(x)}\n"
        return out
    out = ""
    for x in v:
        if isinstance(x, (dict, list)):
            body = to_yaml(x, indent + 2)
            out += f"{pad}- {body.lstrip()}"
        else:
            out += f"{pad}- {json.dumps(x)}\n"
    return out


@pytest.fixture
def host(tmp_path):
    return Host(str(tmp_path / "gpuhost"))


@pytest.fixture
def cell(tmp_path, registry, host):
    """An agent reading the test's CDI directory; at the end its pod is
    emptied and it stops. /dev/nvidiactl is looked for where none is."""
    made = []

    def make(env=None, extra=()):
        a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                        "--cdi-spec-dirs", host.cdi + ":" + host.cdi + "-run", *extra,
                        env={**FAST, "CELL_NVIDIACTL": os.path.join(host.d, "no-nvidiactl"),
                             **(env or {})})
        made.append(a)
        return a, a.client()

    yield make
    try:
        for a in made:
            if a.alive():
                try:
                    a.client().update_pod(pod_params("ns_pod",
                                                     terminationGracePeriodSeconds=0))
                    wait_units_gone(a)
                finally:
                    assert a.stop() == 0, a.log()[-3000:]
    finally:
        for d in {a.dir for a in made}:
            unmount_below(d)


def probe_unit(image, name="gpu", **kw):
    return unit(name, image, command=["/bin/sh", "-c", PROBE],
                env=[{"name": "KEEP", "value": "unit"}], **kw)


def probe_output(c, name="gpu", timeout=30) -> str:
    deadline = time.monotonic() + timeout
    out = b""
    while time.monotonic() < deadline:
        try:
            out = c.logs(name)
        except WireError:  # no run yet
            out = b""
        if b"done\n" in out:
            return out.decode()
        time.sleep(0.2)
    raise AssertionError(f"no probe output: {out!r} status {c.status()}")


def gpu_pod(units, **kw):
    p = pod_params("ns_pod", units=units, **kw)
    p["spec"]["resources"]["gpu"] = "1"
    return p


def test_gpu_pod_gets_every_gpu_device(cell, host, image):
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)]))
    out = probe_output(c)
    # The nodes with their type and numbers (hex), and they open.
    for dev, minor in (("fakegpu0", 3), ("fakegpu1", 5), ("fakectl", 7)):
        assert f"node /dev/{dev} character special file 1 {minor:x}" in out, out
        assert f"open /dev/{dev} ok" in out, out
    assert "node /dev/fakefpga absent" in out, out
    assert "mem denied" in out, out
    assert "lib FAKE-DRIVER" in out and "lib readonly" in out, out
    assert "env FAKE_DRIVER=1 KEEP=unit" in out, out
    # startContainer: inside the container, the state of this run.
    start_state = json.loads(out.split("start-hook ", 1)[1].split("\n", 1)[0])
    assert start_state["status"] == "created" and start_state["pid"] > 0
    # createContainer: once, with valid OCI state naming the container.
    states = host.hook_states()
    assert len(states) == 1, states
    s = states[0]
    assert s["ociVersion"] and s["status"] == "creating" and s["id"] == "gpu-1"
    assert s["pid"] == start_state["pid"] and os.path.exists(f"/proc/{s['pid']}")
    with open(os.path.join(s["bundle"], "config.json")) as f:
        assert json.load(f)["root"]["path"].endswith("/rootfs")
    u = units_by_name(c.status())["gpu"]
    assert u["devices"] == ["nvidia.com/gpu=all"], u
    # An agent killed and started again re-adopts the unit, devices and all.
    a.proc.kill()
    a.proc.wait()
    a2, c2 = cell()
    u = units_by_name(c2.status())["gpu"]
    assert u["devices"] == ["nvidia.com/gpu=all"] and "running" in u["state"], u
    assert len(host.hook_states()) == 1


def test_hook_runs_once_per_start(cell, host, image):
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    a, c = cell()
    c.update_pod(gpu_pod([unit("job", image, command=["/bin/sh", "-c", "sleep 0.2"])]))
    c.wait_status(lambda s: units_by_name(s).get("job", {}).get("restartCount", 0) >= 2,
                  timeout=60)
    ids = [s["id"] for s in host.hook_states()]
    assert len(ids) == len(set(ids)), ids
    assert {"job-1", "job-2", "job-3"} <= set(ids), ids


def test_pod_without_gpu_sees_none(cell, host, image):
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    a, c = cell()
    c.update_pod(pod_params("ns_pod", units=[probe_unit(image)]))
    out = probe_output(c)
    for dev in ("fakegpu0", "fakegpu1", "fakectl", "fakefpga"):
        assert f"node /dev/{dev} absent" in out, out
    assert "lib absent" in out and "env FAKE_DRIVER=unset KEEP=unit" in out, out
    assert "start-hook none" in out and host.hook_states() == []
    assert "devices" not in units_by_name(c.status())["gpu"]


def test_numbered_device_and_annotations(cell, host, image):
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    host.write("fpga.json", json.dumps({
        "cdiVersion": "0.3.0", "kind": "example.com/fpga",
        "devices": [{"name": "a", "containerEdits": {
            "deviceNodes": [dict(host.node("fakefpga"), permissions="rw")]}}]}))
    a, c = cell(extra=("--cdi-annotation-kinds", "nvidia.com/gpu,example.com/fpga"))
    c.update_pod(pod_params("ns_pod", units=[probe_unit(image)], annotations={
        "pod.elotl.co/cdi-gpu": "nvidia.com/gpu=1",
        "cdi.k8s.io/fpga": "example.com/fpga=a"}))
    out = probe_output(c)
    assert "node /dev/fakegpu0 absent" in out, out
    assert "node /dev/fakegpu1 character special file 1 5" in out, out
    assert "node /dev/fakefpga character special file 1 3" in out, out
    assert "open /dev/fakefpga ok" in out and "open /dev/fakegpu1 ok" in out, out
    assert units_by_name(c.status())["gpu"]["devices"] == [
        "nvidia.com/gpu=1", "example.com/fpga=a"]


def fpga_spec(host) -> None:
    host.write("fpga.json", json.dumps({
        "cdiVersion": "0.3.0", "kind": "example.com/fpga",
        "devices": [{"name": "a", "containerEdits": {
            "deviceNodes": [dict(host.node("fakefpga"), permissions="rw")]}}]}))


@pytest.mark.parametrize("key", ["cdi.k8s.io/fpga", "pod.elotl.co/cdi-fpga"])
def test_annotation_of_another_kind_is_refused(cell, host, image, key):
    """Issue 27: a pod's annotation may ask only for the kinds the agent
    allows (--cdi-annotation-kinds, default nvidia.com/gpu): a host spec of
    another kind is not the pod's for the asking. The unit waits with the
    reason and never starts; the GPU pod's own path is not gated."""
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    fpga_spec(host)
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)], annotations={key: "example.com/fpga=a"}))
    r = waiting_reason(c)
    assert r.startswith(f"CDIDeviceRefused: annotation {key} asks for example.com/fpga=a"), r
    assert "--cdi-annotation-kinds" in r, r
    assert "running" not in state_of(c.status(), "gpu")
    # The GPU kind by annotation, and the pod's own GPUs, still start.
    c.update_pod(gpu_pod([probe_unit(image)], annotations={key: "nvidia.com/gpu=1"}))
    out = probe_output(c, timeout=60)
    assert "open /dev/fakegpu0 ok" in out and "node /dev/fakefpga absent" in out, out


def test_annotation_kinds_none_keeps_the_gpu_pod(cell, host, image):
    """--cdi-annotation-kinds "": no annotation gets a device, the Kip GPU
    pod (spec.resources.gpu) still gets nvidia.com/gpu=all."""
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    a, c = cell(extra=("--cdi-annotation-kinds", ""))
    c.update_pod(gpu_pod([probe_unit(image)], terminationGracePeriodSeconds=0))
    assert "open /dev/fakegpu0 ok" in probe_output(c)
    assert units_by_name(c.status())["gpu"]["devices"] == ["nvidia.com/gpu=all"]
    c.update_pod(pod_params("ns_pod", units=[probe_unit(image, name="ann")],
                            annotations={"cdi.k8s.io/g": "nvidia.com/gpu=1"},
                            terminationGracePeriodSeconds=0))
    r = waiting_reason(c, name="ann")
    assert r.startswith("CDIDeviceRefused: annotation cdi.k8s.io/g"), r


def waiting_reason(c, name="gpu", timeout=30) -> str:
    """The unit's waiting reason once it is more than ContainerCreating."""
    def settled(u):
        r = u["state"]["waiting"].get("reason") or ""
        return r and r != "ContainerCreating"
    st = wait_state(c, name, "waiting", timeout=timeout, pred=settled)
    return state_of(st, name)["waiting"]["reason"]


def test_missing_device_waits_then_starts(cell, host, image):
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)]))
    r = waiting_reason(c)
    assert r.startswith("CDIDeviceNotFound: nvidia.com/gpu=all"), r
    assert not state_of(c.status(), "gpu")["waiting"]["startFailure"]
    # The spec arrives (nvidia-ctk ran late): the unit starts with it.
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    assert "open /dev/fakegpu0 ok" in probe_output(c, timeout=60)


def test_malformed_specs_are_reasons(cell, host, image):
    host.write("bad.yaml", "cdiVersion: 9.9.9\nkind: nvidia.com/gpu\ndevices: [{name: '0'}]\n")
    host.write("garbage.json", "{\"cdiVersion\": [")
    host.write("binary.yaml", "\x00\x01\x02")
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)]))
    r = waiting_reason(c)
    assert r.startswith("CDIDeviceNotFound: nvidia.com/gpu=all"), r
    assert "bad.yaml: unsupported cdiVersion \"9.9.9\"" in r, r
    assert a.alive()


def test_spec_naming_a_missing_node(cell, host, image):
    spec = host.gpu_spec()
    spec["devices"][0]["containerEdits"]["deviceNodes"] = [{"path": "/dev/nvidia-nope",
                                                           "hostPath": host.d + "/nope"}]
    host.write_yaml("nvidia.yaml", spec)
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)]))
    r = waiting_reason(c)
    assert r.startswith("CDI device node " + host.d + "/nope: No such file"), r


def test_two_specs_defining_a_device(cell, host, image):
    host.write_yaml("a.yaml", host.gpu_spec())
    host.write("b.json", json.dumps(host.gpu_spec()))
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)]))
    r = waiting_reason(c)
    assert r.startswith("CDIDeviceConflict: nvidia.com/gpu=0 is defined by both"), r


def test_failing_hook_fails_the_start(cell, host, image):
    bad = os.path.join(host.d, "bad-hook.sh")
    with open(bad, "w") as f:
        f.write("#!/bin/sh\necho 'driver says no' >&2\nexit 3\n")
    os.chmod(bad, 0o755)
    spec = host.gpu_spec()
    spec["containerEdits"]["hooks"] = [{"hookName": "createContainer", "path": bad}]
    host.write_yaml("nvidia.yaml", spec)
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)], restart_policy="Never"))
    r = waiting_reason(c)
    assert "createContainer hook " + bad in r and "driver says no" in r, r


GPU_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: x
  annotations:
    cdi.k8s.io/fpga: example.com/fpga=a
spec:
  restartPolicy: Always
  containers:
  - name: gpu
    image: IMAGE
    command: ["/bin/sh", "-c", "ls /dev/fake*; exec sleep 1000"]
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def test_cellctl_run_gpu_manifest_and_status_wide(registry, host, image, tmp_path):
    from test_cellctl import start_cell, wait_for
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    host.write("fpga.json", json.dumps({
        "cdiVersion": "0.3.0", "kind": "example.com/fpga",
        "devices": [{"name": "a", "containerEdits": {"deviceNodes": [host.node("fakefpga")]}}]}))
    m = tmp_path / "gpu.yaml"
    m.write_text(GPU_MANIFEST.replace("IMAGE", image))
    cell = start_cell(str(tmp_path / "cell"), registry, extra=["--cdi-spec-dirs", host.cdi,
                                                                 "--cdi-annotation-kinds",
                                                                 "nvidia.com/gpu,example.com/fpga"])
    try:
        conv = json.loads(cell.ctl("convert", str(m)).stdout)
        assert conv["spec"]["resources"]["gpu"] == "1"
        assert conv["Annotations"] == {"cdi.k8s.io/fpga": "example.com/fpga=a"}
        cell.ctl("run", str(m), "--timeout", "60")
        out = wait_for(lambda: (lambda o: o if "/dev/fakegpu1" in o else None)(
            cell.ctl("logs").stdout))
        assert "/dev/fakefpga" in out and "/dev/fakectl" in out, out
        wide = cell.ctl("status", "-o", "wide").stdout
        assert "devices=nvidia.com/gpu=all,example.com/fpga=a" in wide, wide
    finally:
        cell.ctl("delete", "--pod", "default_x", "--grace", "0", check=None)
        units = os.path.join(cell.dir, "state", "units")
        deadline = time.monotonic() + 20
        while os.path.isdir(units) and os.listdir(units) and time.monotonic() < deadline:
            time.sleep(0.1)
        cell.stop()
        unmount_below(cell.dir)


def test_nvidia_ctk_writes_the_spec_once(cell, host, image):
    """/dev/nvidiactl exists, no spec names nvidia.com/gpu: the agent runs
    nvidia-ctk cdi generate --output=<run dir>/nvidia.yaml once."""
    ctl = os.path.join(host.dev, "fakectl")
    calls = os.path.join(host.d, "ctk-calls")
    ctk = os.path.join(host.d, "nvidia-ctk")
    spec = os.path.join(host.d, "spec.yaml")
    with open(spec, "w") as f:
        f.write(to_yaml(host.gpu_spec()))
    with open(ctk, "w") as f:
        f.write(f"""#!/bin/sh
echo "$*" >> {calls}
[ "$1 $2" = "cdi generate" ] || exit 2
out=${{3#--output=}}
cp {spec} "$out"
""")
    os.chmod(ctk, 0o755)
    out = host.cdi + "-run/nvidia.yaml"
    a, c = cell(env={"CELL_NVIDIACTL": ctl, "CELL_NVIDIA_CTK": ctk,
                     "CELL_CDI_GENERATE_OUTPUT": out})
    c.update_pod(gpu_pod([probe_unit(image), probe_unit(image, name="two")]))
    assert "open /dev/fakegpu0 ok" in probe_output(c)
    assert "open /dev/fakegpu1 ok" in probe_output(c, name="two")
    with open(calls) as f:
        assert f.read() == f"cdi generate --output={out}\n"
    assert "ran " + ctk + " cdi generate" in a.log()


def test_no_nvidia_ctk_is_the_reason(cell, host, image):
    a, c = cell(env={"CELL_NVIDIACTL": os.path.join(host.dev, "fakectl"),
                     "CELL_NVIDIA_CTK": os.path.join(host.d, "no-such-nvidia-ctk")})
    c.update_pod(gpu_pod([probe_unit(image)]))
    r = waiting_reason(c)
    assert r.startswith("CDIDeviceNotFound: nvidia.com/gpu=all"), r
    assert "nvidia-ctk is not installed" in r, r
    assert "nvidia-ctk is not installed" in a.log()


def test_hook_that_hangs_is_killed_at_its_timeout(cell, host, image):
    slow = os.path.join(host.d, "slow-hook.sh")
    with open(slow, "w") as f:
        f.write("#!/bin/sh\necho 'waiting for the driver' >&2\nexec sleep 60\n")
    os.chmod(slow, 0o755)
    spec = host.gpu_spec()
    spec["containerEdits"]["hooks"] = [{"hookName": "createContainer", "path": slow,
                                        "timeout": 1}]
    host.write_yaml("nvidia.yaml", spec)
    a, c = cell()
    c.update_pod(gpu_pod([probe_unit(image)], restart_policy="Never"))
    r = waiting_reason(c)
    assert "createContainer hook " + slow + ": timed out after 1 s" in r, r
    assert "waiting for the driver" in r, r


def test_cdi_spec_dirs_as_an_itzo_flag(tmp_path, registry, host, image):
    """cell_config.yaml's itzoFlag-cdi-spec-dirs sets --cdi-spec-dirs."""
    host.write_yaml("nvidia.yaml", host.gpu_spec())
    a = start_agent(str(tmp_path / "agent"), "--insecure-registry", registry.host,
                    boot_config=f"itzoFlag-cdi-spec-dirs: {host.cdi}\n",
                    env={**FAST, "CELL_NVIDIACTL": os.path.join(host.d, "no-nvidiactl")})
    try:
        c = a.client()
        c.update_pod(gpu_pod([probe_unit(image)]))
        assert "open /dev/fakegpu0 ok" in probe_output(c)
        c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0))
        wait_units_gone(a)
    finally:
        assert a.stop() == 0, a.log()[-3000:]
        unmount_below(a.dir)
