"""Drive the demo of scripts/demo.sh: local registry, sample image, pulls."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "pylib"))

from images import File, Image, Layer, busybox_layer, push  # noqa: E402
from registry import Registry  # noqa: E402

PULL = os.path.join(os.environ.get("CELL_BUILD", os.path.join(HERE, "..", "build")),
                    "bin", "cell-pull")


def run(*cmd):
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - t0


def main():
    work = tempfile.mkdtemp(prefix="cell-demo-")
    with Registry(os.path.join(work, "registry")) as reg:
        hello = Layer([File("etc/motd", "hello from a cell image\n")])
        img = Image([busybox_layer(), hello], config={"Cmd": ["/bin/sh"]})
        push(reg, "demo/busybox", "latest", img)
        ref = f"{reg.host}/demo/busybox:latest"
        cache = os.path.join(work, "cache")
        rootfs = os.path.join(work, "rootfs")
        mnt = os.path.join(work, "mnt")
        common = ["--insecure-registry", reg.host, "--workdir", cache]
        t = run(PULL, "--image", ref, "--extract-to", rootfs,
                "--save-config", os.path.join(work, "config.json"), *common)
        print(f"  cold pull into a flattened rootfs: {t * 1000:.0f} ms")
        run("chroot", rootfs, "/bin/cat", "/etc/motd")
        t = run(PULL, "--image", ref, "--mount", mnt, *common)
        print(f"  warm pull as an overlay mount: {t * 1000:.0f} ms")
        run("chroot", mnt, "/bin/sh", "-c", "echo written > /tmp/x; ls -l /bin/busybox")
        run(PULL, "--unmount", mnt)
    shutil.rmtree(work, ignore_errors=True)
    print("demo ok")


if __name__ == "__main__":
    main()
