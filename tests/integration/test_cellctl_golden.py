# SPDX-License-Identifier: Apache-2.0
"""cellctl convert against PodParameters written from reading Kip's code
(pkg/server/convert.go, pod_controller.go updatePodUnits, expand.go,
instanceselector, deploy_util.go) and the virtual-kubelet's environment
resolution that runs before it (PopulateEnvironmentVariables): one golden JSON per example plus a
"kitchen sink" manifest for the branches the examples do not reach,
compared modulo map order; and the deploy packages' tar layout, modes and
contents. No cell needed."""
from __future__ import annotations

import json
import os
import tarfile

import pytest

from conftest import ROOT
from test_cellctl import EXAMPLES, cellctl

GOLDEN = os.path.join(ROOT, "tests", "golden", "cellctl")
OBJECTS = ["-f", os.path.join(EXAMPLES, "web-config.yaml"),
           "-f", os.path.join(EXAMPLES, "db-secret.yaml"),
           "-f", os.path.join(GOLDEN, "kitchen-objects.yaml")]
COMMON = ["--pod-ip", "10.0.5.6", "--node-name", "vk-kip", "--kip"]


def env_as_map(params: dict) -> dict:
    """The virtual-kubelet rebuilds each env list from a Go map, so Kip's
    order is random: compare env lists as maps."""
    for key in ("units", "initUnits"):
        for u in params["spec"].get(key) or []:
            if "env" in u:
                u["env"] = {e["name"]: e.get("value") for e in u["env"]}
    return params


@pytest.mark.parametrize("name,manifest", [
    ("hello", os.path.join(EXAMPLES, "hello.yaml")),
    ("web", os.path.join(EXAMPLES, "web.yaml")),
    ("job", os.path.join(EXAMPLES, "job.yaml")),
    ("secret", os.path.join(EXAMPLES, "secret.yaml")),
    ("kitchen", os.path.join(GOLDEN, "kitchen.yaml")),
])
def test_pod_parameters_match_kip(name, manifest):
    got = json.loads(cellctl("convert", manifest, *OBJECTS, *COMMON).stdout)
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        want = json.load(f)
    assert env_as_map(got) == env_as_map(want), json.dumps(got, indent=1, sort_keys=True)


def test_json_manifest_converts_like_yaml(tmp_path):
    """JSON input (what `kubectl get -o json` prints) gives the same."""
    import subprocess
    y = os.path.join(EXAMPLES, "web.yaml")
    j = tmp_path / "web.json"
    # YAML -> JSON with cellctl's own reader is circular; use python-yaml.
    import yaml
    j.write_text(json.dumps(yaml.safe_load(open(y))))
    a = json.loads(cellctl("convert", y, *OBJECTS, *COMMON).stdout)
    b = json.loads(cellctl("convert", str(j), *OBJECTS, *COMMON).stdout)
    assert a == b
    del subprocess


def members(path):
    with tarfile.open(path, "r:gz") as t:
        return {m.name: (m.mode, m.uid, m.gid, t.extractfile(m).read())
                for m in t.getmembers()}


def test_packages_layout_modes_and_contents(tmp_path):
    out = tmp_path / "pkgs"
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.1\nsearch corp.example\noptions rotate\n")
    cellctl("convert", os.path.join(GOLDEN, "kitchen.yaml"), *OBJECTS, *COMMON,
            "--resolv-conf", str(resolv), "--packages", str(out))
    assert sorted(os.listdir(out)) == sorted(
        f"{n}.tar.gz" for n in ("data", "all", "host", "claim", "resolvconf", "etchosts"))
    assert members(out / "all.tar.gz") == {
        "ROOTFS/mode": (0o644, 0, 0, b"fast"),
        "ROOTFS/blob": (0o644, 0, 0, b"\x00\x01\x02"),
        "ROOTFS/tokens/api": (0o600, 0, 0, b"t0ken"),
    }
    for empty in ("data", "host", "claim"):
        assert members(out / f"{empty}.tar.gz") == {}
    # ClusterFirstWithHostNet without a cluster DNS: the node's resolv.conf
    # (the kubelet's fallback), merged with dnsConfig.
    assert members(out / "resolvconf.tar.gz")["ROOTFS/etc/resolv.conf"][3] == (
        b"nameserver 192.0.2.1\nsearch corp.example\noptions rotate single-request\n")
    hosts = members(out / "etchosts.tar.gz")["ROOTFS/etc/hosts"]
    assert hosts[0] == 0o644 and b"10.0.5.6\tkitchen-sink\n" in hosts[3]


def test_cluster_first_resolv_conf(tmp_path):
    out = tmp_path / "pkgs"
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.1\nsearch corp.example\n")
    cellctl("convert", os.path.join(EXAMPLES, "web.yaml"), *OBJECTS, "--cluster-dns",
            "10.96.0.10", "--resolv-conf", str(resolv), "--packages", str(out))
    assert members(out / "resolvconf.tar.gz")["ROOTFS/etc/resolv.conf"][3] == (
        b"nameserver 10.96.0.10\nsearch shop.svc.cluster.local svc.cluster.local "
        b"cluster.local corp.example\noptions ndots:5\n")
    site = members(out / "site.tar.gz")
    assert site["ROOTFS/robots.txt"][0] == 0o444 and site["ROOTFS/index.html"][0] == 0o644


