# SPDX-License-Identifier: Apache-2.0
"""Boot the cell images under qemu and drive them from the host with cellctl,
as the controller would (`make image-boot-test`): the lean image
(image-build/lean.sh), the Debian cell image and the stock-Debian-with-
cloud-init "custom" image (image-build/debian.sh). KVM when /dev/kvm works
(a bounded probe boots the kernel and waits for its first line: a /dev/kvm
that hangs a guest, as on the build machine, means TCG), else TCG;
CELL_IMAGE_ACCEL=kvm|tcg skips the probe.

For each image it prints machine-readable lines (qemu's start is t=0):
  TIME pong <image> <seconds>      `cellctl ping` answered
  TIME nfs-mounted <image> <seconds>  the shared image cache mounted
  TIME running <image> <seconds>   the dispatched pod Running
  SIZE <image> root=<MiB> qcow2=<MiB>
and at the end the ratios to the custom image.

The chain proven, for the lean and the cell image: `cellctl userdata` (the boot files as
write_files) in a NoCloud seed made by cloud-localds -> cell-cloudinit at
first boot -> cell-agent -> `cellctl ping` answered through qemu's
forwarded port -> `cellctl run` dispatches a pod whose image comes from a
registry on the host (10.0.2.2 from the guest) -> it runs, logs, and has
the pod IP on qemu's user network, set up by cell-net inside the guest
(seen from the pod's side with `cellctl exec`, in the status' podIP, and
by fetching a file from the host from inside the pod). The pod's image
is in the shared image cache: populated on the host, exported by
nfs-ganesha (ganesha.py), mounted by the agent through the imageCache*
keys of the seed's cell_config.yaml, the pod run from it with no blob
fetched from the registry.

Then the same for the "custom image": stock Debian with Debian's cloud-init,
user data = `cellctl userdata --cloud-init` of
image-build/init/custom-image.cloud-config, which installs the release
tarball (served from the host) and starts the agent. The two times to pong
are printed side by side with their ratio (target <= 0.5x).

Timings are printed, never asserted (only a loose upper bound, so that a
hung boot fails instead of waiting forever). CELL_IMAGE_OUT names the
image dir, CELL_IMAGE_BOOT_LIMIT the bound (seconds).
"""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from conftest import CELL_BUILD, ROOT
from ganesha import PSEUDO, Ganesha
from images import Image, Index, busybox_layer, push
from registry import free_port

IMAGE_OUT = os.environ.get("CELL_IMAGE_OUT", "/var/cache/cell-image/out")
BOOT_LIMIT = float(os.environ.get("CELL_IMAGE_BOOT_LIMIT", "900"))
CELLCTL = os.path.join(CELL_BUILD, "bin", "cellctl")
GUEST_HOST = "10.0.2.2"  # the host's loopback, from a qemu user-net guest
POD_IP = "10.0.2.50"     # a free address on qemu's user network (10.0.2.0/24)
TIMES: dict = {}         # image -> (pong, running), for the side-by-side
_ACCEL: list = []        # the probe's answer, once per session


def kvm_works() -> bool:
    """Boot a kernel under KVM, with the Guest's flags, for at most 15 s
    and wait for its first console line: /dev/kvm being there proves
    nothing (on the build machine qemu aborts with -cpu host on an MSR it
    cannot set, and without it the guest prints nothing)."""
    kernels = sorted(f for f in os.listdir(IMAGE_OUT)
                     if f.endswith(".vmlinuz") and "-arm64" not in f) \
        if os.path.isdir(IMAGE_OUT) else []
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    if not kernels:
        return False
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "console")
        p = subprocess.Popen(
            ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256",
             "-smp", "1", "-display", "none", "-monitor", "none", "-no-reboot",
             "-serial", f"file:{log}", "-kernel", os.path.join(IMAGE_OUT, kernels[0]),
             "-append", "console=ttyS0 panic=-1 root=/dev/null"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and p.poll() is None:
                try:
                    with open(log, errors="replace") as f:
                        if "Linux version" in f.read():
                            return True
                except OSError:
                    pass
                time.sleep(0.2)
            return False
        finally:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)


