# SPDX-License-Identifier: Apache-2.0
"""Integration tests for cell-cloudinit: the real binary, as root, applying
user data to a scratch root inside a throwaway mount and UTS namespace
(``unshare --mount --uts``), against fake metadata services on loopback
(tests/pylib/metadata.py) that follow the EC2 IMDSv2, GCE and Azure APIs.

Each run binds the scratch root onto itself first, so that chrooted
commands see "/" as a mount point (``mount --make-rprivate /`` works), and
prints the namespace's hostname after the run so that tests can check
sethostname() without touching the host's.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Dict, List, Optional

import pytest

import metadata as md
from nsfwd import pump

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CELL_BUILD = os.environ.get("CELL_BUILD") or os.path.join(REPO, "build")
BIN = os.path.join(CELL_BUILD, "bin", "cell-cloudinit")
BUSYBOX = "/bin/busybox"
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA0 alice@laptop"
KEY_B = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ0 ops@bastion"


# ---------------------------------------------------------------- fixtures

@pytest.fixture
def binary() -> str:
    if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
        pytest.fail(f"cell-cloudinit not found at {BIN} (make; CELL_BUILD selects the "
                    "build dir)", pytrace=False)
    return BIN


class Cell:
    """A scratch root with a busybox userland, a state dir and a log."""

    def __init__(self, base: str):
        self.base = base
        self.root = os.path.join(base, "root")
        self.state = os.path.join(base, "state")
        self.log = os.path.join(base, "cloudinit.log")
        for d in ("etc", "bin", "dev", "tmp", "root", "home", "run", "usr/local/bin",
                  "var/log", "srv"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        os.chmod(os.path.join(self.root, "tmp"), 0o1777)
        self.write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                   "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
        self.write("etc/group", "root:x:0:\ndaemon:x:1:\nshadow:x:42:\nsudo:x:27:\n")
        self.write("etc/shadow", "root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
                   0o640)
        self.write("etc/gshadow", "root:*::\ndaemon:*::\nshadow:*::\nsudo:*::\n", 0o640)
        self.write("etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n")
        self.write("etc/sudoers", "root ALL=(ALL:ALL) ALL\n", 0o440)
        shutil.copy(BUSYBOX, os.path.join(self.root, "bin/busybox"))
        subprocess.run(["chroot", self.root, "/bin/busybox", "--install", "-s", "/bin"],
                       check=True)
        os.mknod(os.path.join(self.root, "dev/null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        self.pids: List[int] = []

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel.lstrip("/"))

    def write(self, rel: str, text, mode: int = 0o644) -> str:
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        os.chmod(p, mode)
        return p

    def read(self, rel: str) -> str:
        with open(self.path(rel)) as f:
            return f.read()

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def mode(self, rel: str) -> int:
        return stat.S_IMODE(os.lstat(self.path(rel)).st_mode)

    def owner(self, rel: str):
        st = os.lstat(self.path(rel))
        return st.st_uid, st.st_gid

    def logtext(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def seed(self, user_data, meta: str = "instance-id: iid-seed-1\n",
             name: str = "seed") -> str:
        d = os.path.join(self.base, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "user-data"), "wb") as f:
            f.write(user_data.encode() if isinstance(user_data, str) else user_data)
        with open(os.path.join(d, "meta-data"), "w") as f:
            f.write(meta)
        return d


class Result:
    def __init__(self, rc: int, out: str, err: str, elapsed: float):
        self.rc, self.err, self.elapsed = rc, err, elapsed
        lines = out.splitlines()
        self.hostname = next((l.split("=", 1)[1] for l in lines
                              if l.startswith("__hostname=")), None)
        self.out = "\n".join(l for l in lines if not l.startswith("__hostname="))

    def __repr__(self):
        bad = [l for l in self.err.splitlines() if ": error: " in l or ": warning: " in l]
        return f"Result(rc={self.rc}, problems={bad!r}, tail={self.err[-1500:]!r})"


@pytest.fixture
def cell(tmp_path):
    c = Cell(str(tmp_path))
    yield c
    for pid in c.pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def run(binary, cell):
    """run(*args, pre="shell before", timeout=) → Result, in a new mount and
    UTS namespace with --root/--state-dir/--log-file of the cell."""

    def do(*args: str, pre: str = "", timeout: float = 60, root: bool = True) -> Result:
        script = ('mount --bind "$1" "$1" || exit 99; shift; ' + (pre or ":") +
                  '; "$@"; rc=$?; echo "__hostname=$(hostname)"; exit $rc')
        base = [binary] + (["--root", cell.root] if root else []) + \
            ["--state-dir", cell.state, "--log-file", cell.log]
        cmd = ["unshare", "--mount", "--uts", "--", "/bin/sh", "-c", script, "sh",
               cell.root, *base, *map(str, args)]
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                 "HOME": "/root"})
        return Result(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)
    return do


@pytest.fixture
def servers():
    made: list = []

    def make(cls, *a, **kw):
        s = cls(*a, **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def cloud_config(doc: dict) -> str:
    return "#cloud-config\n" + json.dumps(doc, indent=1) + "\n"


def gz(data) -> bytes:
    return gzip.compress(data.encode() if isinstance(data, str) else data, mtime=0)


def b64(data) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def assert_ok(r: Result) -> None:
    assert r.rc == 0, r


# ------------------------------------------------- the fakes against real clients

def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args],
                          capture_output=True, text=True, timeout=30)


def status_body(p: subprocess.CompletedProcess):
    body, _, code = p.stdout.rpartition("\n")
    return int(code), body


def test_imds_fake_follows_imdsv2_with_curl(servers):
    s = servers(md.IMDS, mode="required")
    u = s.url
    # AWS's documented sequence: PUT a token, then GET with it.
    code, tok = status_body(curl("-X", "PUT", f"{u}/latest/api/token",
                                 "-H", "X-aws-ec2-metadata-token-ttl-seconds: 21600"))
    assert code == 200 and len(tok) > 40
    assert status_body(curl(f"{u}/latest/meta-data/instance-id"))[0] == 401
    assert status_body(curl("-H", f"X-aws-ec2-metadata-token: {tok}",
                            f"{u}/latest/meta-data/instance-id")) == (200, "i-0123456789abcdef0")
    assert status_body(curl("-H", "X-aws-ec2-metadata-token: forged",
                            f"{u}/latest/meta-data/instance-id"))[0] == 401
    for bad in ("0", "21601", "x", None):
        hdr = [] if bad is None else ["-H", f"X-aws-ec2-metadata-token-ttl-seconds: {bad}"]
        assert status_body(curl("-X", "PUT", f"{u}/latest/api/token", *hdr))[0] == 400, bad
    assert status_body(curl("-X", "PUT", f"{u}/latest/api/token", "-H",
                            "X-aws-ec2-metadata-token-ttl-seconds: 60", "-H",
                            "X-Forwarded-For: 10.0.0.9"))[0] == 403
    assert status_body(curl(f"{u}/latest/api/token"))[0] == 405
    code, tok1 = status_body(curl("-X", "PUT", f"{u}/latest/api/token",
                                  "-H", "X-aws-ec2-metadata-token-ttl-seconds: 1"))
    time.sleep(1.2)  # the token's TTL is honoured
    assert status_body(curl("-H", f"X-aws-ec2-metadata-token: {tok1}",
                            f"{u}/latest/meta-data/instance-id"))[0] == 401
    p = subprocess.run(["curl", "-s", "-D", "-", "-o", "/dev/null", "-X", "PUT",
                        f"{u}/latest/api/token", "-H",
                        "X-aws-ec2-metadata-token-ttl-seconds: 300"],
                       capture_output=True, text=True, timeout=30)
    assert "x-aws-ec2-metadata-token-ttl-seconds: 300" in p.stdout.lower()
    # v1 (optional tokens) mode: no token is fine, a bad one still is not.
    o = servers(md.IMDS, mode="optional")
    assert status_body(curl(f"{o.url}/latest/meta-data/local-ipv4")) == (200, "10.0.0.5")
    assert status_body(curl("-H", "X-aws-ec2-metadata-token: forged",
                            f"{o.url}/latest/meta-data/local-ipv4"))[0] == 401


def test_imds_fake_with_botocore(servers):
    try:
        from botocore.utils import InstanceMetadataFetcher, IMDSRegionProvider  # noqa: F401
    except ImportError:
        pytest.fail("python3-botocore is missing (scripts/deps.sh installs it)",
                    pytrace=False)
    for mode, wants_token in (("required", True), ("optional", True), ("v1", False)):
        s = servers(md.IMDS, mode=mode)
        f = InstanceMetadataFetcher(timeout=2, num_attempts=1, base_url=s.url)
        creds = f.retrieve_iam_role_credentials()
        assert creds.get("role_name") == "cell-role", (mode, creds)
        assert creds.get("access_key") == "ASIAFAKEFAKEFAKEFAKE"
        assert ("PUT", "/latest/api/token") in [(m, p) for m, p, _ in s.requests]
        gets = [h for m, p, h in s.requests if m == "GET"]
        assert all(("X-aws-ec2-metadata-token" in h) == wants_token for h in gets), mode


def test_gce_and_azure_fakes_demand_their_headers(servers):
    g = servers(md.GCE)
    assert status_body(curl(f"{g.url}/computeMetadata/v1/instance/id"))[0] == 403
    p = subprocess.run(["curl", "-s", "-i", "-H", "Metadata-Flavor: Google",
                        f"{g.url}/computeMetadata/v1/instance/id"],
                       capture_output=True, text=True, timeout=30)
    assert "200" in p.stdout.splitlines()[0] and "Metadata-Flavor: Google" in p.stdout
    a = servers(md.Azure)
    code, body = status_body(curl(f"{a.url}/metadata/instance?api-version=2021-02-01"))
    assert code == 400 and "Required metadata header" in json.loads(body)["error"]
    code, body = status_body(curl("-H", "Metadata: true", f"{a.url}/metadata/instance"))
    assert code == 400 and "api-version" in json.loads(body)["error"]
    code, body = status_body(curl("-H", "Metadata: true",
                                  f"{a.url}/metadata/instance?api-version=2021-02-01"))
    assert code == 200 and json.loads(body)["compute"]["name"] == "cell-az"


# ---------------------------------------------------------------- EC2

CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIRAKZ\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\n"


def controller_user_data(extra: Optional[dict] = None) -> str:
    """What the controller sends: the boot files as write_files, 0400."""
    files = {"ca.crt": CA, "server.crt": CA, "server.key": KEY,
             "cell_config.yaml": 'itzoFlag-port: "6421"\n', "itzo_version": "1.2.3\n"}
    doc = {"write_files": [{"path": f"/tmp/itzo/{n}", "content": b64(c),
                            "encoding": "base64", "owner": "root",
                            "permissions": "0400"} for n, c in files.items()]}
    doc.update(extra or {})
    return cloud_config(doc)


def test_controller_user_data_over_imdsv2(run, cell, servers):
    ud = controller_user_data({"runcmd": ["echo private=$private_ipv4 > /run/ip"]})
    s = servers(md.IMDS, user_data=ud.encode(), public_keys=[("kip", KEY_B)])
    r = run("--datasource", "ec2", "--ec2-url", s.url, "--chroot-commands")
    assert_ok(r)
    for n, want in (("ca.crt", CA), ("server.key", KEY), ("itzo_version", "1.2.3\n")):
        assert cell.read(f"tmp/itzo/{n}") == want
        assert cell.mode(f"tmp/itzo/{n}") == 0o400 and cell.owner(f"tmp/itzo/{n}") == (0, 0)
    assert cell.mode("tmp/itzo") == 0o755
    assert cell.read("run/ip") == "private=10.0.0.5\n"
    assert cell.read("root/.ssh/authorized_keys") == KEY_B + "\n"
    # IMDSv2 exactly: a token first, then every GET carries it.
    assert s.requests[0][0] == "PUT" and s.requests[0][1] == "/latest/api/token"
    assert s.requests[0][2]["X-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    gets = [h for m, p, h in s.requests if m == "GET"]
    assert gets and all(h.get("X-aws-ec2-metadata-token") for h in gets)
    assert "ec2 (IMDSv2)" in r.err


def test_imdsv1_fallback_and_token_refresh(run, cell, servers):
    s = servers(md.IMDS, mode="v1", user_data=b"#cloud-config\nruncmd: [['touch', 'v1']]\n")
    r = run("--datasource", "ec2", "--ec2-url", s.url)
    assert_ok(r)
    assert cell.exists("v1") and "ec2 (IMDSv1)" in r.err
    assert all("X-aws-ec2-metadata-token" not in h for m, p, h in s.requests if m == "GET")
    # A token revoked between the PUT and the GETs: one fresh token, then on.
    t = servers(md.IMDS, user_data=b"#cloud-config\nruncmd: [['touch', 'v2']]\n",
                instance_id="i-other", delay=0.05)
    real = t.handle

    def revoke_once(method, path, headers, _done=[]):
        if method == "GET" and not _done:
            _done.append(1)
            t.revoke_tokens()
        return real(method, path, headers)
    t.handle = revoke_once
    r = run("--datasource", "ec2", "--ec2-url", t.url)
    assert_ok(r)
    assert cell.exists("v2") and t.token_requests() == 2


def test_example_runcmd_with_local_commands(run, cell, servers):
    """The issue's example, with apt-get and the download made local: busybox
    wget fetches the "agent" from a loopback server, mount works on the
    chroot's "/", and the backgrounded agent does not hold up the boot."""
    agent = b"#!/bin/sh\necho \"agent up as $$\" \nexec sleep 20\n"
    web = servers(md.Static, {"/cell-agent": agent})
    ud = ("#cloud-config\nruncmd:\n"
          "  - echo apt-get update \\&\\& apt-get install -y ipset iproute2 iptables"
          " > /var/log/apt.log\n"
          f"  - wget -O /usr/local/bin/cell-agent {web.url}/cell-agent\n"
          "  - chmod 755 /usr/local/bin/*\n"
          "  - mount --make-rprivate /\n"
          "  - /usr/local/bin/cell-agent > /var/log/cell-agent.log 2>&1 &\n")
    s = servers(md.IMDS, user_data=ud.encode())
    r = run("--datasource", "ec2", "--ec2-url", s.url, "--chroot-commands")
    assert_ok(r)
    assert r.elapsed < 10, "the background agent must not be waited for"
    assert cell.mode("usr/local/bin/cell-agent") == 0o755
    assert "apt-get update && apt-get install" in cell.read("var/log/apt.log")
    for _ in range(50):
        if "agent up" in cell.read("var/log/cell-agent.log"):
            break
        time.sleep(0.1)
    log = cell.read("var/log/cell-agent.log")
    assert "agent up as" in log
    cell.pids.append(int(log.split()[-1]))
    assert "scripts/runcmd" in cell.logtext() and "exit status" not in cell.logtext()


