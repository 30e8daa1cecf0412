# SPDX-License-Identifier: Apache-2.0
"""cellctl against a real cell-agent: the PKI it makes (checked with
python-cryptography, and used by the agent), every verb over mutual TLS,
`run` of the examples with their packages, `exec -it` under a
pseudo-terminal, `port-forward` to an HTTP server in the pod, exit codes.

The examples name the image ``busybox``; the tests point them at a local
registry holding a busybox-static image (``local_manifest``).
"""
from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from typing import List, Optional

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import CELL_BUILD, ROOT
from images import File, Image, Layer, busybox_layer, push
from test_agent_api import AGENT, free_port

CELLCTL = os.path.join(CELL_BUILD, "bin", "cellctl")
EXAMPLES = os.path.join(ROOT, "examples")
FAST = {"CELL_AGENT_BACKOFF_UNIT_MS": "50", "CELL_CGROUP_NEST": "1"}


def cellctl(*args: str, timeout: float = 120, check: Optional[int] = 0,
            **kw) -> subprocess.CompletedProcess:
    if not os.access(CELLCTL, os.X_OK):
        pytest.fail(f"cellctl not found at {CELLCTL}", pytrace=False)
    r = subprocess.run([CELLCTL, *args], capture_output=True, text=True,
                       timeout=timeout, **kw)
    if check is not None:
        assert r.returncode == check, f"cellctl {args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@dataclass
class Cell:
    proc: subprocess.Popen
    port: int
    dir: str
    pki: str
    log_path: str

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ctl(self, verb: str, *args: str, **kw) -> subprocess.CompletedProcess:
        return cellctl(verb, "--cell", self.addr, "--pki", self.pki, *args, **kw)

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_cell(d: str, registry, pki: Optional[str] = None, extra: List[str] = ()) -> Cell:
    """An agent whose boot directory comes from `cellctl pki`."""
    os.makedirs(d, exist_ok=True)
    if pki is None:
        pki = os.path.join(d, "pki")
        cellctl("pki", "init", pki)
    boot = os.path.join(d, "boot")
    cellctl("pki", "cell", pki, "--boot-dir", boot)
    log_path = os.path.join(d, "agent.log")
    env = dict(os.environ, **FAST)
    for _ in range(5):  # a free port may be taken meanwhile by another test
        port = free_port()
        with open(log_path, "ab") as log:
            p = subprocess.Popen(
                [AGENT, "--port", str(port), "--boot-dir", boot,
                 "--state-dir", os.path.join(d, "state"),
                 "--image-cache", os.path.join(d, "cache"),
                 "--insecure-registry", registry.host, "-v", *extra],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True)
        c = Cell(p, port, d, pki, log_path)
        deadline = time.monotonic() + 10
        while p.poll() is None and time.monotonic() < deadline:
            if c.ctl("ping", check=None).returncode == 0:
                return c
            time.sleep(0.05)
        if p.poll() is None:
            pytest.fail("cell-agent did not answer ping:\n" + c.log()[-3000:])
    pytest.fail("cell-agent could not start:\n" + c.log()[-3000:])


@pytest.fixture
def image(registry) -> str:
    hello = Layer([File("etc/motd", "hello from a cell image\n")])
    push(registry, "t/busybox", "latest",
         Image([busybox_layer(), hello], config={"Cmd": ["/bin/sh"]}))
    return registry.ref("t/busybox", "latest")


