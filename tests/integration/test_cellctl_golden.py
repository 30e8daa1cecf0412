"""cellctl convert against PodParameters written from reading Kip's code
(pkg/server/convert.go, pod_controller.go updatePodUnits, expand.go,
instanceselector, deploy_util.go): one golden JSON per example plus a
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
COMMON = ["--pod-ip", "10.0.5.6", "--node-name", "vk-kip"]


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
    assert got == want, json.dumps(got, indent=1, sort_keys=True)


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
        "notyaml.yaml": ("kind: Pod\nspec: [unclosed\n", "YAML line"),
        "nokind.yaml": ("apiVersion: v1\nspec: {}\n", "not a v1 Pod"),
        "nocontainers.yaml": ("kind: Pod\nmetadata: {name: x}\nspec: {}\n", "no containers"),
        "badqty.yaml": ("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                        "  - name: a\n    image: b\n    resources: {limits: {cpu: lots}}\n",
                        "bad quantity"),
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
        r = cellctl("convert", str(p), check=1)
        assert msg in r.stderr, (name, r.stderr)
    # An optional configMap that is missing is fine (an empty package).
    p = tmp_path / "optcm.yaml"
    p.write_text("kind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                 "  - {name: a, image: b}\n  volumes:\n  - name: v\n"
                 "    configMap: {name: nope, optional: true}\n")
    cellctl("convert", str(p))
