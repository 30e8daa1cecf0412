# SPDX-License-Identifier: Apache-2.0
"""cellctl's boot payloads consumed by the cell's own boot code, end to end:
`cellctl userdata` -> cell-cloudinit -> cell-agent (--boot-source dir), and
`cellctl ssm-payload` -> the fake SSM (through the real AWS CLI) ->
cell-agent (--boot-source ssm, cell-boot as its child). Each ends with
`cellctl ping` answered with the PKI that `cellctl pki` made."""
from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from test_boot import CLOUDINIT, IID, PARAM, Agent, Cloud, need
from test_cellctl import cellctl


@pytest.fixture
def pki(tmp_path):
    d = str(tmp_path / "pki")
    cellctl("pki", "init", d)
    cellctl("pki", "cell", d)
    return d


@pytest.fixture
def agent_of(tmp_path):
    made = []

    def start(*args: str, env=None) -> Agent:
        a = Agent(str(tmp_path / "agent"), *args, env=env)
        made.append(a)
        return a
    yield start
    for a in made:
        a.stop()


def ping(a: Agent, pki: str, timeout: float = 30) -> str:
    """cellctl ping until the agent has its certificates and answers."""
    import time
    end = time.monotonic() + timeout
    r = None
    while time.monotonic() < end:
        if a.proc.poll() is not None:
            pytest.fail(f"cell-agent exited {a.proc.returncode}:\n{a.log()[-3000:]}")
        r = cellctl("ping", "--cell", f"127.0.0.1:{a.port}", "--pki", pki, check=None,
                    timeout=10)
        if r.returncode == 0:
            return r.stdout.strip()
        time.sleep(0.2)
    pytest.fail(f"no pong: {r.stderr if r else ''}\n{a.log()[-3000:]}")


def test_userdata_through_cloudinit_boots_the_agent(pki, agent_of, tmp_path):
    cc = tmp_path / "cell_config.yaml"
    cc.write_text('itzoFlag-insecure-registry: "r.local:5000"\naddon: "kept"\n')
    ud = tmp_path / "user-data"
    cellctl("userdata", "--pki", pki, "--cell-config", str(cc), "--out", str(ud))
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    itzo = root / "tmp" / "itzo"
    a = agent_of("--boot-dir", str(itzo), "--boot-source", "dir",
                 env={"CELL_BOOT_RETRY_MS": "100"})
    a.wait_log("waiting for ca.crt, server.crt and server.key")
    r = subprocess.run([need(CLOUDINIT), "--datasource", "file", "--file", str(ud),
                        "--root", str(root), "--state-dir", str(tmp_path / "ci-state")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ping(a, pki) == "pong"
    assert "cell_config.yaml: addon kept for add-ons" in a.log()


def test_ssm_payload_through_the_aws_cli_boots_the_agent(pki, agent_of, tmp_path):
    """A payload large enough to be chunked (config_N, Kip's spelling), put
    by the real AWS CLI as the controller would, read by the agent's boot."""
    cc = tmp_path / "cell_config.yaml"
    cc.write_text("".join(f'k{i}: "{"v" * 60}"\n' for i in range(80)))
    out = tmp_path / "ssm"
    cellctl("ssm-payload", "--pki", pki, "--cell-config", str(cc), "--out", str(out))
    names = sorted(os.listdir(out))
    assert len(names) >= 2 and all(n.startswith("config_") for n in names)
    cloud = Cloud(str(tmp_path / "cloud"))
    try:
        a = agent_of("--boot-dir", str(tmp_path / "itzo"), "--boot-source", "ssm",
                     env=cloud.env())
        a.wait_log("is not there yet")
        for n in names:
            cloud.put(f"/kip/cells/{IID}/{n}", (out / n).read_text())
        assert ping(a, pki) == "pong"
        boot = tmp_path / "itzo"
        assert (boot / "server.key").read_text() == open(os.path.join(pki, "server.key")).read()
        assert yaml.safe_load((boot / "cell_config.yaml").read_text())["k3"] == "v" * 60
        assert f"joined {len(names)} chunks {PARAM}_0" in a.log()
    finally:
        cloud.close()