# ---------------------------------------------------------------- every module

def every_module_doc() -> str:
    payload = "gzipped payload\n"
    z = gz(payload)
    doc = {
        "bootcmd": ["echo boot >> /var/log/boot.log", ["sh", "-c", "echo list-boot >> /var/log/boot.log"]],
        "write_files": [
            {"path": "/etc/plain.txt", "content": "plain\n"},
            {"path": "/etc/b64", "encoding": "b64", "content": b64("b64\n")},
            {"path": "/etc/base64", "encoding": "base64", "content": b64("base64\n")},
            {"path": "/etc/gz_b64", "encoding": "gz+base64", "content": b64(z)},
            {"path": "/etc/gzip_base64", "encoding": "gzip+base64", "content": b64(z)},
            {"path": "/etc/gz_b64b", "encoding": "gz+b64", "content": b64(z)},
            {"path": "/etc/gzip_b64", "encoding": "gzip+b64", "content": b64(z)},
            {"path": "/opt/app/deep/conf", "content": "x", "permissions": "0600",
             "owner": "daemon:sudo"},
            {"path": "/etc/hosts", "content": "10.9.9.9 appended\n", "append": True},
            {"path": "/home/alice/late.txt", "content": "deferred", "owner": "alice:alice",
             "defer": True, "permissions": 0o640},
        ],
        "milpa_files": [{"path": "/etc/milpa", "content": "legacy", "permissions": "0444"}],
        "hostname": "cell-42",
        "fqdn": "cell-42.pods.example",
        "groups": [{"admins": ["root"]}, "cloud-users"],
        "users": [
            "default",
            {"name": "alice", "gecos": "Alice Admin", "shell": "/bin/sh",
             "groups": ["admins", "sudo"], "passwd": "$6$rounds=4096$salt$hash",
             "lock_passwd": False, "sudo": "ALL=(ALL) NOPASSWD:ALL",
             "ssh_authorized_keys": [KEY_A]},
            {"name": "svc", "system": True, "homedir": "/var/lib/svc", "no_create_home": True},
            {"name": "bob", "uid": 2500, "primary_group": "staff"},
        ],
        "ssh_authorized_keys": [KEY_B],
        "runcmd": ["id -u alice > /run/alice-uid", ["touch", "/run/list-form"],
                   "hostname > /run/hostname-seen"],
        "final_message": "final: $INSTANCE_ID up $UPTIME s at $TIMESTAMP",
    }
    return cloud_config(doc)