@pytest.fixture
def cell(tmp_path, registry):
    made: List[Cell] = []

    def make(**kw) -> Cell:
        c = start_cell(str(tmp_path / f"cell{len(made)}"), registry, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        if c.proc.poll() is None:
            c.ctl("delete", "--pod", "default_x", "--grace", "0", check=None)
            units = os.path.join(c.dir, "state", "units")
            deadline = time.monotonic() + 20
            while os.path.isdir(units) and os.listdir(units) and time.monotonic() < deadline:
                time.sleep(0.1)
        c.stop()


def local_manifest(tmp_path, name: str, image: str) -> str:
    """examples/<name>.yaml with the image pointed at the test registry."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    out = tmp_path / name
    out.write_text(re.sub(r"image: busybox\b", f"image: {image}", text))
    return str(out)


def wait_for(pred, timeout: float = 30, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("condition never held")


# ---------------------------------------------------------------------------
# pki


def test_pki_is_what_wire_md_describes(tmp_path):
    d = str(tmp_path / "pki")
    cellctl("pki", "init", d)
    cellctl("pki", "cell", d)
    ca = x509.load_pem_x509_certificate(open(f"{d}/ca.crt", "rb").read())
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "Milpa Server CA"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert (ca.not_valid_after - ca.not_valid_before).days >= 3650
    for name, eku in (("client", ExtendedKeyUsageOID.CLIENT_AUTH),
                      ("server", ExtendedKeyUsageOID.SERVER_AUTH)):
        c = x509.load_pem_x509_certificate(open(f"{d}/{name}.crt", "rb").read())
        assert isinstance(c.public_key(), ec.EllipticCurvePublicKey)
        assert c.public_key().curve.name == "secp256r1"
        subj = {a.oid: a.value for a in c.subject}
        assert subj == {NameOID.COMMON_NAME: "MilpaNode", NameOID.ORGANIZATION_NAME: "Elotl",
                        NameOID.ORGANIZATIONAL_UNIT_NAME: "MilpaServer"}
        san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == ["MilpaNode"]
        assert san.get_values_for_type(x509.IPAddress) == []
        assert list(c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [eku]
        ca.public_key().verify(c.signature, c.tbs_certificate_bytes,
                               ec.ECDSA(c.signature_hash_algorithm))
        assert c.issuer == ca.subject
        key = open(f"{d}/{name}.key").read()
        assert key.startswith("-----BEGIN EC PRIVATE KEY-----")  # SEC1
        assert os.stat(f"{d}/{name}.key").st_mode & 0o777 == 0o600
    # A second init keeps the CA unless forced.
    r = cellctl("pki", "init", d, check=1)
    assert "exists" in r.stderr
    cellctl("pki", "init", d, "--force")


def test_usage_errors_and_help(tmp_path):
    verbs = ["pki", "run", "convert", "delete", "status", "logs", "exec", "attach",
             "port-forward", "file", "ping", "version", "watch", "select", "metrics"]
    for v in verbs:
        r = cellctl(v, "--help")
        assert "usage: cellctl" in r.stdout, v
    assert cellctl(check=2).returncode == 2
    assert cellctl("frobnicate", check=2).returncode == 2
    assert cellctl("ping", "--bogus", check=2).returncode == 2
    assert cellctl("exec", "--cell", "x", "--pki", str(tmp_path), check=2).returncode == 2
    r = cellctl("ping", "--pki", str(tmp_path), check=2)
    assert "no cell" in r.stderr


# ---------------------------------------------------------------------------
# the cell verbs


def test_ping_status_and_tls_checked_against_the_ca(cell, registry, tmp_path):
    c = cell()
    wait_for(lambda: c.ctl("ping", check=None).returncode == 0, 10)
    assert c.ctl("ping").stdout == "pong\n"
    assert c.ctl("version").stdout.strip()
    st = json.loads(c.ctl("status", "-o", "json").stdout)
    assert st["unitStatus"] == [] or st["unitStatus"] is None or "unitStatus" in st
    assert "UNIT" in c.ctl("status").stdout
    # Another CA: the cell is not trusted (exit 1, with the reason).
    other = str(tmp_path / "other")
    cellctl("pki", "init", other)
    r = cellctl("ping", "--cell", c.addr, "--pki", other, check=1)
    assert "SSL" in r.stderr or "certificate" in r.stderr, r.stderr
    # Nothing listening: a remote failure with its reason.
    r = cellctl("ping", "--cell", f"127.0.0.1:{free_port()}", "--pki", c.pki, check=1)
    assert "ping" in r.stderr and "127.0.0.1" in r.stderr


def test_server_name_must_be_milpanode(cell, registry, tmp_path):
    """A server certificate for another name is refused, even from our CA."""
    from pki import CA
    d = str(tmp_path / "alt")
    ca = CA.create(d)
    srv = ca.issue_server(d, "server", dns=["NotMilpa"], ips=["127.0.0.1"])
    cli = ca.issue_client(d, "client")
    pki = str(tmp_path / "altpki")
    os.makedirs(pki)
    for src, dst in ((ca.cert_path, "ca.crt"), (cli.cert_path, "client.crt"),
                     (cli.key_path, "client.key")):
        with open(src, "rb") as f, open(os.path.join(pki, dst), "wb") as g:
            g.write(f.read())
    boot = str(tmp_path / "altboot")
    os.makedirs(boot)
    for src, dst in ((ca.cert_path, "ca.crt"), (srv.cert_path, "server.crt"),
                     (srv.key_path, "server.key")):
        with open(src, "rb") as f, open(os.path.join(boot, dst), "wb") as g:
            g.write(f.read())
    for _ in range(5):  # retry when another test takes the free port
        port = free_port()
        p = subprocess.Popen([AGENT, "--port", str(port), "--boot-dir", boot,
                              "--state-dir", str(tmp_path / "st")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 10
            while p.poll() is None and time.monotonic() < deadline:
                r = cellctl("ping", "--cell", f"127.0.0.1:{port}", "--pki", pki, check=1)
                if "connect to" not in r.stderr:
                    break
                time.sleep(0.1)
            if p.poll() is None:
                break
        finally:
            p.terminate()
            p.wait(timeout=15)
    assert "MilpaNode" in r.stderr or "certificate" in r.stderr or "SSL" in r.stderr, r.stderr


# ---------------------------------------------------------------------------
# run and the stream verbs


def test_run_hello_then_status_logs_exec_file(cell, image, tmp_path):
    c = cell()
    m = local_manifest(tmp_path, "hello.yaml", image)
    r = c.ctl("run", m, "--timeout", "60")
    assert "pod default_hello: Running" in r.stdout, r.stdout
    st = json.loads(c.ctl("status", "-o", "json").stdout)
    u = st["unitStatus"][0]
    assert u["name"] == "hello" and "running" in u["state"]
    assert re.search(r"^hello\s+Running\s+true\s+0", c.ctl("status").stdout, re.M)
    assert '"unitStatus":' in c.ctl("status", "-o", "yaml").stdout
    assert "image=" in c.ctl("status", "-o", "wide").stdout
    logs = wait_for(lambda: (lambda o: o if "tick 1" in o else None)(c.ctl("logs").stdout))
    assert logs.startswith("hello from a cell\ntick 0\n"), logs
    assert c.ctl("logs", "hello", "--tail", "1").stdout.count("\n") == 1
    r = c.ctl("exec", "--", "/bin/sh", "-c", "cat /etc/motd; cat /etc/hosts; echo err >&2; exit 3",
              check=3)
    assert "hello from a cell image" in r.stdout and "Kubernetes-managed" in r.stdout
    assert r.stderr == "err\n"
    r = c.ctl("exec", "-c", "nosuch", "--", "true", check=1)
    assert "no unit 'nosuch'" in r.stderr and "cellctl exec:" in r.stderr
    r = c.ctl("file", os.path.join(c.dir, "agent.log"), "--tail", "3")
    assert r.stdout.count("\n") == 3
    assert c.ctl("file", "/nonexistent/x", check=1).stderr
    # logs -f streams new lines until stopped.
    p = subprocess.Popen([CELLCTL, "logs", "-f", "--cell", c.addr, "--pki", c.pki],
                         stdout=subprocess.PIPE, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(seen) < 3:
            ready, _, _ = select.select([p.stdout], [], [], 1)
            if ready:
                seen.append(p.stdout.readline())
        assert len(seen) == 3 and all(s.startswith(("tick", "hello")) for s in seen), seen
    finally:
        p.terminate()
        p.wait(timeout=10)


def run_ok(c: Cell, tmp_path, image: str, example: str, *extra: str, sub=None) -> str:
    m = local_manifest(tmp_path, example, image)
    if sub:
        text = open(m).read()
        for a, b in sub.items():
            text = text.replace(a, b)
        open(m, "w").write(text)
    r = c.ctl("run", m, *extra, "--timeout", "60")
    return r.stdout


def test_exec_it_under_a_pseudo_terminal(cell, image, tmp_path):
    import fcntl
    import struct
    import termios
    c = cell()
    run_ok(c, tmp_path, image, "hello.yaml")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    p = subprocess.Popen([CELLCTL, "exec", "-it", "--cell", c.addr, "--pki", c.pki, "--",
                          "/bin/sh", "-c", "test -t 0 && echo term=$TERM; stty size; read x; echo got:$x; exit 5"],
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if not sent and b"33 101" in out:
            os.write(master, b"hi\r")
            sent = True
        if p.poll() is not None and not r:
            break
    assert p.wait(timeout=10) == 5, out
    os.close(master)
    text = out.decode(errors="replace")
    assert "term=" in text and "33 101" in text and "got:hi" in text, text


def test_port_forward_to_http_server_in_pod(cell, image, tmp_path):
    c = cell()
    port = str(free_port())
    cfg = str(tmp_path / "web-config.yaml")
    with open(os.path.join(EXAMPLES, "web-config.yaml")) as f:
        open(cfg, "w").write(f.read())
    out = run_ok(c, tmp_path, image, "web.yaml", "-f", cfg,
                 sub={"8080": port})
    assert "pod shop_web: Running" in out
    st = wait_for(lambda: (lambda s: s if s["unitStatus"][0]["ready"] else None)(
        json.loads(c.ctl("status", "-o", "json").stdout)), 30)
    assert st["unitStatus"][0]["ready"] is True
    p = subprocess.Popen([CELLCTL, "port-forward", f"0:{port}", "--cell", c.addr,
                          "--pki", c.pki], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line)
        assert m and m.group(2) == port, line
        for _ in range(2):  # two connections, each its own stream
            body = urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/index.html",
                                          timeout=10).read()
            assert body == b"<h1>served by a cell</h1>\n"
        robots = urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/robots.txt",
                                        timeout=10).read()
        assert robots.startswith(b"User-agent")
    finally:
        p.terminate()
        p.wait(timeout=10)
    # The configMap package's modes: items[].mode, else defaultMode 0644 (stat -L:
    # top-level names are links into ..data, as under the kubelet).
    r = c.ctl("exec", "--", "/bin/sh", "-c", "stat -L -c '%a %n' /www/index.html /www/robots.txt")
    assert r.stdout.split("\n")[:2] == ["644 /www/index.html", "444 /www/robots.txt"], r.stdout


def test_run_job_with_init_units_and_wait(cell, image, tmp_path):
    c = cell()
    out = run_ok(c, tmp_path, image, "job.yaml", "--wait")
    assert "pod default_report: Succeeded" in out, out
    st = json.loads(c.ctl("status", "-o", "json").stdout)
    assert [u["name"] for u in st["initUnitStatus"]] == ["fetch", "transform"]
    assert c.ctl("logs", "report").stdout == "RAW DATA\ndone\n"


def test_run_secret_pod_files_and_hosts(cell, image, tmp_path):
    c = cell()
    sec = os.path.join(EXAMPLES, "db-secret.yaml")
    out = run_ok(c, tmp_path, image, "secret.yaml", "-f", sec, "--pod-ip", "10.9.8.7")
    assert "pod default_db-client: Running" in out, out
    r = c.ctl("exec", "--", "/bin/sh", "-c",
              "id -G; cat /secrets/password; echo; stat -L -c '%a' /secrets/password; "
              "cat /etc/resolv.conf; grep -v '^#' /etc/hosts | grep 10.; echo DB_PASSWORD=$DB_PASSWORD")
    lines = r.stdout.split("\n")
    assert "2000" in lines[0].split() and lines[1] == "s3cr3t" and lines[2] == "400", r.stdout
    assert "nameserver 10.0.0.10\nsearch db.svc.cluster.local\noptions ndots:2\n" in r.stdout
    assert "10.9.8.7\tclient.db.default.svc.cluster.local\tclient" in r.stdout
    assert "10.1.2.3\tdb.internal\tdb" in r.stdout
    assert "DB_PASSWORD=s3cr3t\n" in r.stdout  # resolved before Kip sees it


# printenv as coreutils' (Debian busybox-static has no such applet): each
# variable's value; exit 1 when one is not set.
PRINTENV = """#!/bin/sh
rc=0
for v in "$@"; do
    if /bin/busybox env | /bin/busybox grep -q "^$v="; then eval "echo \\"\\$$v\\""; else rc=1; fi
done
exit $rc
"""


def test_run_command_demo_gets_the_service_variables(cell, registry, tmp_path):
    """The docs' command-demo pod prints KUBERNETES_PORT; without the
    service variables the virtual-kubelet adds, printenv fails and the pod
    loops in CrashLoopBackOff."""
    push(registry, "t/debian", "latest",
         Image([busybox_layer(), Layer([File("bin/printenv", PRINTENV, mode=0o755)])],
               config={"Cmd": ["/bin/sh"]}))
    debian = registry.ref("t/debian", "latest")
    c = cell()
    out = run_ok(c, tmp_path, debian, "command-demo.yaml", "--wait",
                 "--kubernetes-service", "10.96.0.1", sub={"image: debian": f"image: {debian}"})
    assert "pod default_command-demo: Succeeded" in out, out
    assert c.ctl("logs").stdout == "command-demo\ntcp://10.96.0.1:443\n"


SERVICES = """
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: my-db},
   spec: {clusterIP: 10.96.7.7, ports: [{name: pg-main, port: 5432},
                                        {name: metrics, port: 9187, protocol: UDP}]}}
