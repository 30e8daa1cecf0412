# SPDX-License-Identifier: Apache-2.0
"""A cell's boot: cell-boot and cell-agent --boot-source against a fake EC2
IMDS (tests/pylib/metadata.py) and a fake SSM endpoint over HTTPS
(tests/pylib/ssm.py) whose SigV4 check is botocore's own signer; the same
fake is driven by the real AWS CLI (``aws ssm … --endpoint-url``) to prove
it. User data comes from EC2-, GCE- and Azure-shaped metadata services, as
the controller makes it. The whole path ends in a mutual-TLS ping with the
controller's client certificate.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import base64
import hashlib
import shutil
from typing import Dict, List, Optional

import pytest
import requests
import yaml

import metadata as md
from azurewire import WireServer, make_iso, ovf_env
from conftest import CELL_BUILD
from pki import CA
from ssm import SSM
from images import Image, busybox_layer, push
from wire import CellClient, WireError, pod_params, unit

BOOT = os.path.join(CELL_BUILD, "bin", "cell-boot")
AGENT = os.path.join(CELL_BUILD, "bin", "cell-agent")
CLOUDINIT = os.path.join(CELL_BUILD, "bin", "cell-cloudinit")
IID = "i-0123456789abcdef0"
PARAM = f"/kip/cells/{IID}/config"
CHUNK = 4096


# ---------------------------------------------------------------- helpers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need(path: str) -> str:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make)", pytrace=False)
    return path


class Controller:
    """The controller's PKI and the boot files it makes for one cell
    (Kip's nodemanager/parameters.go)."""

    def __init__(self, d: str):
        pki = os.path.join(d, "controller-pki")
        self.ca = CA.create(pki)
        srv = self.ca.issue_server(pki, "cell", dns=["MilpaNode"], ips=[])
        self.client = self.ca.issue_client(pki, "controller")
        self.files = {"ca.crt": open(self.ca.cert_path).read(),
                      "server.crt": srv.cert_pem.decode(),
                      "server.key": srv.key_pem.decode()}

    def payload(self, extra: Optional[dict] = None) -> str:
        """yaml.Marshal of the parameter map, as getMarshalledInstanceParameters."""
        return yaml.safe_dump({**self.files, **(extra or {})}, default_flow_style=False)

    def user_data(self, extra: Optional[dict] = None) -> str:
        """The controller's user data: every boot file as a write_files
        entry /tmp/itzo/<name>, owner root, permissions 0400."""
        files = {**self.files, **(extra or {})}
        doc = {"write_files": [{"path": f"/tmp/itzo/{n}", "owner": "root",
                                "permissions": "0400", "encoding": "b64",
                                "content": base64.b64encode(v.encode()).decode()}
                               for n, v in files.items()]}
        return "#cloud-config\n" + yaml.safe_dump(doc)

    def ping(self, port: int) -> str:
        c = CellClient("127.0.0.1", port, ca=self.ca.cert_path,
                       cert=self.client.cert_path, key=self.client.key_path)
        try:
            return c.ping()
        finally:
            c.close()


def kip_chunks(value: str, sep: str = "_") -> Dict[str, str]:
    """Kip's processInChunks: 4096-byte pieces named config_0, config_1, …"""
    out, i = {}, 0
    b = value.encode()
    while b:
        out[f"config{sep}{i}"] = b[:CHUNK].decode()
        b = b[CHUNK:]
        i += 1
    return out


class RoleIMDS(md.IMDS):
    """IMDS whose instance profile hands out the next credentials in a list
    on each fetch (the last one sticks), as IMDS rotates them."""

    def __init__(self, creds: List[dict], **kw):
        super().__init__(**kw)
        self.creds = list(creds)
        self.cred_fetches = 0

    def handle(self, method, path, headers):
        if path.rstrip("/").endswith("security-credentials/cell-role"):
            ok, _ = self._authorized(headers)
            if ok:
                with self.lock:
                    c = self.creds[0] if len(self.creds) == 1 else self.creds.pop(0)
                    self.cred_fetches += 1
                return 200, {"Content-Type": "text/plain"}, json.dumps(c)
        return super().handle(method, path, headers)


def creds(akid: str, secret: str, token: str, expires: float) -> dict:
    return {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": akid,
            "SecretAccessKey": secret, "Token": token,
            "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            "LastUpdated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


class Cloud:
    """A fake EC2 (IMDS with an instance profile) and SSM over HTTPS."""

    def __init__(self, d: str, cred_list: Optional[List[dict]] = None, **imds_kw):
        tls = os.path.join(d, "ssm-pki")
        self.tls_ca = CA.create(tls, cn="Fake AWS CA")
        srv = self.tls_ca.issue_server(tls, "ssm", dns=["localhost"], ips=["127.0.0.1"])
        self.ssm = SSM(cert=srv.cert_path, key=srv.key_path)
        c = cred_list or [creds("ASIAROLEKEY000000001", "roleSecret1/abcdefghijklmnopqrstuvwxyz",
                                "roleToken1", time.time() + 6 * 3600)]
        for x in c:
            self.ssm.add_key(x["AccessKeyId"], x["SecretAccessKey"], x["Token"])
        self.imds = RoleIMDS(c, **imds_kw)
        self.operator = ("AKIAOPERATOR00000001", "operatorSecret/abcdefghijklmnopqrstuvw")
        self.ssm.add_key(*self.operator)

    def env(self) -> dict:
        """What cell-boot (or the agent that runs it) sees."""
        return {"CELL_BOOT_EC2_URL": self.imds.url, "AWS_ENDPOINT_URL_SSM": self.ssm.url,
                "AWS_CA_BUNDLE": self.tls_ca.cert_path, "CELL_BOOT_RETRY_MS": "200"}

    def aws(self, *args: str, secret: Optional[str] = None) -> subprocess.CompletedProcess:
        """The real AWS CLI, as the operator, against the fake."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
               "AWS_ACCESS_KEY_ID": self.operator[0],
               "AWS_SECRET_ACCESS_KEY": secret or self.operator[1],
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_CA_BUNDLE": self.tls_ca.cert_path,
               "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
               "AWS_PAGER": ""}
        return subprocess.run(["aws", "ssm", *args, "--endpoint-url", self.ssm.url,
                               "--output", "json"], capture_output=True, text=True,
                              env=env, timeout=60)

    def put(self, name: str, value: str) -> None:
        """PutParameter as the controller does (SecureString), through the CLI."""
        r = self.aws("put-parameter", "--name", name, "--type", "SecureString",
                     "--value", value, "--overwrite")
        assert r.returncode == 0, r.stderr

    def close(self):
        self.ssm.close()
        self.imds.close()


@pytest.fixture
def cloud(tmp_path):
    c = Cloud(str(tmp_path))
    yield c
    c.close()


@pytest.fixture
def controller(tmp_path):
    return Controller(str(tmp_path))


def run_boot(*args: str, env: Optional[dict] = None, timeout: float = 60):
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
    base.update(env or {})
    return subprocess.run([need(BOOT), *map(str, args)], capture_output=True, text=True,
                          env=base, timeout=timeout)


def listing(d: str) -> Dict[str, str]:
    if not os.path.isdir(d):
        return {}
    return {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}


class Agent:
    def __init__(self, d: str, *args: str, env: Optional[dict] = None, verbose: bool = True,
                 port: Optional[int] = None, binary: str = AGENT):
        need(binary)
        os.makedirs(d, exist_ok=True)
        self.dir = d
        self.port = port or free_port()
        self.log_path = os.path.join(d, "agent.log")
        # No pod network on the host's own namespace (as test_agent_api).
        base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                "CELL_AGENT_POD_NETWORK": "off"}
        base.update(env or {})
        self.args = [binary, "--state-dir", os.path.join(d, "state"), "--image-cache",
                     os.path.join(d, "cache"), *(["-v"] if verbose else []), *args]
        if port is None:  # else the port comes from cell_config.yaml
            self.args[1:1] = ["--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, env=base, start_new_session=True)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_ping(self, ctl: Controller, timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"cell-agent exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                return ctl.ping(self.port)
            except (requests.RequestException, WireError, OSError):
                time.sleep(0.1)
        pytest.fail(f"no pong in {timeout}s:\n{self.log()[-3000:]}")

    def wait_log(self, text: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"{text!r} never logged:\n{self.log()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def agents():
    made: List[Agent] = []

    def start(*a, **kw) -> Agent:
        x = Agent(*a, **kw)
        made.append(x)
        return x
    yield start
    for a in made:
        a.stop()


# ---------------------------------------------------------------- the fake SSM, proven

def test_fake_ssm_against_the_aws_cli(cloud):
    """put-parameter/get-parameter of the real CLI work against the fake;
    a wrong secret is refused by the fake's botocore check, and SecureString
    needs --with-decryption."""
    cloud.put(PARAM, "ca.crt: x\n")
    r = cloud.aws("get-parameter", "--name", PARAM, "--with-decryption")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["Parameter"]["Value"] == "ca.crt: x\n"
    r = cloud.aws("get-parameter", "--name", PARAM)
    assert r.returncode == 0 and json.loads(r.stdout)["Parameter"]["Value"] != "ca.crt: x\n"
    r = cloud.aws("put-parameter", "--name", PARAM, "--type", "SecureString", "--value", "y")
    assert r.returncode != 0 and "ParameterAlreadyExists" in r.stderr
    r = cloud.aws("get-parameter", "--name", PARAM + "-missing")
    assert r.returncode != 0 and "ParameterNotFound" in r.stderr
    r = cloud.aws("get-parameter", "--name", PARAM, secret="wrong" * 8)
    assert r.returncode != 0 and "InvalidSignatureException" in r.stderr
    assert cloud.ssm.outcomes()[-1][3] == "InvalidSignatureException"


# ---------------------------------------------------------------- SSM

def test_ssm_files_written_0600_with_role_credentials(cloud, controller, tmp_path):
    cloud.put(PARAM, controller.payload({"itzo_url": "https://example.invalid/x"}))
    boot = tmp_path / "boot"
    r = run_boot("--source", "ssm", "--boot-dir", boot, env=cloud.env())
    assert r.returncode == 0, r.stderr
    got = listing(str(boot))
    assert got == {**controller.files, "itzo_url": "https://example.invalid/x"}
    for n in got:
        assert os.stat(boot / n).st_mode & 0o777 == 0o600
    # Signed with the instance profile's key and session token.
    gets = cloud.ssm.outcomes("GetParameter")
    assert gets == [("GetParameter", "ASIAROLEKEY000000001", PARAM, "ok")]
    assert f"instance {IID} (us-east-1)" in r.stderr


@pytest.mark.parametrize("sep", ["_", "-"])
def test_ssm_chunked_both_spellings(cloud, controller, tmp_path, sep):
    extra = {"cell_config.yaml": yaml.safe_dump({f"k{i}": "v" * 60 for i in range(150)})}
    value = controller.payload(extra)
    chunks = kip_chunks(value, sep)
    assert len(chunks) >= 3
    for name, v in chunks.items():
        cloud.ssm.put(f"/kip/cells/{IID}/{name}", v)
    boot = tmp_path / "boot"
    r = run_boot("--source", "ssm", "--boot-dir", boot, env=cloud.env())
    assert r.returncode == 0, r.stderr
    assert listing(str(boot)) == {**controller.files, **extra}
    assert f"joined {len(chunks)} chunks {PARAM}{sep}0" in r.stderr


def test_ssm_credentials_expire_mid_boot(tmp_path, controller):
    """The first role key is near its expiry (refreshed before the next
    call); the second is revoked by the service while IMDS still says it
    is valid (ExpiredTokenException: fetched again at once)."""
    now = time.time()
    a = creds("ASIAROLEKEYAAAAAAAAA", "secretA/abcdefghijklmnopqrstuvwxyz0123", "tokA", now + 60)
    b = creds("ASIAROLEKEYBBBBBBBBB", "secretB/abcdefghijklmnopqrstuvwxyz0123", "tokB",
              now + 6 * 3600)
    c = creds("ASIAROLEKEYCCCCCCCCC", "secretC/abcdefghijklmnopqrstuvwxyz0123", "tokC",
              now + 6 * 3600)
    cloud = Cloud(str(tmp_path), [a, b, c])
    try:
        cloud.ssm.add_key(b["AccessKeyId"], b["SecretAccessKey"], b["Token"], expires=now + 1)
        time.sleep(1.1)
        value = controller.payload({"filler": "x" * 9000})
        for name, v in kip_chunks(value).items():
            cloud.ssm.put(f"/kip/cells/{IID}/{name}", v)
        boot = tmp_path / "boot"
        r = run_boot("--source", "ssm", "--boot-dir", boot, env=cloud.env())
        assert r.returncode == 0, r.stderr
        assert listing(str(boot))["server.key"] == controller.files["server.key"]
        used = [(k, o) for op, k, _, o in cloud.ssm.outcomes("GetParameter")]
        keys = [k for k, _ in used]
        assert keys[0] == a["AccessKeyId"]
        assert (b["AccessKeyId"], "ExpiredTokenException") in used
        # After the refresh: every chunk with C, then the probe past the last.
        assert keys[-1] == c["AccessKeyId"] and used[-1][1] == "ParameterNotFound"
        assert (c["AccessKeyId"], "ok") in used
        assert cloud.imds.cred_fetches >= 3
        assert "fetching fresh credentials" in r.stderr
    finally:
        cloud.close()


def test_ssm_wrong_signature_is_refused(tmp_path, controller):
    good = creds("ASIAROLEKEY000000009", "theRightSecret/abcdefghijklmnopqrstuv", "tok9",
                 time.time() + 3600)
    cloud = Cloud(str(tmp_path), [good])
    try:
        cloud.put(PARAM, controller.payload())
        cloud.imds.creds = [dict(good, SecretAccessKey="theWrongSecret/abcdefghijklmnopqrstuv")]
        boot = tmp_path / "boot"
        r = run_boot("--source", "ssm", "--boot-dir", boot, env=cloud.env())
        assert r.returncode == 1
        assert "InvalidSignatureException" in r.stderr
        assert cloud.ssm.outcomes("GetParameter")[-1][3] == "InvalidSignatureException"
        assert listing(str(boot)) == {}
    finally:
        cloud.close()


@pytest.mark.parametrize("payload,why", [
    ("ca.crt: |\n  x\nserver.crt: [unclosed\n", "malformed boot payload: line"),
    ("ca.crt: a\nserver.crt: b\nserver.key: c\n../escape: d\n", "not a plain file name"),
    ("ca.crt: a\nserver.crt: {nested: map}\nserver.key: c\n", "nested map"),
    ("ca.crt: a\nserver.crt: b\n", "no server.key"),
    ("- just\n- a list\n", "a list"),
])
def test_ssm_malformed_payload_writes_nothing(cloud, tmp_path, payload, why):
    cloud.put(PARAM, payload)
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "keep").write_text("old")
    r = run_boot("--source", "ssm", "--boot-dir", boot, env=cloud.env())
    assert r.returncode == 1, r.stderr
    assert why in r.stderr
    assert listing(str(boot)) == {"keep": "old"}
    assert not (tmp_path / "escape").exists()


def test_whole_path_ssm_parameter_appears_later(cloud, controller, agents, tmp_path):
    """The agent starts before the controller has written the parameter
    (it does so only after the instance runs): it waits, says why, and
    answers ping with the controller's certificate once the CLI put it."""
    a = agents(str(tmp_path), "--boot-dir", str(tmp_path / "itzo"), "--boot-source", "ssm",
               env=cloud.env())
    a.wait_log("is not there yet")
    a.wait_log("next in")
    assert a.proc.poll() is None
    cloud.put(PARAM, controller.payload({"cell_config.yaml": 'itzoFlag-insecure-registry: '
                                                             '"reg.local:5000"\n'}))
    assert a.wait_ping(controller) == "pong"
    assert os.stat(tmp_path / "itzo" / "server.key").st_mode & 0o777 == 0o600


def test_restarted_agent_serves_with_its_files_when_ssm_is_gone(cloud, controller, agents,
                                                                tmp_path):
    """A cell restarting its agent has its files; the parameter may be gone
    (or SSM down): one failed attempt, then it serves with what it has."""
    boot = tmp_path / "itzo"
    boot.mkdir()
    for n, v in controller.files.items():
        (boot / n).write_text(v)
    a = agents(str(tmp_path), "--boot-dir", str(boot), "--boot-source", "ssm", env=cloud.env())
    assert a.wait_ping(controller) == "pong"
    assert "failed; using the files already in" in a.log()
    assert "is not there yet" in a.log()


def test_auto_prefers_ssm_on_aws_then_user_data(cloud, controller, tmp_path):
    """auto on EC2 with an instance profile: SSM; without the parameter,
    the user data (a controller that does not use the parameter store)."""
    cloud.imds.user_data = controller.user_data().encode()
    boot = tmp_path / "boot"
    r = run_boot("--source", "auto", "--boot-dir", boot, env=cloud.env())
    assert r.returncode == 0, r.stderr
    assert "trying user data" in r.stderr and "ec2 (IMDSv2)" in r.stderr
    assert listing(str(boot)) == controller.files
    assert cloud.ssm.outcomes("GetParameter")  # SSM was asked first


# ---------------------------------------------------------------- user data

def refused() -> str:
    return md.refused_url()


@pytest.mark.parametrize("cloud_kind", ["ec2", "gce", "azure"])
def test_user_data_boot_on_each_cloud(controller, tmp_path, cloud_kind):
    ud = controller.user_data({"itzo_version": "1.0.0\n"}).encode()
    if cloud_kind == "ec2":
        s = md.IMDS(user_data=ud)
    elif cloud_kind == "gce":
        s = md.GCE(attributes={"user-data": ud.decode()})
    else:
        s = md.Azure(user_data=ud)
    try:
        env = {"CELL_BOOT_EC2_URL": refused(), "CELL_BOOT_GCE_URL": refused(),
               "CELL_BOOT_AZURE_URL": refused()}
        env[f"CELL_BOOT_{cloud_kind.upper()}_URL"] = s.url
        boot = tmp_path / "boot"
        r = run_boot("--source", "userdata", "--boot-dir", boot, "--timeout", "5", env=env)
        assert r.returncode == 0, r.stderr
        assert listing(str(boot)) == {**controller.files, "itzo_version": "1.0.0\n"}
        for n in controller.files:
            assert os.stat(boot / n).st_mode & 0o777 == 0o400
        assert f"user data from {cloud_kind}" in r.stderr
    finally:
        s.close()


def test_user_data_without_boot_files_waits(tmp_path):
    s = md.IMDS(user_data=b"#cloud-config\nruncmd: [\"echo hi\"]\n")
    try:
        r = run_boot("--source", "userdata", "--boot-dir", tmp_path / "boot", "--timeout", "3",
                     env={"CELL_BOOT_EC2_URL": s.url, "CELL_BOOT_GCE_URL": refused(),
                          "CELL_BOOT_AZURE_URL": refused()})
        assert r.returncode == 1 and "has no /tmp/itzo/ca.crt" in r.stderr
    finally:
        s.close()


def test_whole_path_user_data_cloudinit_agent_ping(controller, agents, tmp_path):
    """User data as the controller makes it → cell-cloudinit writes
    /tmp/itzo under its root → the agent (started first, waiting under
    --boot-source dir) boots from it → pong with the controller's cert."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    itzo = root / "tmp" / "itzo"
    a = agents(str(tmp_path), "--boot-dir", str(itzo), "--boot-source", "dir",
               env={"CELL_BOOT_RETRY_MS": "100"})
    a.wait_log("waiting for ca.crt, server.crt and server.key")
    s = md.IMDS(user_data=controller.user_data({
        "cell_config.yaml": 'itzoFlag-insecure-registry: "r.local:5000"\nfluentd: "on"\n'}).encode())
    try:
        r = subprocess.run([need(CLOUDINIT), "--root", str(root), "--datasource", "ec2",
                            "--ec2-url", s.url, "--state-dir", str(tmp_path / "ci-state"),
                            "--log-file", str(tmp_path / "ci.log")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        s.close()
    assert a.wait_ping(controller) == "pong"
    log = a.log()
    assert "cell_config.yaml: fluentd kept for add-ons" in log


# ---------------------------------------------------------------- cell_config.yaml

@pytest.mark.parametrize("value,debug", [('"true"', True), ('"false"', False), ("yes", True),
                                         ('"off"', False), ("false", False), ('""', True)])
def test_itzoflag_booleans(controller, agents, tmp_path, value, debug):
    """itzoFlag-verbose (a boolean flag) is --verbose or nothing, never
    "--verbose false"; itzoFlag-port (a flag with a value) sets the port;
    other keys stay for add-ons and are logged."""
    boot = tmp_path / "boot"
    boot.mkdir()
    for n, v in controller.files.items():
        (boot / n).write_text(v)
    port = free_port()
    (boot / "cell_config.yaml").write_text(
        f"itzoFlag-verbose: {value}\nitzoFlag-port: \"{port}\"\nmyaddon: x\n")
    a = agents(str(tmp_path), "--boot-dir", str(boot), "--boot-source", "dir",
               verbose=False, port=port)
    assert a.wait_ping(controller) == "pong"
    log = a.log()
    assert "cell_config.yaml: myaddon kept for add-ons" in log
    assert ("debug: " in log) == debug, log


def test_itzoflag_not_a_boolean_is_ignored_loudly(controller, agents, tmp_path):
    boot = tmp_path / "boot"
    boot.mkdir()
    for n, v in controller.files.items():
        (boot / n).write_text(v)
    (boot / "cell_config.yaml").write_text("itzoFlag-verbose: maybe\n")
    a = agents(str(tmp_path), "--boot-dir", str(boot), "--boot-source", "dir")
    assert a.wait_ping(controller) == "pong"
    assert 'itzoFlag-verbose: "maybe" is not a boolean; ignored' in a.log()


# ---------------------------------------------------------------- self-update

def install_tree(d: str) -> str:
    """bin/ and lib/cell/ as `make install` lays them out; returns bin/cell-agent."""
    for sub, names in (("bin", ("cell-agent", "cell-monitor", "cell-boot", "cell-pull",
                                "cell-unpack")),):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        for n in names:
            shutil.copy2(os.path.join(CELL_BUILD, "bin", n), os.path.join(d, sub, n))
    return os.path.join(d, "bin", "cell-agent")


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_self_update_by_reexec_keeps_the_pod(controller, agents, registry, tmp_path):
    """itzo_version/itzo_url ask for another agent: a wrong checksum is
    refused (the running agent stays and says so); the right one replaces
    the binary atomically and the agent re-execs in place (same pid); the
    pod's unit keeps running, is re-adopted, restartCount stays 0."""
    push(registry, "t/bb", "v1", Image([busybox_layer()], config={"Cmd": ["/bin/sh"]}))
    img = registry.ref("t/bb", "v1")
    binary = install_tree(str(tmp_path / "inst"))
    boot = tmp_path / "boot"
    boot.mkdir()
    for n, v in controller.files.items():
        (boot / n).write_text(v)
    a = agents(str(tmp_path), "--boot-dir", str(boot), "--insecure-registry", registry.host,
               binary=binary, env={"CELL_AGENT_BACKOFF_UNIT_MS": "50", "CELL_CGROUP_NEST": "1"})
    a.wait_ping(controller)
    c = CellClient("127.0.0.1", a.port, ca=controller.ca.cert_path,
                   cert=controller.client.cert_path, key=controller.client.key_path)
    c.update_pod(pod_params("ns_pod", units=[unit("web", img, command=[
        "/bin/sh", "-c", "exec sleep 1000"])], terminationGracePeriodSeconds=0))

    def web(st):
        return {u["name"]: u for u in st["unitStatus"]}.get("web", {})
    before = c.wait_status(lambda st: "running" in (web(st).get("state") or {}))
    old = sha256(binary)
    new_bin = open(binary, "rb").read() + b"\0cell self-update test build 9.9.9\0"
    files = {"/rel/cell-agent-v9.9.9": new_bin,
             "/rel/cell-agent-v9.9.9.sha256": (hashlib.sha256(b"other").hexdigest() +
                                               "  cell-agent-v9.9.9\n").encode()}
    web_srv = md.Static(files)
    try:
        (boot / "itzo_url").write_text(web_srv.url + "/rel/\n")
        (boot / "itzo_version").write_text("v9.9.9\n")
        os.kill(a.proc.pid, signal.SIGHUP)
        a.wait_log("self-update REFUSED")
        a.wait_log("no new agent installed")
        assert sha256(binary) == old and a.proc.poll() is None
        assert controller.ping(a.port) == "pong"
        assert not [n for n in os.listdir(os.path.dirname(binary)) if n.startswith(".")]

        files["/rel/cell-agent-v9.9.9.sha256"] = (hashlib.sha256(new_bin).hexdigest() +
                                                  "  cell-agent-v9.9.9\n").encode()
        os.kill(a.proc.pid, signal.SIGHUP)
        a.wait_log("re-executing")
        a.wait_log("serving mutual TLS", timeout=30)
        assert a.proc.poll() is None  # exec keeps the pid
        assert sha256(binary) == hashlib.sha256(new_bin).hexdigest()
        assert os.readlink(f"/proc/{a.proc.pid}/exe") == binary  # the new file, not deleted
        assert a.wait_ping(controller) == "pong"
        after = c.wait_status(lambda st: "running" in (web(st).get("state") or {}))
        assert web(after)["restartCount"] == 0
        assert web(after)["state"] == web(before)["state"]  # same startedAt: never restarted
        # The marker: the next start does not fetch the same version again.
        assert open(os.path.join(a.dir, "state", "agent-update")).read().startswith("v9.9.9 ")
        n_gets = len(web_srv.paths("GET"))
        os.kill(a.proc.pid, signal.SIGHUP)
        a.wait_log("no new agent installed (")
        assert len(web_srv.paths("GET")) == n_gets
    finally:
        web_srv.close()
        c.update_pod(pod_params("ns_pod", units=[], terminationGracePeriodSeconds=0))
        c.wait_status(lambda st: not st["unitStatus"], timeout=20)
        c.close()


@pytest.mark.parametrize("machine,name", [("x86_64", "cell-agent-v9.9.9"),
                                          ("aarch64", "cell-agent-v9.9.9-arm64"),
                                          ("riscv64", None)])
def test_self_update_picks_the_file_for_the_machine(tmp_path, machine, name):
    """cell-boot --update-only fetches the agent for the machine it runs on
    (uname -m, CELL_BOOT_MACHINE here): the x86-64 name as it always was,
    -arm64 on aarch64, nothing for a machine no release is built for; the
    checksum rule is the same for both."""
    agent = tmp_path / "bin" / "cell-agent"
    agent.parent.mkdir()
    agent.write_bytes(b"old agent")
    boot = tmp_path / "boot"
    boot.mkdir()
    bins = {n: f"agent {n}".encode() for n in ("cell-agent-v9.9.9", "cell-agent-v9.9.9-arm64")}
    files = {}
    for n, data in bins.items():
        files[f"/rel/{n}"] = data
        files[f"/rel/{n}.sha256"] = f"{hashlib.sha256(data).hexdigest()}  {n}\n".encode()
    web = md.Static(files)
    try:
        (boot / "itzo_url").write_text(web.url + "/rel\n")
        (boot / "itzo_version").write_text("v9.9.9\n")
        r = run_boot("--boot-dir", boot, "--update-only",
                     "--agent-path", agent, "--agent-version", "1.0.0",
                     "--state-dir", tmp_path / "state", env={"CELL_BOOT_MACHINE": machine})
        got = web.paths("GET")
        if name is None:
            assert r.returncode == 0, r.stderr
            assert "no release is built for this machine (riscv64)" in r.stderr
            assert got == [] and agent.read_bytes() == b"old agent"
        else:
            assert r.returncode == 3, r.stderr
            assert got == [f"/rel/{name}.sha256", f"/rel/{name}"], got
            assert agent.read_bytes() == bins[name]
    finally:
        web.close()


# ---------------------------------------------------------------- Azure's provisioning medium

def kernel_fs(name: str) -> bool:
    with open("/proc/filesystems") as f:
        return any(line.split()[-1] == name for line in f if line.strip())


def loop(image: str) -> str:
    dev = subprocess.run(["losetup", "-f", "--show", "-r", image], capture_output=True,
                         text=True)
    if dev.returncode != 0:
        pytest.fail(f"losetup: {dev.stderr}", pytrace=False)
    return dev.stdout.strip()


@pytest.fixture
def ovf_iso(tmp_path, controller):
    """ovf-env.xml with the controller's user data as CustomData, on an
    ISO 9660 image (xorriso) attached to a loop device: the provisioning
    CD-ROM. Kernels built without iso9660 and udf (this project's test
    machines run one) cannot mount it; there the same file goes on an ext4
    image, which the reader also accepts, and the ISO is still used to
    check the error an operator would see."""
    ovf = ovf_env(controller.user_data().encode())
    iso = make_iso(str(tmp_path / "ovf"), ovf, str(tmp_path / "ovf.iso"))
    devs = [loop(iso)]
    if not kernel_fs("iso9660"):
        img = str(tmp_path / "ovf.img")
        subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tmp_path / "ovf"), img, "4M"],
                       check=True, capture_output=True)
        devs.append(loop(img))
    yield devs
    for d in devs:
        subprocess.run(["losetup", "-d", d], capture_output=True)