def accel() -> str:
    if not _ACCEL:
        want = os.environ.get("CELL_IMAGE_ACCEL", "")
        _ACCEL.append(want if want in ("kvm", "tcg") else
                      ("kvm" if kvm_works() else "tcg"))
        print(f"\nqemu accelerator: {_ACCEL[0]}"
              f"{' (CELL_IMAGE_ACCEL)' if want else ''}")
    return _ACCEL[0]


def image(name: str) -> str:
    path = os.path.join(IMAGE_OUT, name + ".qcow2")
    if not os.path.isfile(path):
        pytest.fail(f"{path} missing: run make image", pytrace=False)
    return path


def cellctl(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([CELLCTL, *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"cellctl {args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def user_data(d: str, registry_host: str, cloud_init: str = "",
              cell_config: str = "") -> tuple:
    """The controller's user data from `cellctl userdata`; returns (path of
    the user data, the PKI dir cellctl talks with). cell_config: more
    lines of cell_config.yaml."""
    pki = os.path.join(d, "pki")
    cellctl("pki", "init", pki)
    cellctl("pki", "cell", pki)
    cc = os.path.join(d, "cell_config.yaml")
    with open(cc, "w") as f:
        f.write(f'itzoFlag-port: "6421"\nitzoFlag-insecure-registry: "{registry_host}"\n')
        f.write(cell_config)
    ud = os.path.join(d, "user-data")
    args = ["userdata", "--pki", pki, "--cell-config", cc, "--out", ud]
    if cloud_init:
        args += ["--cloud-init", cloud_init]
    cellctl(*args)
    return ud, pki


def seed(d: str, ud: str) -> str:
    md, out = os.path.join(d, "meta-data"), os.path.join(d, "seed.img")
    with open(md, "w") as f:
        f.write(f"instance-id: iid-cell-image-{uuid.uuid4().hex[:12]}\nlocal-hostname: cell\n")
    subprocess.run(["cloud-localds", out, ud, md], check=True)
    return out


# The arm64 image: qemu's virt machine (PL011 console, virtio on PCI), a
# Cortex-A57 (ARMv8.0, the baseline the binaries are built for; cheaper
# to emulate than -cpu max), EDK2's UEFI firmware (qemu-efi-aarch64) booting
# the disk's systemd-boot as a Graviton's firmware would. Always TCG here.
AARCH64_FIRMWARE = "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd"


class Guest:
    """One qemu (KVM or TCG, one CPU) booting a copy-on-write overlay of the image,
    its serial console in a file, the agent's port forwarded to loopback."""

    def __init__(self, d: str, disk: str, seed_img: str, pki: str, arch: str = "amd64",
                 disk_mib: int = 0):
        self.port = free_port()
        self.pki = pki
        self.console = os.path.join(d, "console.log")
        overlay = os.path.join(d, "disk-image.qcow2")
        # disk_mib: a disk larger than the image, as Kip launches cells
        # (its 5Gi default volume under our 1 GiB root): the overlay's
        # virtual size, grown at no cost (qcow2 allocates on write).
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", disk, "-F", "qcow2",
                        overlay, *([f"{disk_mib}M"] if disk_mib else [])], check=True)
        if arch == "arm64":
            if not os.path.isfile(AARCH64_FIRMWARE):
                pytest.fail(f"{AARCH64_FIRMWARE} missing: run scripts/deps.sh", pytrace=False)
            machine = ["qemu-system-aarch64", "-M", "virt", "-accel", "tcg",
                       "-cpu", "cortex-a57", "-bios", AARCH64_FIRMWARE]
        else:
            a = accel()
            machine = ["qemu-system-x86_64", "-accel", a,
                       *(["-cpu", "host"] if a == "kvm" else [])]
        args = [*machine, "-name", f"cell-image-{os.getpid()}",
                "-m", "1024", "-smp", "1",
                "-display", "none", "-monitor", "none", "-no-reboot",
                "-serial", f"file:{self.console}",
                "-drive", f"file={overlay},if=none,id=d0,format=qcow2",
                "-device", "virtio-blk-pci,drive=d0",
                "-drive", f"file={seed_img},if=none,id=d1,format=raw,readonly=on",
                "-device", "virtio-blk-pci,drive=d1",
                "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:6421",
                "-device", "virtio-net-pci,netdev=n0"]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=open(os.path.join(d, "qemu.log"), "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def cell(self) -> list:
        return ["--cell", f"127.0.0.1:{self.port}", "--pki", self.pki]

    def since(self) -> float:
        return time.monotonic() - self.t0

    def log(self, n: int = 6000) -> str:
        try:
            with open(self.console, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def wait_pong(self) -> float:
        r = None
        while self.since() < BOOT_LIMIT:
            assert self.proc.poll() is None, f"qemu exited:\n{self.log()}"
            r = cellctl("ping", *self.cell, timeout=30, check=False)
            if r.returncode == 0 and r.stdout.strip() == "pong":
                return self.since()
            time.sleep(0.5)
        pytest.fail(f"no pong in {BOOT_LIMIT:.0f}s ({r.stderr if r else ''}):\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def guests():
    made = []
    yield made
    for g in made:
        g.stop()


class Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


@pytest.fixture
def host_files(tmp_path):
    """A plain HTTP server on the host's loopback for the guest (10.0.2.2
    from inside): the release tarball."""
    d = tmp_path / "www"
    d.mkdir()
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **kw: Files(*a, directory=str(d), **kw))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield d, srv.server_address[1]
    srv.shutdown()
    srv.server_close()


POD = """apiVersion: v1
kind: Pod
metadata:
  name: web-image
spec:
  restartPolicy: Always
  containers:
  - name: web
    image: {image}
    command: ["/bin/sh", "-c", "echo hello from the cell; exec sleep 100000"]
    volumeMounts:
    - name: trigger
      mountPath: /trigger
  volumes:
  - name: trigger
    hostPath:
      path: /run/cell-test
      type: DirectoryOrCreate
"""

# The lean image's agent is respawned by busybox init; to see that from
# the host, the user data starts a watcher in the guest (cell-cloudinit's
# runcmd) that SIGKILLs the agent once the pod touches a file in a
# hostPath volume (`cellctl exec` is the only way in).
KILL_AGENT = """#cloud-config
runcmd:
- [sh, -c, "mkdir -p /run/cell-test && setsid sh -c 'while [ ! -e /run/cell-test/kill-agent ]; do sleep 0.2; done; kill -9 $(pidof cell-agent)' </dev/null >/dev/null 2>&1 &"]
"""


# The shared image cache over real NFS (docs/boot.md "Shared image cache"):
# the pod's image populated on the host by `cell-pull --populate`, served
# read-only by nfs-ganesha (ganesha.py) on the host's loopback, which the
# guest reaches at 10.0.2.2 (qemu's user network), NFSv4.1 on one TCP port.
# The cell mounts it through the imageCache* keys of its cell_config.yaml
# with the guest kernel's NFS client: busybox's mount on the lean image
# (mount(2) with the options as text: addr= names the server), mount.nfs
# (nfs-common) on the Debian one. A watcher started by the user data says
# on the console when /nfs is mounted, so that the pod is dispatched after
# it (a pod dispatched before simply pulls from the registry).
NFS_WATCH = """- |
  setsid sh -c 'for i in $(seq 900); do grep -q " /nfs nfs" /proc/mounts && break; sleep 0.2; done; if grep -q " /nfs nfs" /proc/mounts; then echo "cell-test: image cache $(grep " /nfs nfs" /proc/mounts)"; else echo "cell-test: image cache not mounted: $(grep "image cache" /var/log/cell-agent.log | tail -n 3)"; fi >/dev/console' </dev/null >/dev/null 2>&1 &
"""


@pytest.fixture
def nfs_share(tmp_path, registry):
    """share(ref…) populates a directory with the refs (from the test's
    registry), serves it with nfs-ganesha and returns the cell_config.yaml
    lines that make the cell mount it."""
    made = []

    def share(*refs: str) -> str:
        pop = tmp_path / "share"
        args = [os.path.join(CELL_BUILD, "bin", "cell-pull"), "--populate", str(pop),
                "--insecure-registry", registry.host]
        for r in refs:
            args += ["--image", r]
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"populate: {r.stdout}\n{r.stderr}"
        d = tmp_path / "ganesha"
        d.mkdir()
        try:
            made.append(Ganesha(str(d), str(pop)))
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        port = made[-1].port
        return (f'imageCacheEndpoint: "{GUEST_HOST}:{PSEUDO}"\n'
                f'imageCacheMountOpts: "-o vers=4.1,port={port},addr={GUEST_HOST}"\n')
    yield share
    for g in made:
        g.close()


def wait_share(g: Guest) -> float:
    """The watcher's console line; the time from qemu's start."""
    while g.since() < BOOT_LIMIT:
        assert g.proc.poll() is None, f"qemu exited:\n{g.log()}"
        for line in g.log(40000).splitlines():
            if line.startswith("cell-test: image cache"):
                assert "not mounted" not in line, f"{line}\n{g.log()}"
                print(f"  {line.strip()}")
                return g.since()
        time.sleep(0.5)
    pytest.fail(f"no image cache line in {BOOT_LIMIT:.0f}s:\n{g.log()}")


def run_pod(g: Guest, tmp: str, reg: str) -> float:
    """`cellctl run` a busybox pod on the guest, check its logs and its
    network from the inside; returns the time from qemu start to running."""
    pod = os.path.join(tmp, "pod.yaml")
    with open(pod, "w") as f:
        f.write(POD.format(image=f"{reg}/t/bb:v1"))
    r = cellctl("run", pod, *g.cell, "--pod-ip", POD_IP, "--timeout", str(int(BOOT_LIMIT)),
                timeout=BOOT_LIMIT + 30, check=False)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{g.log()}"
    assert "Running" in r.stdout, r.stdout
    t_run = g.since()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        logs = cellctl("logs", "web", *g.cell, check=False).stdout
        if logs == "hello from the cell\n":
            break
        time.sleep(1)
    assert logs == "hello from the cell\n"
    # The pod IP, as cell-net set it up inside the guest: on the pod's
    # eth0 and its default route through the host end (seen from inside
    # the pod), and in the status.
    addr = cellctl("exec", *g.cell, "--", "/bin/busybox", "ip", "-4", "addr", "show",
                   "dev", "eth0").stdout
    assert f"inet {POD_IP}/32" in addr, addr
    st = json.loads(cellctl("status", *g.cell, "-o", "json").stdout)
    assert st.get("podIP") == POD_IP, st
    routes = cellctl("exec", *g.cell, "--", "/bin/busybox", "ip", "-4", "route").stdout
    assert "default via 169.254.1.1 dev eth0" in routes, routes
    return t_run


def boot_and_run(name: str, tmp_path, registry, guests, cloud_init: str = "",
                 share=None, arch: str = "amd64", label: str = "",
                 disk_mib: int = 0) -> Guest:
    """share: nfs_share's function; the pod's image then runs from the
    NFS share, not one blob fetched from the registry. arch arm64: the pod's
    image is a multi-arch index (amd64 and arm64 busybox), of which the
    cell takes its own. label: the name in the TIME and SIZE lines."""
    label = label or name
    if arch == "arm64":
        bb = os.path.join(IMAGE_OUT, name + ".busybox")  # lean.sh's, the image's own
        if not os.path.isfile(bb):
            pytest.fail(f"{bb} missing: run make image IMAGE=lean-arm64", pytrace=False)
        push(registry, "t/bb", "v1", Index([
            Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}, fmt="oci"),
            Image([busybox_layer(busybox=bb)], config={"Cmd": ["/bin/sh"]}, fmt="oci",
                  arch="arm64", variant="v8")]))
    else:
        push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    reg = f"{GUEST_HOST}:{registry.port}"
    cc = share(registry.ref("t/bb", "v1")) if share else ""
    ud, pki = user_data(str(tmp_path), reg, cloud_init, cc)
    g = Guest(str(tmp_path), image(name), seed(str(tmp_path), ud), pki, arch, disk_mib)
    guests.append(g)
    t_pong = g.wait_pong()
    print(f"\nTIME pong {label} {t_pong:.1f}")
    if share:
        print(f"TIME nfs-mounted {label} {wait_share(g):.1f}")
        mark = registry.mark()
    t_run = run_pod(g, str(tmp_path), reg)
    print(f"TIME running {label} {t_run:.1f}")
    if share:
        got = registry.blob_gets(since=mark)
        assert got == [], f"blobs fetched, not used from the NFS share: {got}"
        # Owners as on the share's disk (ganesha sends bare numbers; a
        # name the guest cannot map would read as nobody, 65534).
        own = cellctl("exec", *g.cell, "--", "/bin/busybox", "stat", "-c", "%u:%g",
                      "/bin/busybox").stdout.strip()
        assert own == "0:0", own
        print(f"{name}: the pod's layers from the NFS share (no blob fetched)")
    print(f"SIZE {label} {sizes(name)}")
    # The lean image's rc.boot stamps each step with the guest's uptime.
    for line in g.log(20000).splitlines():
        if line.startswith("cell-boot: ["):
            print(f"  {label} guest {line}")
    TIMES[name] = (t_pong, t_run)
    with open(os.path.join(IMAGE_OUT, f"{name}.boot-times"), "w") as f:
        f.write(f"pong {t_pong:.1f}\nrunning {t_run:.1f}\n")
    return g


