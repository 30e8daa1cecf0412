# SPDX-License-Identifier: Apache-2.0
"""Apply one user-data document to a Debian root with canonical cloud-init or
with cell-cloudinit, boot twice, and describe what changed.

Used by tests/integration/test_cloudinit_canonical.py and
bench/cloudinit.py. The root (scripts/canonical-root.sh: Debian 12 minbase +
cloud-init 22.4 + sudo) is never written: every run gets an overlayfs over
it, inside private mount, UTS, PID, IPC and network namespaces (this module
re-executes itself under ``unshare``), so neither the cached root nor the
machine's own /etc is touched. Canonical runs chrooted as a boot runs it
(``init --local``, ``init``, ``modules --mode config``, ``modules --mode
final``) from a NoCloud seed with a fixed instance id; cell-cloudinit runs on
the host with ``--root`` on the same overlay and ``--chroot-commands``.

The description ("snapshot") of a boot lists every path the overlay's upper
layer holds, minus the tools' own state and logs: type, mode, owner,
content (normalised where it holds dates or tool names) or link target.
Directories only count when new or changed against the root.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HARNESS_VERSION = "3"  # bump when a snapshot's meaning changes
INSTANCE_ID = "iid-cinit-compare"

# What canonical is told: NoCloud only, no network configuration, the
# modules that matter for the documents, no generated host keys, no
# default user unless a document asks for one, root keys without the
# "login as debian" prefix. This is the "cleanly disabled" part: no
# networked module (apt, ntp, snap, phone-home…) is in the lists.
CLOUD_CFG = """\
datasource_list: [NoCloud, None]
network: {config: disabled}
users: []
disable_root: false
ssh_genkeytypes: []
ssh_deletekeys: false
ssh_quiet_keygen: true
cloud_init_modules: [bootcmd, write-files, set_hostname, update_hostname,
                     update_etc_hosts, users-groups, ssh]
cloud_config_modules: [runcmd]
cloud_final_modules: [write-files-deferred, scripts-user, final-message]
"""
CFG_REL = "etc/cloud/cloud.cfg.d/99-cell-compare.cfg"
SEED_REL = "var/lib/cloud/seed/nocloud"

# Paths no snapshot holds: the tools' state and logs, the backups useradd
# leaves, API filesystems, byte code.
EXCLUDE = re.compile(
    r"^(var/lib/cloud|var/lib/cell-cloudinit|var/log|run/cloud-init|"
    r"run/cell-cloudinit|dev|proc|sys|tmp/\.|"
    r"etc/cloud/cloud\.cfg\.d/99-cell-compare\.cfg|"
    r"etc/(passwd|group|shadow|gshadow|subuid|subgid)-|etc/\.pwd\.lock|"
    r"root/\.cache|var/cache)(/|$)|(^|/)__pycache__(/|$)")
HEADER = re.compile(r"^# (Created|Added) by (cloud-init|cell-cloudinit) v\. .* on .*$",
                    re.M)


def cloud_init_version(root: str) -> str:
    with open(os.path.join(root, "var/lib/dpkg/status")) as f:
        text = f.read()
    m = re.search(r"^Package: cloud-init\n(?:.+\n)*?Version: (.+)$", text, re.M)
    return m.group(1) if m else "unknown"


def cache_key(root: str, doc: bytes, meta: str) -> str:
    h = hashlib.sha256()
    for part in (HARNESS_VERSION, cloud_init_version(root), CLOUD_CFG, meta):
        h.update(part.encode() + b"\0")
    h.update(doc)
    return h.hexdigest()[:32]


def normalise(rel: str, data: bytes):
    """Contents as compared: dates in shadow and tool headers made equal,
    authorized_keys as a sorted list (cloud-init writes a Python set)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return {"sha256": hashlib.sha256(data).hexdigest(), "len": len(data)}
    if rel in ("etc/shadow",):
        lines = []
        for line in text.splitlines():
            f = line.split(":")
            if len(f) > 2 and f[2].isdigit():
                f[2] = "<days>"
            lines.append(":".join(f))
        text = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    text = HEADER.sub(r"# \1 by <tool>", text)
    if rel.endswith("/.ssh/authorized_keys"):
        return sorted(text.splitlines())
    return text