def mounted(dev: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split(" - ")[1].split()[1] == dev for line in f if " - " in line)


@pytest.mark.parametrize("tool", ["cell-boot", "cell-cloudinit"])
def test_azure_custom_data_from_the_provisioning_iso(controller, ovf_iso, tmp_path, tool):
    """Kip's Azure backend sends osProfile.customData: it comes on the
    provisioning medium, not in IMDS's userData (empty here). Both tools
    read it from the mounted ISO (read-only, unmounted after) and report
    ready to the wire server."""
    imds = md.Azure(user_data=None)
    wire = WireServer()
    iso_dev, ovf_iso = ovf_iso[0], ovf_iso[-1]
    if iso_dev != ovf_iso:
        r = run_boot("--source", "userdata", "--boot-dir", tmp_path / "x", "--timeout", "3",
                     env={"CELL_BOOT_EC2_URL": refused(), "CELL_BOOT_GCE_URL": refused(),
                          "CELL_BOOT_AZURE_URL": imds.url,
                          "CELL_BOOT_AZURE_OVF_DEVICE": iso_dev})
        assert r.returncode == 1
        assert f"mount {iso_dev} read-only (udf, iso9660, ext4): " in r.stderr
    try:
        if tool == "cell-boot":
            r = run_boot("--source", "userdata", "--boot-dir", tmp_path / "boot",
                         "--timeout", "5",
                         env={"CELL_BOOT_EC2_URL": refused(), "CELL_BOOT_GCE_URL": refused(),
                              "CELL_BOOT_AZURE_URL": imds.url,
                              "CELL_BOOT_AZURE_OVF_DEVICE": ovf_iso,
                              "CELL_BOOT_AZURE_WIRESERVER": wire.host})
            boot = tmp_path / "boot"
        else:
            root = tmp_path / "root"
            (root / "etc").mkdir(parents=True)
            (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
            (root / "etc/group").write_text("root:x:0:\n")
            r = subprocess.run([need(CLOUDINIT), "--root", str(root), "--datasource", "azure",
                                "--azure-url", imds.url, "--azure-ovf-device", ovf_iso,
                                "--azure-wireserver", wire.host,
                                "--state-dir", str(tmp_path / "st"),
                                "--log-file", str(tmp_path / "ci.log")],
                               capture_output=True, text=True, timeout=60)
            boot = root / "tmp" / "itzo"
        assert r.returncode == 0, r.stderr
        assert "azure (ovf-env.xml)" in r.stderr
        assert listing(str(boot)) == controller.files
        assert wire.ready_reports() == [{"incarnation": "1", "container": wire.container_id,
                                         "instance": wire.instance_id, "state": "Ready"}]
        post = [h for m, p, h in wire.requests if m == "POST"][0]
        assert post.get("x-ms-agent-name") == "WALinuxAgent"
        assert not mounted(ovf_iso)
    finally:
        imds.close()
        wire.close()


def test_azure_without_a_medium_falls_back_to_imds(controller, tmp_path):
    imds = md.Azure(user_data=controller.user_data().encode())
    try:
        r = run_boot("--source", "userdata", "--boot-dir", tmp_path / "boot", "--timeout", "5",
                     env={"CELL_BOOT_EC2_URL": refused(), "CELL_BOOT_GCE_URL": refused(),
                          "CELL_BOOT_AZURE_URL": imds.url,
                          "CELL_BOOT_AZURE_OVF_DEVICE": str(tmp_path / "no-such-device")})
        assert r.returncode == 1 and "no-such-device" in r.stderr
        r = run_boot("--source", "userdata", "--boot-dir", tmp_path / "boot", "--timeout", "5",
                     env={"CELL_BOOT_EC2_URL": refused(), "CELL_BOOT_GCE_URL": refused(),
                          "CELL_BOOT_AZURE_URL": imds.url})
        assert r.returncode == 0, r.stderr
        assert listing(str(tmp_path / "boot")) == controller.files
        assert "user data from azure " in r.stderr
    finally:
        imds.close()


# ---------------------------------------------------------------- install, init systems, custom images

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", REPO, f"OUT={CELL_BUILD}", *args],
                          capture_output=True, text=True, timeout=600)