def test_every_module_and_encoding_from_nocloud(run, cell):
    seed = cell.seed(every_module_doc(), "instance-id: iid-every\nlocal-hostname: ignored\n")
    r = run("--seed-dir", seed, "--chroot-commands", "--set-hostname")
    assert_ok(r)
    for p, want in (("etc/plain.txt", "plain\n"), ("etc/b64", "b64\n"),
                    ("etc/base64", "base64\n"), ("etc/gz_b64", "gzipped payload\n"),
                    ("etc/gzip_base64", "gzipped payload\n"),
                    ("etc/gz_b64b", "gzipped payload\n"),
                    ("etc/gzip_b64", "gzipped payload\n"), ("etc/milpa", "legacy")):
        assert cell.read(p) == want, p
        assert cell.mode(p) == (0o444 if p == "etc/milpa" else 0o644), p
    passwd = cell.read("etc/passwd")
    alice = next(l for l in passwd.splitlines() if l.startswith("alice:")).split(":")
    uid = int(alice[2])
    assert alice[4:] == ["Alice Admin", "/home/alice", "/bin/sh"] and uid >= 1000
    assert "svc:x:999:" in passwd and "bob:x:2500:" in passwd
    group = cell.read("etc/group")
    assert any(l.startswith("admins:") and l.endswith(":root,alice") for l in group.splitlines())
    assert "sudo:x:27:alice" in group and "cloud-users:x:" in group and "staff:x:" in group
    assert "alice:$6$rounds=4096$salt$hash:" in cell.read("etc/shadow")
    assert "bob:!:" in cell.read("etc/shadow")  # locked by default
    # write_files runs before users (cloud-init's order): a file for a new
    # user needs defer: true, like late.txt below.
    assert cell.owner("opt/app/deep/conf") == (1, 27)
    assert cell.mode("opt/app/deep/conf") == 0o600
    assert cell.mode("opt/app") == 0o755 and cell.mode("opt/app/deep") == 0o755
    assert cell.read("home/alice/late.txt") == "deferred" and cell.mode("home/alice/late.txt") == 0o640
    assert cell.owner("home/alice") == (uid, int(alice[3])) and cell.mode("home/alice") == 0o755
    assert cell.read("home/alice/.ssh/authorized_keys") == KEY_A + "\n"
    assert cell.mode("home/alice/.ssh") == 0o700
    assert cell.mode("home/alice/.ssh/authorized_keys") == 0o600
    assert cell.owner("home/alice/.ssh/authorized_keys")[0] == uid
    assert not cell.exists("var/lib/svc") and not cell.exists("home/svc")
    assert cell.read("root/.ssh/authorized_keys") == KEY_B + "\n"
    assert cell.read("etc/sudoers.d/90-cloud-init-users").endswith(
        "alice ALL=(ALL) NOPASSWD:ALL\n")
    assert cell.mode("etc/sudoers.d/90-cloud-init-users") == 0o440
    assert "#includedir /etc/sudoers.d" in cell.read("etc/sudoers")
    assert cell.read("etc/hostname") == "cell-42\n"
    hosts = cell.read("etc/hosts")
    assert "127.0.1.1\tcell-42.pods.example cell-42\n" in hosts and "10.9.9.9 appended" in hosts
    assert r.hostname == "cell-42" and cell.read("run/hostname-seen") == "cell-42\n"
    assert cell.read("run/alice-uid") == f"{uid}\n" and cell.exists("run/list-form")
    assert cell.read("var/log/boot.log") == "boot\nlist-boot\n"
    log = cell.logtext()
    assert "final: iid-every up" in log and "'default'" in log