def snapshot(upper: str, merged: str, lower: str) -> Dict[str, list]:
    out: Dict[str, list] = {}
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, upper)
            if EXCLUDE.search(rel):
                continue
            ust = os.lstat(full)
            if stat.S_ISCHR(ust.st_mode) and ust.st_rdev == 0:
                out[rel] = ["deleted"]
                continue
            st = os.lstat(os.path.join(merged, rel))
            entry = [stat.filemode(st.st_mode), st.st_uid, st.st_gid]
            if stat.S_ISDIR(st.st_mode):
                try:
                    lst = os.lstat(os.path.join(lower, rel))
                    if (lst.st_mode, lst.st_uid, lst.st_gid) == (
                            st.st_mode, st.st_uid, st.st_gid):
                        continue
                except FileNotFoundError:
                    pass
            elif stat.S_ISLNK(st.st_mode):
                entry.append(os.readlink(os.path.join(merged, rel)))
            elif stat.S_ISREG(st.st_mode):
                with open(os.path.join(merged, rel), "rb") as f:
                    entry.append(normalise(rel, f.read()))
            out[rel] = entry
    return dict(sorted(out.items()))


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def _mount_boot(merged: str) -> None:
    for d in ("proc", "dev", "sys"):
        os.makedirs(os.path.join(merged, d), exist_ok=True)
    _sh("mount", "-t", "proc", "proc", f"{merged}/proc")
    _sh("mount", "--rbind", "/dev", f"{merged}/dev")


def _umount_boot(merged: str) -> None:
    # /run stays in the overlay (so writes through /var/run -> /run can be
    # compared); the tools' own run-time state goes, as at a reboot.
    for d in ("dev", "proc"):
        subprocess.run(["umount", "-R", "-l", f"{merged}/{d}"], check=False)
    for d in ("run/cloud-init", "run/cell-cloudinit"):
        subprocess.run(["rm", "-rf", os.path.join(merged, d)], check=False)


def _timed(cmd: List[str], env: dict, log):
    """Run cmd; (exit code, wall seconds, peak RSS in KiB). The RSS comes
    from GNU time (a small C parent: a Python parent's own pages would be
    counted for the child before its exec)."""
    fd, out = tempfile.mkstemp(prefix="cinit-time.")
    os.close(fd)
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out, *cmd], env=env,
                       stdout=log, stderr=subprocess.STDOUT)
    dt = time.perf_counter() - t0
    with open(out) as f:
        rss = int(f.read().split()[-1])
    os.unlink(out)
    return p.returncode, dt, rss


def _run_canonical(merged: str, work: str, log, timing: Optional[list]) -> int:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOME": "/root"}
    rc, wall, rss = 0, 0.0, 0
    for args in (["init", "--local"], ["init"], ["modules", "--mode", "config"],
                 ["modules", "--mode", "final"]):
        code, e, m = _timed(["chroot", merged, "/usr/bin/cloud-init", *args], env, log)
        rc = rc or code
        wall, rss = wall + e, max(rss, m)
    if timing is not None:
        timing.append([wall, rss])
    return rc


def _run_cell(binary: str, merged: str, seed: str, work: str, flags: List[str],
              log, timing: Optional[list]) -> int:
    cmd = [binary, "--datasource", "nocloud", "--seed-dir", seed, "--root", merged,
           "--state-dir", os.path.join(work, "cell-state"), "--log-file",
           os.path.join(work, "cell.log"), "--chroot-commands", "--set-hostname",
           *flags]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    code, e, m = _timed(cmd, env, log)
    if timing is not None:
        timing.append([e, m])
    return code