def sizes(name: str) -> str:
    """root=<MiB> (the root file system, as the recipe measured it) and
    qcow2=<MiB> (the compressed disk)."""
    try:
        with open(os.path.join(IMAGE_OUT, name + ".root-mib")) as f:
            root = f.read().strip()
    except OSError:
        root = "?"
    q = os.path.getsize(os.path.join(IMAGE_OUT, name + ".qcow2")) / (1 << 20)
    return f"root={root} qcow2={q:.1f}"


def test_lean_image_boots_and_runs_a_pod(tmp_path, registry, guests, nfs_share):
    """Its image from the shared image cache on NFS. Then the agent is
    killed (SIGKILL, in the guest): init starts it again, and the pod it
    left keeps running, never restarted."""
    ci = tmp_path / "kill-agent.cloud-config"
    ci.write_text(KILL_AGENT + NFS_WATCH)
    g = boot_and_run("cell-lean", tmp_path, registry, guests, str(ci), nfs_share,
                     disk_mib=2048)
    # A 2 GiB disk under the 1 GiB image: rc.boot's cell-boot --grow-root
    # grew the partition and the mounted ext4 (EXT4_IOC_RESIZE_FS: the
    # lean image has no resize2fs), and a pod's rootfs (the overlay's
    # upper on the cell's root) sees the space.
    grown = [x for x in g.log(20000).splitlines() if "root grown from" in x]
    assert grown, f"no 'root grown' line:\n{g.log()}"
    print(f"cell-lean: {grown[0].strip()}")
    df = cellctl("exec", *g.cell, "--", "/bin/busybox", "df", "-m", "/").stdout
    size_mib = int(df.splitlines()[-1].split()[1])
    assert size_mib > 1500, df
    before = json.loads(cellctl("status", *g.cell, "-o", "json").stdout)
    cellctl("exec", *g.cell, "--", "/bin/busybox", "touch", "/trigger/kill-agent")
    deadline = time.monotonic() + 60
    while "cell-agent exited; restarting" not in g.log(20000):
        assert time.monotonic() < deadline, f"the agent was not restarted:\n{g.log()}"
        time.sleep(0.5)
    g.wait_pong()
    after = json.loads(cellctl("status", *g.cell, "-o", "json").stdout)
    u0, u1 = before["unitStatus"][0], after["unitStatus"][0]
    assert u1["restartCount"] == u0["restartCount"] == 0, after
    assert "running" in (u1.get("state") or {}), after
    assert u1["state"]["running"] == u0["state"]["running"], (before, after)
    # One start only: the container's line is in its log once.
    assert cellctl("logs", "web", *g.cell).stdout == "hello from the cell\n"
    print("cell-lean: agent killed and respawned by init; the pod kept running")