def test_bad_manifests_are_refused_clearly(tmp_path):
    cases = {
        "envcm.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                       "  - name: a\n    image: b\n    env:\n    - name: X\n"
                       "      valueFrom: {secretKeyRef: {name: s, key: k}}\n",
                       'secret "s" not found'),
        "envkey.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                        "  - name: a\n    image: b\n    env:\n    - name: X\n"
                        "      valueFrom: {configMapKeyRef: {name: web-config, key: k}}\n",
                        "doesn't contain the \"k\" key"),
        "notyaml.yaml": ("kind: Pod\nspec: [unclosed\n", "YAML line"),
        "nokind.yaml": ("apiVersion: v1\nspec: {}\n", "not a v1 Pod"),
        "nocontainers.yaml": ("kind: Pod\nmetadata: {name: x}\nspec: {}\n", "no containers"),
        "badqty.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                        "  - name: a\n    image: b\n    resources: {limits: {cpu: lots}}\n",
                        "is not a quantity"),
        "badhost.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  hostname: Not_Valid\n"
                         "  containers:\n  - {name: a, image: b}\n", "not a valid DNS label"),
        "noname.yaml": ("kind: Pod\nmetadata: {}\nspec:\n  containers:\n  - {name: a, image: b}\n",
                        "metadata.name"),
        "nocm.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                      "  - {name: a, image: b}\n  volumes:\n  - name: v\n"
                      "    configMap: {name: nope}\n", 'configMap "nope" not found'),
    }
    for name, (text, msg) in cases.items():
        p = tmp_path / name
        p.write_text(text)
        r = cellctl("convert", str(p), "-f", os.path.join(EXAMPLES, "web-config.yaml"),
                    check=1)
        assert msg in r.stderr, (name, r.stderr)
    # An optional configMap that is missing is fine (an empty package).
    p = tmp_path / "optcm.yaml"
    p.write_text("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                 "  - {name: a, image: b}\n  volumes:\n  - name: v\n"
                 "    configMap: {name: nope, optional: true}\n")
    cellctl("convert", str(p))


# ---------------------------------------------------------------------------
# user data and the SSM payload

CLOUDINIT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "build", "bin", "cell-cloudinit")


def boot_pki(tmp_path):
    pki = str(tmp_path / "pki")
    cellctl("pki", "init", pki)
    cellctl("pki", "cell", pki)
    return pki