def inside(args: dict) -> dict:
    """The body, already inside the namespaces."""
    root, tool = args["root"], args["tool"]
    # canonical falls back to the running name when meta-data has none
    subprocess.run(["hostname", "cinit-uts"], check=True)
    work = tempfile.mkdtemp(prefix="cinit-canon.", dir=args.get("workdir"))
    _sh("mount", "--make-rprivate", "/")
    _sh("mount", "-t", "tmpfs", "tmpfs", work) if args.get("tmpfs") else None
    upper, ovl, merged = (os.path.join(work, d) for d in ("upper", "ovl", "merged"))
    for d in (upper, ovl, merged):
        os.makedirs(d)
    _sh("mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir={root},upperdir={upper},workdir={ovl}", merged)
    # The same seed and settings for both tools (cell-cloudinit reads the
    # seed from --seed-dir and ignores cloud.cfg.d), so the trees differ
    # only by what the tools did.
    doc = bytes.fromhex(args["doc"])
    seed = os.path.join(merged, SEED_REL)
    os.makedirs(seed, exist_ok=True)
    with open(os.path.join(seed, "user-data"), "wb") as f:
        f.write(doc)
    with open(os.path.join(seed, "meta-data"), "w") as f:
        f.write(args["meta"])
    with open(os.path.join(merged, CFG_REL), "w") as f:
        f.write(CLOUD_CFG)
    for pre in args.get("pre", []):  # the image as shipped (links, files)
        subprocess.run(["chroot", merged, "/bin/sh", "-c", pre], check=True)
    boots, rcs, timing = [], [], ([] if args.get("timing") else None)
    logpath = os.path.join(work, "tool.log")
    with open(logpath, "wb") as log:
        for _ in range(args.get("boots", 2)):
            _mount_boot(merged)
            if tool == "canonical":
                rcs.append(_run_canonical(merged, work, log, timing))
            else:
                rcs.append(_run_cell(args["binary"], merged, seed, work,
                                     args.get("flags", []), log, timing))
            _umount_boot(merged)
            if not args.get("timing"):
                boots.append(snapshot(upper, merged, root))
    with open(logpath, "rb") as f:
        logtext = f.read()[-6000:].decode(errors="replace")
    if tool == "cell" and os.path.exists(os.path.join(work, "cell.log")):
        with open(os.path.join(work, "cell.log"), "rb") as f:
            logtext += f.read()[-6000:].decode(errors="replace")
    subprocess.run(["umount", "-R", "-l", work if args.get("tmpfs") else merged],
                   check=False)
    return {"boots": boots, "rc": rcs, "log": logtext, "timing": timing}


def run(tool: str, root: str, doc: bytes, meta: str, *, binary: str = "",
        flags: Optional[List[str]] = None, pre: Optional[List[str]] = None,
        boots: int = 2, timing: bool = False, tmpfs: bool = False,
        workdir: Optional[str] = None, timeout: float = 300) -> dict:
    """Run tool in fresh namespaces on an overlay of root; see inside()."""
    args = {"tool": tool, "root": root, "doc": doc.hex(), "meta": meta,
            "binary": binary, "flags": flags or [], "pre": pre or [],
            "boots": boots, "timing": timing, "tmpfs": tmpfs, "workdir": workdir}
    p = subprocess.run(
        ["unshare", "--mount", "--uts", "--ipc", "--net", "--pid", "--fork", "--mount-proc",
         "--kill-child", sys.executable, os.path.abspath(__file__)],
        input=json.dumps(args), capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{tool} run failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout)


def canonical_cached(root: str, doc: bytes, meta: str, cache_dir: str,
                     pre: Optional[List[str]] = None) -> dict:
    """Canonical's result for doc, from the cache when there."""
    key = cache_key(root, doc + json.dumps(pre or []).encode(), meta)
    path = os.path.join(cache_dir, f"{key}.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        pass
    res = run("canonical", root, doc, meta, pre=pre)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.rename(tmp, path)
    return res


if __name__ == "__main__":
    result = inside(json.loads(sys.stdin.read()))
    sys.stdout.write(json.dumps(result))