- {apiVersion: v1, kind: Service, metadata: {name: headless},
   spec: {clusterIP: None, ports: [{port: 80}]}}
- {apiVersion: v1, kind: Service, metadata: {name: other, namespace: elsewhere},
   spec: {clusterIP: 10.96.8.8, ports: [{port: 80}]}}
- {apiVersion: v1, kind: Service, metadata: {name: kubernetes, namespace: default},
   spec: {clusterIP: "fd00::1", ports: [{name: https, port: 6443}]}}
"""


def test_convert_service_variables_as_the_virtual_kubelet(tmp_path):
    """FromServices and getServiceEnvVarMap: default/kubernetes always, the
    pod's namespace's Services only with enableServiceLinks, headless and
    other namespaces' never; $(VAR) sees them; the container's own win."""
    svc = tmp_path / "svc.yaml"
    svc.write_text(SERVICES)
    pod = tmp_path / "pod.yaml"
    text = open(os.path.join(EXAMPLES, "command-demo.yaml")).read()
    text = text.replace('    args: ["HOSTNAME", "KUBERNETES_PORT"]\n',
                        '    args: ["HOSTNAME", "KUBERNETES_PORT"]\n'
                        '    env:\n'
                        '    - {name: DB, value: "$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT)"}\n'
                        '    - {name: MY_DB_PORT, value: mine}\n')
    pod.write_text(text)

    def env(*args: str) -> dict:
        out = json.loads(cellctl("convert", str(pod), *args).stdout)
        return {e["name"]: e["value"] for e in out["spec"]["units"][0]["env"]}

    e = env("-f", str(svc), "--kubernetes-service", "10.96.0.1:443")
    assert e["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"  # the flag beats -f
    assert e["KUBERNETES_SERVICE_PORT"] == e["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert e["KUBERNETES_PORT"] == e["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
    assert (e["KUBERNETES_PORT_443_TCP_PROTO"], e["KUBERNETES_PORT_443_TCP_PORT"],
            e["KUBERNETES_PORT_443_TCP_ADDR"]) == ("tcp", "443", "10.96.0.1")
    assert e["MY_DB_SERVICE_HOST"] == "10.96.7.7" and e["MY_DB_SERVICE_PORT"] == "5432"
    assert e["MY_DB_SERVICE_PORT_PG_MAIN"] == "5432"
    assert e["MY_DB_SERVICE_PORT_METRICS"] == "9187"
    assert e["MY_DB_PORT_9187_UDP"] == "udp://10.96.7.7:9187"
    assert e["MY_DB_PORT"] == "mine" and e["DB"] == "10.96.7.7:5432"
    assert not [k for k in e if k.startswith(("HEADLESS_", "OTHER_"))]
    # enableServiceLinks: false keeps only the master service's.
    pod.write_text(text.replace("spec:\n", "spec:\n  enableServiceLinks: false\n", 1))
    e = env("-f", str(svc))
    assert e["KUBERNETES_PORT"] == "tcp://[fd00::1]:6443"
    assert not [k for k in e if k.startswith("MY_DB_SERVICE")]
    assert e["DB"] == "$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT)"
    # Without any Service, no variables (and no guessed address).
    assert not [k for k in env() if k.startswith("KUBERNETES")]
    r = cellctl("convert", str(pod), "--kubernetes-service", "[fd00::1", check=None)
    assert r.returncode != 0 and "bad address" in r.stderr


def test_run_reports_failure_reasons_and_literals(cell, image, tmp_path, registry):
    c = cell()
    # A missing configMap: caught before anything is sent.
    r = c.ctl("run", local_manifest(tmp_path, "web.yaml", image), check=1)
    assert 'configMap "web-config" not found' in r.stderr
    # --from-literal builds it; a missing image fails the pod with a reason.
    bad = registry.ref("t/missing", "v1")
    r = c.ctl("run", local_manifest(tmp_path, "web.yaml", bad), "--timeout", "5",
              "--from-literal", "configmap/web-config/index.html=hi",
              "--from-literal", "configmap/web-config/robots.txt=no", check=1)
    assert "still Pending (httpd: ErrImagePull" in r.stderr and "t/missing" in r.stderr, r.stderr
    # A manifest that is not a pod.
    r = c.ctl("run", os.path.join(EXAMPLES, "db-secret.yaml"), check=1)
    assert "not a v1 Pod" in r.stderr
    r = c.ctl("run", str(tmp_path / "nonexistent.yaml"), check=1)
    assert "nonexistent.yaml" in r.stderr


def test_attach_and_delete(cell, image, tmp_path):
    c = cell()
    run_ok(c, tmp_path, image, "hello.yaml")
    p = subprocess.Popen([CELLCTL, "attach", "--cell", c.addr, "--pki", c.pki],
                         stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 15)
        assert ready, "attach printed nothing"
        assert p.stdout.readline().startswith("tick "), "attach shows the unit's output"
    finally:
        p.terminate()
        p.wait(timeout=10)
    c.ctl("delete", local_manifest(tmp_path, "hello.yaml", image), "--grace", "0")
    units = os.path.join(c.dir, "state", "units")
    wait_for(lambda: not os.listdir(units), 20)
    st = json.loads(c.ctl("status", "-o", "json").stdout)
    assert not st.get("unitStatus")
    # attach to a pod with no unit: a remote failure with its reason
    r = c.ctl("attach", check=1)
    assert "runs no unit" in r.stderr