def test_userdata_round_trips_through_cell_cloudinit(tmp_path):
    from conftest import CELL_BUILD
    import subprocess
    pki = boot_pki(tmp_path)
    ci = tmp_path / "user.yaml"
    ci.write_text("#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: from the user\n"
                  "hostname: cell-1\n")
    cc = tmp_path / "cell_config.yaml"
    cc.write_text('itzoFlag-port: "6421"\nregion: "zürich"\n')
    ud = tmp_path / "user-data"
    cellctl("userdata", "--pki", pki, "--cloud-init", str(ci), "--cell-config", str(cc),
            "--agent-version", "1.2.3", "--agent-url", "https://example.com/itzo",
            "--out", str(ud))
    text = ud.read_text()
    assert text.startswith("#cloud-config\n") and len(text.encode()) <= 16000
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    r = subprocess.run([os.path.join(CELL_BUILD, "bin", "cell-cloudinit"), "--datasource",
                        "file", "--file", str(ud), "--root", str(root), "--state-dir",
                        str(tmp_path / "state")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    boot = root / "tmp" / "itzo"
    for name in ("ca.crt", "server.crt", "server.key"):
        assert (boot / name).read_text() == open(os.path.join(pki, name)).read()
        assert (boot / name).stat().st_mode & 0o777 == 0o400
    assert (boot / "itzo_version").read_text() == "v1.2.3"  # Kip adds the v
    assert (boot / "itzo_url").read_text() == "https://example.com/itzo"
    import yaml
    assert yaml.safe_load((boot / "cell_config.yaml").read_text()) == {
        "itzoFlag-port": "6421", "region": "zürich"}
    assert (root / "etc" / "motd").read_text() == "from the user"  # the user's own files stay


def test_userdata_limit_and_bad_input(tmp_path):
    pki = boot_pki(tmp_path)
    big = tmp_path / "big.yaml"
    big.write_text("#cloud-config\nruncmd:\n" + "".join(f"- echo {'x' * 100} {i}\n"
                                                       for i in range(150)))
    r = cellctl("userdata", "--pki", pki, "--cloud-init", str(big), check=1)
    assert "over the clouds' limit of 16000" in r.stderr
    bad = tmp_path / "cc.yaml"
    bad.write_text("itzoFlag-port: 6421\n")
    r = cellctl("userdata", "--pki", pki, "--cell-config", str(bad), check=1)
    assert "values must be strings" in r.stderr
    r = cellctl("userdata", "--pki", str(tmp_path / "nopki"), check=1)
    assert "pki cell" in r.stderr
    cellctl("userdata", check=2)


def test_ssm_payload_chunks(tmp_path):
    import yaml
    pki = boot_pki(tmp_path)
    small = json.loads(cellctl("ssm-payload", "--pki", pki).stdout)
    assert list(small) == ["config"]
    files = yaml.safe_load(small["config"])
    assert set(files) == {"ca.crt", "server.crt", "server.key"}
    assert files["server.key"] == open(os.path.join(pki, "server.key")).read()
    # A cell_config with multi-byte characters pushes it past 4096 bytes.
    cc = tmp_path / "cc.yaml"
    cc.write_text("".join(f'k{i}: "{"ü" * 40}"\n' for i in range(80)))
    out = tmp_path / "ssm"
    cellctl("ssm-payload", "--pki", pki, "--cell-config", str(cc), "--out", str(out))
    names = sorted(os.listdir(out), key=lambda n: int(n.split("_")[1]))
    assert len(names) >= 2 and names == [f"config_{i}" for i in range(len(names))]
    chunks = [open(out / n, "rb").read() for n in names]
    assert all(len(c) <= 4096 for c in chunks)
    for c in chunks:
        c.decode("utf-8")  # each chunk cut at a character boundary
    whole = yaml.safe_load(b"".join(chunks).decode())
    assert set(whole) == {"ca.crt", "server.crt", "server.key", "cell_config.yaml"}
    assert yaml.safe_load(whole["cell_config.yaml"])["k3"] == "ü" * 40


def test_select_with_the_shipped_us_east_1_table():
    """Known answers from controller/data/aws-us-east-1.json by Kip's rules."""
    cases = [
        ([], "t3.nano"),                                   # nothing asked: default
        (["--instance-type", "c5.large"], "c5.large"),     # exact: as is
        (["--memory", "4Gi"], "t3a.medium sustainedCPU=false"),  # cheapest fit
        (["--cpu", "2", "--memory", "4Gi"], "c5a.large sustainedCPU=false"),
        # burstable: t3a.small 0.0188 + 0.1 * 0.05 beats t3a.micro 0.0094 + 0.3 * 0.05
        (["--cpu", "0.5"], "t3a.small sustainedCPU=true"),
        (["--cpu", "0.4"], "t3a.small sustainedCPU=false"),
        (["--cpu", "0.5", "--sustained-cpu", "false"], "t3a.large sustainedCPU=false"),
        (["--gpu", "1"], "g4dn.xlarge sustainedCPU=false"),
        (["--gpu", "1 nvidia-tesla-v100"], "p3.2xlarge sustainedCPU=false"),
        (["--gpu", "4 NVIDIA-Tesla-V100"], "p3.8xlarge sustainedCPU=false"),
        (["--instance-type", "m5*", "--cpu", "4"], "m5a.xlarge sustainedCPU=false"),
        (["--instance-type", "t1*"], None),                # t1 is never chosen
        (["--memory", "1Ti"], None),
        # arm64 (Graviton) rows: chosen only for images that have arm64
        # (us-east-1 on-demand Linux prices, see docs/cellctl.md).
        (["--arch", "arm64"], "t4g.nano"),                 # the default is amd64
        (["--memory", "4Gi", "--arch", "arm64"], "t4g.medium sustainedCPU=false"),
        (["--memory", "4Gi", "--arch", "amd64,arm64"], "t4g.medium sustainedCPU=false"),
        (["--cpu", "2", "--memory", "4Gi", "--arch", "arm64"], "c6g.large sustainedCPU=false"),
        (["--cpu", "2", "--memory", "4Gi", "--arch", "amd64"], "c5a.large sustainedCPU=false"),
        (["--instance-type", "m6g.large", "--arch", "arm64"], "m6g.large"),
        (["--instance-type", "m*.large", "--arch", "arm64"], "m6g.large sustainedCPU=false"),
        (["--instance-type", "m6g*", "--cpu", "2"], None),  # images not known to be arm64
        (["--gpu", "1", "--arch", "arm64"], None),         # no arm64 GPU type in the table
    ]
    for args, want in cases:
        r = cellctl("select", *args, check=None)
        if want is None:
            assert r.returncode == 1 and "no instance type fits" in r.stderr, (args, r.stderr)
        else:
            assert r.stdout.strip() == want, (args, r.stdout, r.stderr)
    out = json.loads(cellctl("select", "--cpu", "1", "-o", "json").stdout)
    # 1 CPU: t3a.small 0.0188 + 0.6 * 0.05 < t3a.micro 0.0094 + 0.8 * 0.05
    assert out == {"instanceType": "t3a.small", "sustainedCPU": True}
    cellctl("select", "--sustained-cpu", "maybe", check=2)
    r = cellctl("select", "--instance-type", "m6g.large", check=1)
    assert "m6g.large is arm64, and the pod's images are not known to have it" in r.stderr
    r = cellctl("select", "--instance-type", "c5.large", "--arch", "arm64", check=1)
    assert "c5.large is amd64, but the pod's images are for arm64 only" in r.stderr
    r = cellctl("select", "--arch", "sparc", check=1)
    assert "unknown architecture" in r.stderr
