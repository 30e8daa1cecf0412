# SPDX-License-Identifier: Apache-2.0
"""Known escapes through a volume that a pod's units share (issue 27), each
a real attack on the real agent and monitor: a racing unit
(tests/integration/escape_racer.c, a static program in its image) changes
the shared volume while its siblings start, again and again. Each test
says how many tries it makes and fails at the first escape.

The agent and the monitor never use a name a unit can change after it was
checked: a subPath is resolved by the monitor beneath the volume, by
descriptor, at the mount, and what is mounted is checked to be what was
opened; fsGroup is applied when a volume is set up, by descriptor
(docs/agent-runtime.md "Security")."""
from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest

from images import File, Image, Layer, busybox_layer, push
from wire import pod_params
from test_agent_pod import cell, sh, wait_state  # noqa: F401

RACER_SRC = os.path.join(os.path.dirname(__file__), "escape_racer.c")
ROUNDS = 12       # spec changes, each restarting every victim unit
VICTIMS = 3


@pytest.fixture(scope="module")
def racer_bin(tmp_path_factory) -> bytes:
    out = str(tmp_path_factory.mktemp("racer") / "racer")
    subprocess.run(["gcc", "-static", "-O1", "-o", out, RACER_SRC], check=True,
                   timeout=120)
    with open(out, "rb") as f:
        return f.read()


@pytest.fixture
def racer_image(registry, racer_bin) -> str:
    push(registry, "t/racer", "v1",
         Image([busybox_layer(), Layer([File("racer", racer_bin, mode=0o755)])],
               config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/racer", "v1")


def shared(**kw) -> dict:
    return {"name": "shared", "mountPath": "/shared", **kw}


def race(c, image: str, racer: dict, victim_script: str, victim_mounts, rounds: int,
         **spec) -> int:
    """The racer runs; every round a new spec restarts each victim. The
    number of victim starts asked for."""
    tries = 0
    for r in range(rounds):
        victims = [sh(image, f"v{i}", victim_script, volumeMounts=victim_mounts,
                      env=[{"name": "ROUND", "value": str(r)}])
                   for i in range(VICTIMS)]
        c.update_pod(pod_params("ns_pod", units=[racer, *victims],
                                terminationGracePeriodSeconds=0, **spec))
        if r == 0:
            wait_state(c, "racer", "running", timeout=60)
        tries += VICTIMS
        time.sleep(1.0)
    # The racer stops, so that the volume holds still for the count.
    c.update_pod(pod_params("ns_pod", terminationGracePeriodSeconds=0, **spec))
    c.wait_status(lambda s: not s["unitStatus"], timeout=30)
    return tries


def started_victims(volume_dir: str) -> int:
    """How many victim starts wrote their mark inside the volume (wherever
    the racer's swaps left the directory)."""
    n = 0
    for _root, _dirs, files in os.walk(volume_dir):
        n += sum(f.startswith("mark-") for f in files)
    return n


def test_cve_2017_1002101_subpath_symlink_exchange(cell, racer_image, tmp_path):
    """CVE-2017-1002101 / CVE-2021-25741: a sibling swaps the subPath's
    directory with a link to a host directory while the victims start. The
    victims must never get the host directory (they write a mark into what
    they got)."""
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    a, c = cell()
    racer = sh(racer_image, "racer", f"exec /racer exchange /shared d {host_dir}",
               volumeMounts=[shared()])
    tries = race(c, racer_image, racer,
                 "touch /mnt/mark-$(hostname)-$ROUND-$$; exec sleep 1000",
                 [shared(mountPath="/mnt", subPath="d")], ROUNDS,
                 volumes=[{"name": "shared", "emptyDir": {}}])
    got = sorted(os.listdir(host_dir))
    assert got == [], f"{len(got)} of {tries} victim starts wrote into the host: {got}"
    vol = os.path.join(a.dir, "state", "volumes", "shared")
    assert started_victims(vol) > 0, "no victim ever started: the race proved nothing"


def test_fsgroup_walk_symlink_race(cell, racer_image, tmp_path):
    """The fsGroup walk (issue 27): a sibling swaps files of the shared
    volume with links to a host file (0600) while the victims start. The
    host file's group and mode never change."""
    host_file = tmp_path / "host-secret"
    host_file.write_text("key\n")
    os.chmod(host_file, 0o600)
    before = os.stat(host_file)
    a, c = cell()
    racer = sh(racer_image, "racer",
               f"mkdir -p /shared/r && exec /racer links /shared/r 200 {host_file}",
               volumeMounts=[shared()])
    tries = race(c, racer_image, racer,
                 "touch /shared/mark-$(hostname)-$ROUND-$$; exec sleep 1000",
                 [shared()], ROUNDS + 8,
                 volumes=[{"name": "shared", "emptyDir": {}}],
                 securityContext={"namespaceOptions": None, "supplementalGroups": [],
                                  "sysctls": [], "fsGroup": 2000})
    after = os.stat(host_file)
    assert (stat.S_IMODE(after.st_mode), after.st_gid) == \
        (stat.S_IMODE(before.st_mode), before.st_gid), \
        f"after {tries} victim starts the host file is {oct(after.st_mode)} gid {after.st_gid}"
    vol = os.path.join(a.dir, "state", "volumes", "shared")
    assert started_victims(vol) > 0, "no victim ever started: the race proved nothing"
    st = os.stat(vol)
    assert st.st_gid == 2000 and st.st_mode & stat.S_ISGID, "the volume got no fsGroup"


def test_cve_2021_30465_mount_target_in_shared_volume(cell, racer_image, tmp_path):
    """CVE-2021-30465: a victim's mount target lies inside a shared volume,
    and a sibling swaps a directory on the way to it with a link to a host
    directory. The mount must land inside the victim's root, on the target
    it names, or the start fails; never on the host's directory."""
    host_dir = tmp_path / "host-root"
    host_dir.mkdir()
    a, c = cell()
    racer = sh(racer_image, "racer", f"exec /racer exchange /shared x {host_dir}",
               volumeMounts=[shared()])
    script = "touch /shared/mark-$(hostname)-$ROUND-$$; exec sleep 1000"
    tries = race(c, racer_image, racer, script,
                 [shared(), {"name": "other", "mountPath": "/shared/x/target"}],
                 ROUNDS, volumes=[{"name": "shared", "emptyDir": {}},
                                  {"name": "other", "emptyDir": {}}])
    got = sorted(os.listdir(host_dir))
    assert got == [], f"{len(got)} of {tries} victim starts reached the host: {got}"
    vol = os.path.join(a.dir, "state", "volumes", "shared")
    assert started_victims(vol) > 0, "no victim ever started: the race proved nothing"