def unit_keys(path: str) -> Dict[str, List[str]]:
    keys: Dict[str, List[str]] = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    return keys


def test_make_install_units_and_helpers_beside_the_agent(controller, agents, tmp_path):
    """make install PREFIX= DESTDIR= lays out binaries, the pull module,
    docs, systemd units (checked by systemd-analyze) and OpenRC scripts;
    the installed agent finds cell-boot beside itself and boots."""
    prefix = str(tmp_path / "prefix")
    r = make("install", f"PREFIX={prefix}", f"SYSTEMD_DIR={prefix}/systemd",
             f"OPENRC_DIR={prefix}/openrc")
    assert r.returncode == 0, r.stderr
    for n in ("cell-agent", "cell-boot", "cell-monitor", "cell-cloudinit", "cell-pull"):
        assert os.access(f"{prefix}/bin/{n}", os.X_OK), n
    assert os.access(f"{prefix}/bin/cell-unpack", os.X_OK)  # the agent's helper
    assert os.path.isfile(f"{prefix}/share/doc/cell/boot.md")
    units = [f"{prefix}/systemd/cell-agent.service", f"{prefix}/systemd/cell-cloudinit.service"]
    v = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True)
    assert v.returncode == 0 and not v.stderr.strip() and not v.stdout.strip(), v.stderr
    agent = unit_keys(units[0])
    assert agent["ExecStart"] == [f"{prefix}/bin/cell-agent"]
    assert "cell-cloudinit.service" in agent["After"][0].split()
    assert agent["Restart"] == ["always"] and agent["KillMode"] == ["process"]
    assert agent["OOMScoreAdjust"] == ["-1000"]
    assert unit_keys(units[1])["Before"] == ["cell-agent.service"]
    for s in ("cell-agent", "cell-cloudinit"):
        p = f"{prefix}/openrc/{s}"
        text = open(p).read()
        assert text.startswith("#!/sbin/openrc-run") and os.access(p, os.X_OK)
        assert f"{prefix}/bin/{s}" in text and "@PREFIX@" not in text
        assert subprocess.run(["sh", "-n", p]).returncode == 0
    assert "after cell-cloudinit" in open(f"{prefix}/openrc/cell-agent").read()
    # The installed agent runs the installed cell-boot (nothing points at build/).
    imds = md.IMDS(user_data=controller.user_data().encode())
    try:
        a = agents(str(tmp_path / "run"), "--boot-dir", str(tmp_path / "itzo"),
                   "--boot-source", "userdata", binary=f"{prefix}/bin/cell-agent",
                   env={"CELL_BOOT_EC2_URL": imds.url, "CELL_BOOT_GCE_URL": refused(),
                        "CELL_BOOT_AZURE_URL": refused()})
        assert a.wait_ping(controller) == "pong"
    finally:
        imds.close()