def test_every_module_without_chroot_sees_cloudinit_root(run, cell):
    seed = cell.seed(cloud_config({"runcmd": ['echo "$CLOUDINIT_ROOT|$(pwd)" > here']}))
    r = run("--seed-dir", seed)
    assert_ok(r)
    assert cell.read("here") == f"{cell.root}|{cell.root}\n"


# ------------------------------------------------------ formats: multipart, gzip, script

def multipart(*parts) -> str:
    m = MIMEMultipart()
    for p in parts:
        m.attach(p)
    return m.as_string()


def test_multipart_gzip_script_boothook_over_gce(run, cell, servers):
    script = MIMEText("#!/bin/sh\necho script-ran >> /var/log/parts.log\n", "x-shellscript")
    script.add_header("Content-Disposition", "attachment", filename="setup.sh")
    hook = MIMEText("#cloud-boothook\n#!/bin/sh\necho hook-$INSTANCE_ID >> /var/log/parts.log\n",
                    "cloud-boothook")
    zpart = MIMEApplication(gz("#cloud-config\nwrite_files:\n- {path: /etc/from-gz, "
                               "content: zipped}\n"), "x-gzip")
    ud = multipart(MIMEText(cloud_config({"runcmd": ["echo runcmd >> /var/log/parts.log"]}),
                            "cloud-config"), script, hook, zpart)
    g = servers(md.GCE, attributes={"user-data": b64(gz(ud)), "user-data-encoding": "base64",
                                    "ssh-keys": f"root:{KEY_A}\nmallory:{KEY_B}"},
                project_attributes={"ssh-keys": f"cloudinit:{KEY_B}"})
    r = run("--datasource", "gce", "--gce-url", g.url, "--chroot-commands")
    assert_ok(r)
    # Boothooks first; then scripts-user in name order: runcmd < setup.sh.
    assert cell.read("var/log/parts.log") == \
        "hook-4520031799277581759\nruncmd\nscript-ran\n"
    assert cell.read("etc/from-gz") == "zipped"
    # Only root's and cloudinit's keys: mallory's would grant root.
    assert cell.read("root/.ssh/authorized_keys") == f"{KEY_A}\n{KEY_B}\n"
    assert all(h.get("Metadata-Flavor") == "Google" for _, _, h in g.requests)
    assert os.path.exists(os.path.join(cell.state, "instances/4520031799277581759/scripts/setup.sh"))