def test_lean_arm64_image_boots_and_runs_a_pod(tmp_path, registry, guests):
    """The arm64 lean image (Graviton) under qemu-system-aarch64 (virt,
    UEFI, TCG): the same seed and the same pod as cell-lean, its image a
    multi-arch index of which the cell pulls linux/arm64/v8 (the pod's
    busybox is the arm64 one: an amd64 binary would not run). No NFS share
    and no agent kill: the arch-neutral paths cell-lean proves; this one
    proves the boot path and the binaries on arm64 (a minute of TCG)."""
    g = boot_and_run("cell-lean-arm64", tmp_path, registry, guests, arch="arm64",
                     label="lean-arm64")
    out = cellctl("exec", *g.cell, "--", "/bin/busybox", "uname", "-m").stdout
    assert out.strip() == "aarch64", out
    print("lean-arm64: the pod runs the arm64 busybox of the index (uname -m: aarch64)")
    # The same pod with an amd64-only image: it waits, naming what the
    # image has, rather than failing with "exec format error".
    push(registry, "t/amd", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    pod = tmp_path / "pod-amd64.yaml"
    # Another unit name: the running unit "web" goes, and no old container
    # keeps the pod Running while the new image cannot come.
    pod.write_text(POD.format(image=f"{GUEST_HOST}:{registry.port}/t/amd:v1")
                   .replace("- name: web\n", "- name: web-amd64\n"))
    r = cellctl("run", str(pod), *g.cell, "--pod-ip", POD_IP, "--timeout", "8", check=False)
    assert r.returncode != 0, r.stdout
    want = "no image for platform linux/arm64/v8"
    assert want in r.stdout and "available: linux/amd64" in r.stdout, (r.stdout, r.stderr)
    assert "exec format" not in r.stdout + r.stderr
    print(f"lean-arm64: an amd64-only image waits: "
          f"{next(x for x in r.stdout.splitlines() if want in x)}")


def test_cell_image_boots_and_runs_a_pod(tmp_path, registry, guests, nfs_share):
    """Its image from the shared image cache on NFS, as on the lean image;
    on a 2 GiB disk, grown by cell-cloudinit.service's ExecStartPre
    (cell-boot --grow-root, before the user data and the agent)."""
    ci = tmp_path / "nfs-watch.cloud-config"
    ci.write_text("#cloud-config\nruncmd:\n" + NFS_WATCH)
    g = boot_and_run("cell-debian", tmp_path, registry, guests, str(ci), nfs_share,
                     disk_mib=2048)
    df = cellctl("exec", *g.cell, "--", "/bin/busybox", "df", "-m", "/").stdout
    size_mib = int(df.splitlines()[-1].split()[1])
    assert size_mib > 1500, df
    print(f"cell-debian: the pod's / has {size_mib} MiB on a 2 GiB disk")


def release() -> str:
    tars = sorted(f for f in os.listdir(CELL_BUILD)
                  if f.startswith("cell-") and f.endswith(".tar.gz"))
    if not tars:
        pytest.fail(f"no release tarball in {CELL_BUILD}: run make release", pytrace=False)
    return os.path.join(CELL_BUILD, tars[-1])


def earlier(name: str):
    """This session's times, else the last run's (the file beside the image)."""
    if name in TIMES:
        return TIMES[name]
    try:
        with open(os.path.join(IMAGE_OUT, f"{name}.boot-times")) as f:
            v = dict(line.split() for line in f)
        return float(v["pong"]), float(v["running"])
    except (OSError, ValueError, KeyError):
        return None


def test_custom_image_with_cloud_init(tmp_path, registry, guests, host_files):
    """The same with Debian's cloud-init in place of cell-cloudinit, our
    release installed by the custom-image cloud-config."""
    www, port = host_files
    tar = release()
    with open(tar, "rb") as f:
        data = f.read()
    with open(os.path.join(www, os.path.basename(tar)), "wb") as f:
        f.write(data)
    url = f"http://{GUEST_HOST}:{port}/{os.path.basename(tar)}"
    with open(os.path.join(ROOT, "image-build", "init", "custom-image.cloud-config")) as f:
        snippet = f.read().replace("@URL@", url).replace(
            '"@SHA256@"', '"' + hashlib.sha256(data).hexdigest() + '"')
    ci = tmp_path / "custom.cloud-config"
    ci.write_text(snippet)
    boot_and_run("cell-debian-custom", tmp_path, registry, guests, str(ci))
    theirs = TIMES["cell-debian-custom"]
    print()
    for ours_name, target in (("cell-lean", 0.25), ("cell-debian", 0.5)):
        ours = earlier(ours_name)
        if ours is None:
            print(f"(no {ours_name} times: boot it too for the ratio)")
            continue
        for i, what in enumerate(("pong", "running")):
            print(f"RATIO {what} {ours_name} {ours[i] / theirs[i]:.2f}"
                  f" (target for pong <= {target}x; {accel()})")