class Flaky(md.Static):
    """Static files, but the first `fail` GETs answer 503."""

    def __init__(self, files, fail: int):
        self.fail = fail
        super().__init__(files)

    def handle(self, method, path, headers):
        with self.lock:
            self.fail -= 1
            if self.fail >= 0:
                return 503, {}, "Service Unavailable"
        return super().handle(method, path, headers)


def run_cloudinit_chrooted(cell, user_data: str, tmp_path) -> subprocess.CompletedProcess:
    ud = tmp_path / "user-data"
    ud.write_text(user_data)
    script = ('mount --bind "$1" "$1" || exit 99; shift; "$@"')
    return subprocess.run(
        ["unshare", "--mount", "--uts", "--", "/bin/sh", "-c", script, "sh", cell.root,
         need(CLOUDINIT), "--root", cell.root, "--state-dir", cell.state, "--log-file",
         cell.log, "--datasource", "file", "--file", str(ud), "--chroot-commands"],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"})


@pytest.fixture(scope="module")
def release():
    """Built once for the three cases, which only read the tarball."""
    r = make("release")
    assert r.returncode == 0, r.stderr
    version = open(os.path.join(REPO, "VERSION")).read().strip()
    tarball = os.path.join(CELL_BUILD, f"cell-{version}-linux-{os.uname().machine}.tar.gz")
    want = open(tarball + ".sha256").read().split()[0]
    assert want == sha256(tarball)
    return tarball, want


@pytest.mark.parametrize("good", [True, False, "other-machine"])
def test_custom_image_cloud_config_installs_the_release(release, tmp_path, good):
    """The documented snippet, run by a cloud-init (ours, in a busybox
    root): it picks the tarball for its machine (uname -m), retries a
    failing download, checks the tarball's SHA-256, unpacks it and, with no
    init system there, says how to start the agent. A wrong hash installs
    nothing; a machine with only a placeholder fetches nothing."""
    from test_cloudinit import Cell
    tarball, want = release
    cell = Cell(str(tmp_path / "cell"))
    web = Flaky({"/rel/cell.tar.gz": open(tarball, "rb").read()}, fail=2)
    try:
        snippet = open(os.path.join(REPO, "image-build/init/custom-image.cloud-config")).read()
        v = subprocess.run([need(CLOUDINIT), "--validate", "/dev/stdin"], input=snippet,
                           capture_output=True, text=True)
        assert v.returncode == 0 and "0 error(s), 0 warning(s)" in v.stdout, v.stdout
        here = os.uname().machine
        ud = snippet.replace("@URL@", web.url + "/rel/cell.tar.gz")
        ud = ud.replace('"@SHA256@"', f'"{want if good else "0" * 64}"')
        ud = ud.replace('"@SHA256_AARCH64@"]', '"@SHA256_AARCH64@", "3"]')
        if good == "other-machine":  # this machine's triple names another
            ud = ud.replace(f"cell-install, {here},", "cell-install, mips64,")
        r = run_cloudinit_chrooted(cell, ud, tmp_path)
        log = open(cell.log).read()
        installed = cell.path("usr/local/bin/cell-agent")
        if good == "other-machine":
            assert r.returncode != 0
            assert f"no release for this machine ({here}); nothing installed" in log
            assert not web.paths("GET")
            assert not os.path.exists(installed)
        elif good:
            assert r.returncode == 0, log[-3000:]
            assert sha256(installed) == sha256(os.path.join(CELL_BUILD, "bin", "cell-agent"))
            assert os.access(cell.path("usr/local/bin/cell-unpack"), os.X_OK)
            assert os.path.isfile(cell.path("etc/systemd/system/cell-agent.service"))
            assert os.access(cell.path("etc/init.d/cell-agent"), os.X_OK)
            assert "download" in log and "failed (try 1)" in log and "(try 2)" in log
            assert "no systemd or OpenRC here" in log
        else:
            assert r.returncode != 0
            assert "giving up; nothing installed" in log
            assert f"want {'0' * 64}" in log
            assert not os.path.exists(installed)
    finally:
        web.close()


# ---------------------------------------------------------------------------
# cell-boot --grow-root: the root grown to the disk at boot


def grow_root(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([need(BOOT), "--grow-root", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_grow_root_at_boot(tmp_path):
    """The boot step on a loop device (CELL_AGENT_ROOT_DEVICE): one try,
    one line, exit 0 whatever happens. Unmounted here (the offline path:
    e2fsck and resize2fs), then again with nothing to grow (quick: the
    superblock says so), off by CELL_BOOT_GROW_ROOT=0, and a bad device
    (a warning, exit 0)."""
    from test_agent_api import ext4_bytes, grown_disk, part_sectors
    if os.geteuid() != 0:
        pytest.fail("--grow-root needs root (loop devices)")
    with grown_disk(tmp_path, mbr=True) as (dev, part, name, before):
        env = {"CELL_AGENT_ROOT_DEVICE": part}
        off = grow_root({**env, "CELL_BOOT_GROW_ROOT": "0"})
        assert off.returncode == 0 and "root grow: off" in off.stderr, off
        assert ext4_bytes(part) == before and part_sectors(name) * 512 < 40 << 20
        r = grow_root(env)
        assert r.returncode == 0, r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "root grown from 31 to 159 MiB" in lines[0], r.stderr
        assert part_sectors(name) * 512 > 150 << 20
        assert ext4_bytes(part) > 4 * before
        t0 = time.monotonic()
        r = grow_root(env)
        took = time.monotonic() - t0
        assert r.returncode == 0 and "root: nothing to grow (159 MiB" in r.stderr, r
        assert took < 2, took
        print(f"\nnothing to grow: {took * 1000:.0f} ms")
    r = grow_root({"CELL_AGENT_ROOT_DEVICE": "/dev/null"})
    assert r.returncode == 0 and "warning: root not grown" in r.stderr, r


def test_grow_root_at_boot_mounted(tmp_path):
    """The cell's case: the partition mounted (through CELL_AGENT_ROOT_MOUNT,
    as "/" on a cell), no resize2fs nor e2fsck. The partition grows; the
    ext4 through EXT4_IOC_RESIZE_FS, or, where the machine lacks
    CAP_SYS_RESOURCE, a warning that says so and exit 0 (the boot goes
    on)."""
    from test_agent_api import NO_E2FSPROGS, ext4_bytes, grown_disk, has_cap_sys_resource, \
        part_sectors
    if os.geteuid() != 0:
        pytest.fail("--grow-root needs root (loop devices)")
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    tmp = tmp_path / "t"
    tmp.mkdir()
    with grown_disk(tmp_path, mbr=True, mount=mnt) as (dev, part, name, before):
        r = subprocess.run([*NO_E2FSPROGS, need(BOOT), "--grow-root"], capture_output=True,
                           text=True, timeout=60,
                           env={**os.environ, "CELL_AGENT_ROOT_MOUNT": mnt,
                                "TMPDIR": str(tmp)})
        assert r.returncode == 0, r
        assert part_sectors(name) * 512 > 150 << 20, r.stderr
        if has_cap_sys_resource():
            assert "root grown from 31 to 159 MiB" in r.stderr, r.stderr
            st = os.statvfs(mnt)
            assert st.f_blocks * st.f_frsize > 120 << 20
        else:
            assert "root not grown" in r.stderr and "CAP_SYS_RESOURCE" in r.stderr, r.stderr
            assert ext4_bytes(part) == before
            print("\nno CAP_SYS_RESOURCE here: the ioctl was refused (a warning, exit 0)")