def test_script_user_data_runs_once_per_instance(run, cell, servers):
    ud = b"#!/bin/sh\necho ran x >> /var/log/script.log\n"
    s = servers(md.IMDS, user_data=ud)
    for _ in range(2):
        assert_ok(run("--ec2-url", s.url, "--gce-url", md.refused_url(),
                      "--azure-url", md.refused_url(), "--chroot-commands"))
    assert cell.read("var/log/script.log") == "ran x\n"
    s.set_instance_id("i-new")
    assert_ok(run("--ec2-url", s.url, "--gce-url", md.refused_url(),
                  "--azure-url", md.refused_url(), "--chroot-commands"))
    assert cell.read("var/log/script.log") == "ran x\nran x\n"


def test_once_per_instance_and_new_instance(run, cell, servers):
    doc = cloud_config({"bootcmd": ["echo boot >> /var/log/b"],
                        "runcmd": ["echo run >> /var/log/r"],
                        "write_files": [{"path": "/etc/w", "content": "w"}],
                        "users": [{"name": "carol"}]})
    s = servers(md.Azure, user_data=doc.encode())
    args = ("--datasource", "azure", "--azure-url", s.url, "--chroot-commands")
    assert_ok(run(*args))
    os.unlink(cell.path("etc/w"))
    r = run(*args)  # a reboot of the same instance: only bootcmd
    assert_ok(r)
    assert cell.read("var/log/b") == "boot\nboot\n" and cell.read("var/log/r") == "run\n"
    assert not cell.exists("etc/w") and cell.read("etc/passwd").count("\ncarol:") == 1
    s.doc["compute"]["vmId"] = "11111111-2222-3333-4444-555555555555"
    r = run(*args)  # a new instance id: everything again, nothing duplicated
    assert_ok(r)
    assert cell.read("var/log/b") == "boot\nboot\nboot\n"
    assert cell.read("var/log/r") == "run\nrun\n" and cell.read("etc/w") == "w"
    assert cell.read("etc/passwd").count("\ncarol:") == 1
    state = os.listdir(os.path.join(cell.state, "instances"))
    assert sorted(state) == sorted(["02aab8a4-74ef-476e-8182-f6d2ba4166a6",
                                    "11111111-2222-3333-4444-555555555555"])
    with open(os.path.join(cell.state, "instance-id")) as f:
        assert f.read() == "11111111-2222-3333-4444-555555555555\n"


