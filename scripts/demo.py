"""Drive the demo of scripts/demo.sh: a local registry with a sample image,
cell-pull on its own, then a local cell: cell-agent with throwaway PKI,
driven over mutual TLS exactly as the Kip controller drives it."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))

from images import File, Image, Layer, busybox_layer, push  # noqa: E402
from pki import CA  # noqa: E402
from registry import Registry  # noqa: E402
from wire import CellClient, pod_params, unit  # noqa: E402

BUILD = os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build"))
PULL = os.path.join(BUILD, "bin", "cell-pull")
AGENT = os.path.join(BUILD, "bin", "cell-agent")


def run(*cmd):
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - t0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pull_demo(work, reg, ref):
    cache = os.path.join(work, "cache")
    rootfs, mnt = os.path.join(work, "rootfs"), os.path.join(work, "mnt")
    common = ["--insecure-registry", reg.host, "--workdir", cache]
    t = run(PULL, "--image", ref, "--extract-to", rootfs,
            "--save-config", os.path.join(work, "config.json"), *common)
    print(f"  cold pull into a flattened rootfs: {t * 1000:.0f} ms")
    run("chroot", rootfs, "/bin/cat", "/etc/motd")
    t = run(PULL, "--image", ref, "--mount", mnt, *common)
    print(f"  warm pull as an overlay mount: {t * 1000:.0f} ms")
    run("chroot", mnt, "/bin/sh", "-c", "echo written > /tmp/x; ls -l /bin/busybox")
    run(PULL, "--unmount", mnt)


def start_cell(work, reg):
    pki = os.path.join(work, "pki")
    boot = os.path.join(work, "boot")
    os.makedirs(boot)
    ca = CA.create(pki)
    srv = ca.issue_server(pki, "server", dns=["MilpaNode"], ips=[])
    cli = ca.issue_client(pki, "client")
    for src, name in ((ca.cert_path, "ca.crt"), (srv.cert_path, "server.crt"),
                      (srv.key_path, "server.key")):
        shutil.copy(src, os.path.join(boot, name))
    port = free_port()
    log = open(os.path.join(work, "agent.log"), "wb")
    p = subprocess.Popen([AGENT, "--port", str(port), "--boot-dir", boot,
                          "--state-dir", os.path.join(work, "state"),
                          "--image-cache", os.path.join(work, "cache"),
                          "--agent-log", os.path.join(work, "itzo.log"),
                          "--containers-log-dir", os.path.join(work, "containers"),
                          "--insecure-registry", reg.host],
                         stdout=log, stderr=log, start_new_session=True)
    c = CellClient("127.0.0.1", port, ca=ca.cert_path, cert=cli.cert_path, key=cli.key_path)
    for _ in range(100):
        try:
            print("ping:", c.ping())
            return p, c
        except Exception:
            time.sleep(0.1)
    raise SystemExit("cell-agent did not answer; see " + log.name)


def cell_demo(work, reg, ref):
    print("\n== a local cell running a sample pod")
    p, c = start_cell(work, reg)
    try:
        c.deploy("default_hello", "etchosts", {"etc/hosts": "127.0.0.1 localhost hello\n"})
        c.update_pod(pod_params("default_hello", units=[unit(
            "hello", ref, command=["/bin/sh", "-c",
                                   "cat /etc/motd; i=0; while true; do "
                                   "echo tick $i; i=$((i+1)); sleep 1; done"])],
            terminationGracePeriodSeconds=1))
        st = c.wait_status(lambda s: s["unitStatus"] and
                           "running" in (s["unitStatus"][0].get("state") or {}), timeout=30)
        u = st["unitStatus"][0]
        print(f"unit {u['name']}: running since {u['state']['running']['startedAt']}, "
              f"ready={u['ready']}, restarts={u['restartCount']}")
        time.sleep(2.5)
        print("logs:\n" + c.logs("hello").decode())
        out, err, code = c.exec("hello", ["/bin/sh", "-c", "hostname; cat /etc/hosts"],
                                pod="default_hello").collect()
        print(f"exec (exit {code}):\n" + out.decode())
        c.update_pod(pod_params("default_hello", terminationGracePeriodSeconds=1))
        c.wait_status(lambda s: not s["unitStatus"], timeout=20)
        time.sleep(2)  # the unit's monitor tears down its container
    finally:
        p.terminate()
        p.wait(timeout=15)


def main():
    work = tempfile.mkdtemp(prefix="cell-demo-")
    with Registry(os.path.join(work, "registry")) as reg:
        hello = Layer([File("etc/motd", "hello from a cell image\n")])
        img = Image([busybox_layer(), hello], config={"Cmd": ["/bin/sh"]})
        push(reg, "demo/busybox", "latest", img)
        ref = f"{reg.host}/demo/busybox:latest"
        pull_demo(work, reg, ref)
        cell_demo(work, reg, ref)
    subprocess.run(["umount", "-R", "-q", os.path.join(work, "state")],
                   stderr=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)
    print("demo ok")


if __name__ == "__main__":
    main()