def test_azure_meta_data_and_keys(run, cell, servers):
    s = servers(md.Azure, user_data=b"#cloud-config\nruncmd: ['echo $public_ipv4 > /run/pub']\n",
                public_keys=[KEY_A])
    r = run("--azure-url", s.url, "--ec2-url", md.refused_url(), "--gce-url", md.refused_url(),
            "--chroot-commands", "--set-hostname")
    assert_ok(r)
    assert cell.read("run/pub") == "20.30.40.50\n"
    assert cell.read("root/.ssh/authorized_keys") == KEY_A + "\n"
    assert cell.read("etc/hostname") == "cell-az\n" and r.hostname == "cell-az"
    assert all(h.get("Metadata") == "true" for _, _, h in s.requests)
    assert "azure" in r.err


# ---------------------------------------------------------------- bad documents

def test_malformed_yaml_reports_line_and_others_still_apply(run, cell, servers):
    bad = "#cloud-config\nwrite_files:\n  - path: /etc/x\n    content: [oops\nruncmd: [x]\n"
    ud = multipart(MIMEText(bad, "cloud-config"),
                   MIMEText("#!/bin/sh\ntouch /run/script-ran\n", "x-shellscript"),
                   MIMEText(cloud_config({"write_files": [{"path": "/etc/good", "content": "g"}],
                                          "packages": ["vim"]}), "cloud-config"))
    s = servers(md.IMDS, user_data=ud.encode())
    r = run("--datasource", "ec2", "--ec2-url", s.url, "--chroot-commands")
    assert r.rc == 2, r
    err = [l for l in r.err.splitlines() if "YAML syntax error" in l]
    assert err and "user-data:5: part 1 (text/cloud-config)" in err[0], r.err
    assert "'packages' is not supported" in r.err
    assert cell.exists("run/script-ran") and cell.read("etc/good") == "g"
    assert not cell.exists("etc/x")
    # A single malformed document: the error and its line, nothing applied.
    seed = cell.seed("#cloud-config\nruncmd:\n  - touch /run/never\n bad: indent\n",
                     "instance-id: iid-bad\n", name="badseed")
    r = run("--seed-dir", seed, "--chroot-commands")
    assert r.rc == 2 and "user-data:4:" in r.err and "YAML syntax error" in r.err, r
    assert not cell.exists("run/never")


def test_type_errors_do_not_stop_other_keys(run, cell):
    seed = cell.seed("#cloud-config\nusers: 5\nwrite_files:\n- {path: /etc/ok, content: ok}\n"
                     "- {path: /etc/bad, permissions: '0999'}\nruncmd: [[touch, /run/ran]]\n")
    r = run("--seed-dir", seed, "--chroot-commands")
    assert r.rc == 2, r
    assert "user-data:5: permissions '0999' are not an octal mode" in r.err
    assert "user-data:2: users must be" in r.err or "user-data:2:" in r.err
    assert cell.read("etc/ok") == "ok" and cell.exists("run/ran") and not cell.exists("etc/bad")


def test_oversized_document_and_gzip_bomb(run, cell, servers):
    big = "#cloud-config\n# " + "x" * (1 << 20) + "\n"
    s = servers(md.IMDS, user_data=big.encode())
    # An over-cap reply is final: it will not shrink on a retry (the
    # --timeout would otherwise be waited out, 30 s of boot).
    r = run("--datasource", "ec2", "--ec2-url", s.url, "--timeout", "60")
    assert r.rc == 2 and "1048576" in r.err, r
    assert len([p for p in s.paths("GET") if p.endswith("/user-data")]) == 1, s.requests
    bomb = gz("#cloud-config\nruncmd: [[touch, /never]]\n#" + "A" * (8 << 20))
    assert len(bomb) < 64 << 10
    seed = cell.seed(bomb, "instance-id: iid-bomb\n")
    r = run("--seed-dir", seed)
    assert r.rc == 2 and "decompressed" in r.err, r
    assert not cell.exists("never")


def test_validate(binary, tmp_path):
    p = tmp_path / "ud.yaml"
    p.write_text("#cloud-config\nwrite_files:\n- path: ../x\nruncmd: [ok]\nfoo: 1\n")
    r = subprocess.run([binary, "--validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert f"{p}:3: error: write_files: path '../x' has a '..' component" in r.stdout
    assert f"{p}:5: warning: unknown key 'foo'; ignored" in r.stdout
    assert "1 error(s), 1 warning(s)" in r.stdout
    p.write_text("#cloud-config\nruncmd: [ok]\n")
    r = subprocess.run([binary, "--validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 0 and "0 error(s)" in r.stdout and "1 runcmd" in r.stdout
    p.write_text("#cloud-config\na: [\n")
    r = subprocess.run([binary, "--validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and f"{p}:3: error: YAML syntax error" in r.stdout, r.stdout


# ---------------------------------------------------------------- datasources

def test_auto_probe_first_answer_wins(run, cell, servers):
    silent = md.Silent()
    try:
        g = servers(md.GCE, attributes={"user-data": "#cloud-config\nruncmd: [[touch, /gce]]\n"})
        r = run("--ec2-url", silent.url, "--azure-url", md.refused_url(), "--gce-url", g.url,
                "--timeout", "10", "--chroot-commands")
        assert_ok(r)
        assert cell.exists("gce") and "datasource gce" in r.err
        assert r.elapsed < 5, "the silent EC2 address must not hold up the GCE answer"
    finally:
        silent.close()


def test_auto_probe_retries_until_a_late_service(run, cell, servers):
    """Nothing listens at the EC2 address at first (refused); 1 s later a
    forwarder to the fake starts there, and the back-off retries find it."""
    target = servers(md.IMDS, user_data=b"#cloud-config\nruncmd: [[touch, /late]]\n")
    port = int(md.refused_url().rsplit(":", 1)[1])
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def forward():
        time.sleep(1.0)
        lst.bind(("127.0.0.1", port))
        lst.listen(64)
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", target.port))
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=forward, daemon=True).start()
    try:
        r = run("--ec2-url", f"http://127.0.0.1:{port}", "--gce-url", md.refused_url(),
                "--azure-url", md.refused_url(), "--timeout", "15", "--chroot-commands")
        assert_ok(r)
        assert cell.exists("late") and 0.9 < r.elapsed < 8, r.elapsed
    finally:
        lst.close()


def test_auto_probe_gives_up_at_the_overall_limit(run, cell):
    silent = md.Silent()
    try:
        r = run("--ec2-url", silent.url, "--gce-url", md.refused_url(),
                "--azure-url", md.refused_url(), "--timeout", "2")
        assert r.rc == 1 and "no datasource" in r.err, r
        assert 1.8 < r.elapsed < 6, r.elapsed
    finally:
        silent.close()


def test_file_url_and_default_seed(run, cell, servers, tmp_path):
    f = tmp_path / "ud"
    f.write_text(cloud_config({"write_files": [{"path": "/from-file", "content": "f"}]}))
    m = tmp_path / "md"
    m.write_text("instance-id: iid-file\n")
    assert_ok(run("--file", str(f), "--meta-data", str(m)))
    assert cell.read("from-file") == "f"
    assert os.path.isdir(os.path.join(cell.state, "instances/iid-file"))
    web = servers(md.Static, {"/ud": gz(cloud_config({"write_files": [
        {"path": "/from-url", "content": "u"}]}))})
    assert_ok(run("--url", f"{web.url}/ud", "--instance-id", "iid-url"))
    assert cell.read("from-url") == "u"
    # Without --seed-dir, auto finds ROOT/var/lib/cloud/seed/nocloud first.
    seed = cell.path("var/lib/cloud/seed/nocloud")
    os.makedirs(seed)
    with open(os.path.join(seed, "user-data"), "w") as fh:
        fh.write("#cloud-config\nwrite_files: [{path: /from-seed, content: s}]\n")
    with open(os.path.join(seed, "meta-data"), "w") as fh:
        fh.write("instance-id: iid-default-seed\n")
    r = run("--ec2-url", md.refused_url(), "--timeout", "1")
    assert_ok(r)
    assert cell.read("from-seed") == "s" and "nocloud" in r.err
    r = run("--url", f"{web.url}/missing")
    assert r.rc == 1 and "HTTP 404" in r.err


def test_cidata_filesystem(run, cell, tmp_path):
    """A real cidata-labelled ext4 image on a loop device, found through
    /dev/disk/by-label (made in the test's own mount namespace)."""
    seed = tmp_path / "cidata-src"
    seed.mkdir()
    (seed / "user-data").write_text("#cloud-config\nwrite_files: [{path: /from-cidata, "
                                    "content: c}]\n")
    (seed / "meta-data").write_text("instance-id: iid-cidata\n")
    img = tmp_path / "cidata.img"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "cidata", "-d", str(seed), str(img), "4M"],
                   check=True, capture_output=True)
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    if dev.returncode != 0:
        pytest.fail(f"losetup failed: {dev.stderr}", pytrace=False)
    dev = dev.stdout.strip()
    try:
        pre = ("mount -t tmpfs tmpfs /dev/disk 2>/dev/null || "
               "{ mkdir -p /run/ci-disk && mount -t tmpfs tmpfs /run/ci-disk; }; "
               f"mkdir -p /dev/disk/by-label && ln -sf {dev} /dev/disk/by-label/cidata")
        r = run("--datasource", "nocloud", pre=pre)
        assert_ok(r)
        assert cell.read("from-cidata") == "c" and f"nocloud ({dev})" in r.err
        r = run("--datasource", "nocloud", "--cidata-device", dev)
        assert_ok(r)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


# ---------------------------------------------------------------- safety and exit codes

def test_writes_never_leave_the_root(run, cell, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), cell.path("escape"))
    seed = cell.seed(cloud_config({"write_files": [
        {"path": "/escape/pwned", "content": "x"},
        {"path": "/etc/fine", "content": "ok"}]}))
    r = run("--seed-dir", seed)
    # The absolute link resolves as under chroot: inside the root.
    assert_ok(r)
    assert not (outside / "pwned").exists() and cell.read("etc/fine") == "ok"
    assert cell.read(str(outside).lstrip("/") + "/pwned") == "x"


def test_failing_command_exit_code_and_log(run, cell):
    seed = cell.seed(cloud_config({"runcmd": ["echo to-the-log; exit 7", "echo after"]}))
    r = run("--seed-dir", seed, "--chroot-commands")
    assert r.rc == 1, r
    log = cell.logtext()
    # One script, as cloud-init's: its exit ends it and is the status.
    assert "to-the-log\n" in log and "\nafter\n" not in log and "exit status 7" in log
    assert "\nto-the-log\n" not in r.err  # commands' output goes to the log only
    assert os.stat(cell.log).st_mode & 0o077 == 0


def test_usage_errors(binary):
    for args in (["--datasource", "nope"], ["--file", "/x", "--url", "http://x"],
                 ["--timeout", "0"], ["--root", "/nonexistent/dir"], ["stray"]):
        r = subprocess.run([binary, *args], capture_output=True, text=True)
        assert r.returncode == 2 and "cell-cloudinit:" in r.stderr, args
    r = subprocess.run([binary, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--datasource" in r.stdout
