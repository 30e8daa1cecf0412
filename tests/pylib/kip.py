# SPDX-License-Identifier: Apache-2.0
"""What the Kip controller does to a Kubernetes pod before a cell sees it,
re-expressed in Python from reading elotl/kip (739ad20) so that tests send
exactly what the real controller sends, in the order it sends it.

* ``vk_env``: virtual-kubelet's PopulateEnvironmentVariables, which runs
  before Kip's provider gets the pod: ``valueFrom.secretKeyRef`` /
  ``configMapKeyRef`` become literal values and ``$(VAR)`` references in
  values are expanded against the variables defined before them. The result
  is rebuilt from a Go map, so its order changes from sync to sync.
* ``container_to_unit``, ``k8s_probe``, ``k8s_volume``, ``k8s_to_milpa_pod``,
  ``aggregate_resources``: pkg/server/convert.go. Every unit gets the
  ``resolvconf`` and ``etchosts`` mounts; the pod gets the two packagePath
  volumes; ``readOnly`` of a mount and the unit's resources are not copied
  (``"resources"`` is always ``{"Limits":null,"Requests":null}``); a probe
  whose handler Kip cannot convert goes out with timings only.
* ``expand_command_and_args``: pkg/util/expand.go (regular units only).
* ``pod_parameters``: pkg/server/pod_controller.go ``updatePodUnits``.
* ``volume_packages``, ``resolvconf_package``, ``etchosts_package``:
  pkg/server/deploy_util.go. Kip deploys one package per pod volume (empty
  for emptyDir, hostPath and packagePath volumes), then resolvconf, then
  etchosts, then sends the spec. A package is a tar.gz of
  ``ROOTFS/<path>`` regular files only (no directory entries), with the
  item's mode (defaultMode, else 0644; projected: defaultMode, else 0644).
* ``decode_status``: the reply decoded the way Kip's ``json.Unmarshal`` into
  ``api.PodStatusReply`` would, failing where Go would fail, keyed by the Go
  field names (UnitStatuses, State.Waiting.StartFailure, …).

Go writes struct fields in declaration order and leaves out ``omitempty``
zero values; the dicts below follow that.
"""

from __future__ import annotations

import base64
import datetime
import io
import random
import re
import tarfile
import time
from typing import Dict, List, Optional, Tuple

RESOLVCONF, ETCHOSTS = "resolvconf", "etchosts"
NS_POD, NS_CONTAINER, NS_NODE = 0, 1, 2

# ---------------------------------------------------------------------------
# quantities (enough of resource.Quantity for Value() and MilliValue())

_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40,
           "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6,
           "G": 1e9, "T": 1e12}


def _quantity(q: Optional[str]) -> float:
    if not q:
        return 0.0
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q))
    assert m, q
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def _go_f32(x: float) -> float:
    """A float32 round trip, as Kip's fmt.Sprintf of float32 sees it."""
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def aggregate_resources(containers: List[dict]) -> dict:
    """convert.go aggregateResources: limits, else requests, summed."""
    cpu = mem = 0
    for c in containers:
        res = c.get("resources") or {}
        lim, req = res.get("limits") or {}, res.get("requests") or {}
        v = int(-(-_quantity(lim.get("cpu")) * 1000 // 1))
        cpu += v if v > 0 else int(-(-_quantity(req.get("cpu")) * 1000 // 1))
        v = int(-(-_quantity(lim.get("memory")) // 1))
        mem += v if v > 0 else int(-(-_quantity(req.get("memory")) // 1))
    out = {}
    if cpu > 0:
        out["cpu"] = "%.2f" % _go_f32(cpu / 1000.0)
    if mem > 0:
        out["memory"] = "%.2fGi" % _go_f32(mem / float(1024 ** 3))
    return out


# ---------------------------------------------------------------------------
# environment: virtual-kubelet, then Kip

def _expand(s: str, env: Dict[str, str]) -> str:
    """k8s.io/third_party/forked/golang/expansion: $(VAR) → value when
    defined, $$ → $, anything else as written."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "$" and i + 1 < len(s):
            if s[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if s[i + 1] == "(":
                j = s.find(")", i + 2)
                if j > 0:
                    name = s[i + 2:j]
                    out.append(env[name] if name in env else s[i:j + 1])
                    i = j + 1
                    continue
        out.append(s[i])
        i += 1
    return "".join(out)


def vk_env(container: dict, secrets: Dict[str, Dict[str, bytes]],
           configmaps: Dict[str, Dict[str, str]], shuffle: Optional[random.Random] = None
           ) -> List[dict]:
    """The container's env after PopulateEnvironmentVariables: literal
    values, rebuilt from a map (order: a Go map's, i.e. any)."""
    env: Dict[str, str] = {}
    for ev in container.get("env") or []:
        src = ev.get("valueFrom")
        if src and src.get("secretKeyRef"):
            ref = src["secretKeyRef"]
            env[ev["name"]] = secrets[ref["name"]][ref["key"]].decode()
        elif src and src.get("configMapKeyRef"):
            ref = src["configMapKeyRef"]
            env[ev["name"]] = configmaps[ref["name"]][ref["key"]]
        else:
            env[ev["name"]] = _expand(ev.get("value", ""), env)
    out = [{"name": k, "value": v} for k, v in env.items()]
    if shuffle:
        shuffle.shuffle(out)
    return out


# ---------------------------------------------------------------------------
# convert.go

def k8s_probe(p: Optional[dict]) -> Optional[dict]:
    if p is None:
        return None
    mp: dict = {}
    if p.get("exec"):
        mp["exec"] = {"command": p["exec"].get("command")}
    elif p.get("httpGet"):
        h = p["httpGet"]
        g = {"path": h.get("path", ""), "port": h["port"], "host": h.get("host", ""),
             "scheme": h.get("scheme", "HTTP"),
             "httpHeaders": [{"name": x["name"], "value": x["value"]}
                             for x in h.get("httpHeaders") or []]}
        mp["httpGet"] = {k: v for k, v in g.items() if v not in ("", [], None) or k == "port"}
    elif p.get("tcpSocket"):
        t = p["tcpSocket"]
        mp["tcpSocket"] = {"port": t["port"], **({"host": t["host"]} if t.get("host") else {})}
    # Anything else (grpc, …): the probe goes out with its timings only.
    for k in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds",
              "successThreshold", "failureThreshold"):
        if p.get(k):
            mp[k] = p[k]
    return mp


def container_to_unit(c: dict, env: List[dict]) -> dict:
    u: dict = {"name": c["name"]}
    if c.get("image"):
        u["image"] = c["image"]
    if c.get("command"):
        u["command"] = list(c["command"])
    if c.get("args"):
        u["args"] = list(c["args"])
    if env:
        u["env"] = [{"name": e["name"], **({"value": e["value"]} if e["value"] else {})}
                    for e in env]
    mounts = [{"name": m["name"], "mountPath": m["mountPath"],
               **({"subPath": m["subPath"]} if m.get("subPath") else {})}
              for m in c.get("volumeMounts") or []]
    mounts += [{"name": RESOLVCONF, "mountPath": "/etc/resolv.conf"},
               {"name": ETCHOSTS, "mountPath": "/etc/hosts"}]
    u["volumeMounts"] = mounts
    ports = []
    for p in c.get("ports") or []:
        q = {"name": p.get("name", ""), "hostPort": p.get("hostPort", 0),
             "containerPort": p["containerPort"], "protocol": p.get("protocol", "TCP"),
             "hostIP": p.get("hostIP", "")}
        ports.append({k: v for k, v in q.items() if v not in ("", 0) or k == "containerPort"})
    if ports:
        u["ports"] = ports
    if c.get("workingDir"):
        u["workingDir"] = c["workingDir"]
    sc = c.get("securityContext")
    if sc is not None:
        s: dict = {}
        caps = sc.get("capabilities")
        if caps is not None:
            s["capabilities"] = {k: list(caps[k]) for k in ("add", "drop") if caps.get(k)}
        for k in ("runAsUser", "runAsGroup"):
            if sc.get(k) is not None:
                s[k] = sc[k]
        u["securityContext"] = s
    for k in ("livenessProbe", "readinessProbe", "startupProbe"):
        p = k8s_probe(c.get(k))
        if p is not None:
            u[k] = p
    u["resources"] = {"Limits": None, "Requests": None}
    return u


def _key_to_path(items):
    return [{"key": i["key"], "path": i["path"], **({"mode": i["mode"]} if "mode" in i else {})}
            for i in items or []]


def k8s_volume(v: dict) -> Optional[dict]:
    """k8sToMilpaVolume: None for a kind Kip cannot convert (PVC, …)."""
    name = v["name"]
    if "secret" in v:
        s = v["secret"]
        src = {"secretName": s["secretName"]}
        if s.get("items"):
            src["items"] = _key_to_path(s["items"])
        for k in ("defaultMode", "optional"):
            if k in s:
                src[k] = s[k]
        return {"name": name, "secret": src}
    if "hostPath" in v:
        return {"name": name, "hostPath": dict(v["hostPath"])}
    if "configMap" in v:
        s = v["configMap"]
        src = {"name": s["name"]}
        if s.get("items"):
            src["items"] = _key_to_path(s["items"])
        for k in ("defaultMode", "optional"):
            if k in s:
                src[k] = s[k]
        return {"name": name, "configMap": src}
    if "emptyDir" in v:
        e = v["emptyDir"] or {}
        src = {}
        if e.get("medium"):
            src["medium"] = e["medium"]
        if e.get("sizeLimit"):
            src["sizeLimit"] = int(_quantity(e["sizeLimit"]))
        return {"name": name, "emptyDir": src}
    if "projected" in v:
        p = v["projected"]
        sources = []
        for s in p["sources"]:
            if s.get("secret"):
                sources.append({"secret": {"name": s["secret"]["name"],
                                           **({"items": _key_to_path(s["secret"]["items"])}
                                              if s["secret"].get("items") else {})}})
            elif s.get("configMap"):
                sources.append({"configMap": {"name": s["configMap"]["name"],
                                              **({"items": _key_to_path(s["configMap"]["items"])}
                                                 if s["configMap"].get("items") else {})}})
            else:
                sources.append({})
        src = {"sources": sources}
        if "defaultMode" in p:
            src["defaultMode"] = p["defaultMode"]
        return {"name": name, "projected": src}
    return None


def k8s_to_milpa_pod(pod: dict, envs: Dict[str, List[dict]]) -> dict:
    """The api.PodSpec of k8sToMilpaPod; envs: container name → vk_env."""
    ps = pod["spec"]
    # api.NewPod's defaults; the instance type is chosen before dispatch.
    spec: dict = {"phase": "Running", "restartPolicy": ps.get("restartPolicy", "Always"),
                  "units": [], "initUnits": [], "imagePullSecrets": None,
                  "instanceType": "t3.small", "spot": {"policy": "Never"},
                  "resources": {}}
    if ps.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [s["name"] for s in ps["imagePullSecrets"]]
    for c in ps.get("initContainers") or []:
        spec["initUnits"].append(container_to_unit(c, envs[c["name"]]))
    for c in ps["containers"]:
        spec["units"].append(container_to_unit(c, envs[c["name"]]))
    vols = [v for v in (k8s_volume(v) for v in ps.get("volumes") or []) if v]
    vols += [{"name": RESOLVCONF, "packagePath": {"path": "/etc/resolv.conf"}},
             {"name": ETCHOSTS, "packagePath": {"path": "/etc/hosts"}}]
    spec["volumes"] = vols
    # The API server always defaults a securityContext, so Kip always
    # writes namespaceOptions (network 0 is left out by omitempty).
    sc = ps.get("securityContext") or {}
    ns = {"network": NS_NODE if ps.get("hostNetwork") else NS_POD,
          "pid": NS_NODE if ps.get("hostPID") else NS_CONTAINER,
          "ipc": NS_NODE if ps.get("hostIPC") else NS_CONTAINER}
    msc: dict = {"namespaceOptions": {k: v for k, v in ns.items() if v}}
    for k in ("runAsUser", "runAsGroup", "supplementalGroups"):
        if sc.get(k) is not None:
            msc[k] = sc[k]
    if sc.get("sysctls"):
        msc["sysctls"] = [{"name": s["name"], "value": s["value"]} for s in sc["sysctls"]]
    spec["securityContext"] = msc
    spec["dnsPolicy"] = ps.get("dnsPolicy", "ClusterFirst")
    if ps.get("dnsConfig"):
        spec["dnsConfig"] = ps["dnsConfig"]
    spec["resources"] = aggregate_resources(ps["containers"])
    for k in ("hostname", "subdomain"):
        if ps.get(k):
            spec[k] = ps[k]
    if ps.get("hostAliases"):
        spec["hostAliases"] = ps["hostAliases"]
    return spec


def expand_command_and_args(spec: dict) -> dict:
    """pkg/util/expand.go: regular units only, against the unit's env."""
    for u in spec["units"]:
        env = {e["name"]: e.get("value", "") for e in u.get("env") or []}
        for k in ("command", "args"):
            if u.get(k):
                u[k] = [_expand(x, env) for x in u[k]]
    return spec


def pod_parameters(pod: dict, spec: dict, pod_ip: str, node_name: str,
                   pod_hostname: str, credentials: Optional[dict] = None) -> dict:
    """updatePodUnits: secrets are never filled; annotations filtered."""
    ann = {k: v for k, v in (pod["metadata"].get("annotations") or {}).items()
           if k.startswith("pod.elotl.co/")}
    return {"secrets": None, "credentials": credentials or {},
            "spec": expand_command_and_args(spec), "Annotations": ann,
            "PodName": f"{pod['metadata']['namespace']}_{pod['metadata']['name']}",
            "NodeName": node_name, "PodIP": pod_ip, "PodHostname": pod_hostname}


# ---------------------------------------------------------------------------
# deploy_util.go

def make_deploy_package(files: Dict[str, Tuple[bytes, int]]) -> bytes:
    """makeDeployPackage: ROOTFS/<path> regular files, no directories."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.USTAR_FORMAT) as tf:
        for path, (data, mode) in files.items():
            name = "ROOTFS/" + path.lstrip("/")
            ti = tarfile.TarInfo(re.sub(r"/+", "/", name))
            ti.size, ti.mode, ti.uid, ti.gid = len(data), mode, 0, 0
            ti.mtime = 0
            tf.addfile(ti, io.BytesIO(data))
    return out.getvalue()


def _items_files(items, data: Dict[str, bytes], default_mode: int) -> Dict[str, Tuple[bytes, int]]:
    files = {}
    for it in items if items else [{"key": k} for k in data]:
        if it["key"] not in data:
            raise KeyError(f"non-existent key {it['key']}")
        files[it.get("path") or it["key"]] = (data[it["key"]], it.get("mode", default_mode))
    return files


def volume_packages(spec: dict, secrets: Dict[str, Dict[str, bytes]],
                    configmaps: Dict[str, Dict[str, str]]) -> List[Tuple[str, bytes]]:
    """deployPodVolumes: one package per volume of the spec, in order."""
    cm = {n: {k: v.encode() for k, v in d.items()} for n, d in configmaps.items()}
    out = []
    for v in spec["volumes"]:
        files: Dict[str, Tuple[bytes, int]] = {}
        if "configMap" in v:
            s = v["configMap"]
            files = _items_files(s.get("items"), cm[s["name"]], s.get("defaultMode", 0o644))
        elif "secret" in v:
            s = v["secret"]
            files = _items_files(s.get("items"), secrets[s["secretName"]],
                                 s.get("defaultMode", 0o644))
        elif "projected" in v:
            mode = v["projected"].get("defaultMode", 0o644)
            for src in v["projected"]["sources"]:
                if src.get("configMap"):
                    s = src["configMap"]
                    files.update(_items_files(s.get("items"), cm[s["name"]], mode))
                elif src.get("secret"):
                    s = src["secret"]
                    files.update(_items_files(s.get("items"), secrets[s["name"]], mode))
        out.append((v["name"], make_deploy_package(files)))
    return out


def resolvconf_package(servers: List[str], searches: List[str], options: List[str]) -> bytes:
    """createResolvconf of the DNS configurer's answer."""
    text = "".join(f"nameserver {s}\n" for s in servers)
    if searches:
        text += "search " + " ".join(searches) + "\n"
    if options:
        text += "options " + " ".join(options) + "\n"
    return make_deploy_package({"/etc/resolv.conf": (text.encode(), 0o644)})


MANAGED_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"


def etchosts_text(pod_ips: List[str], hostname: str, domain: str,
                  aliases: List[dict]) -> str:
    """util.CreateEtcHosts → managedHostsFileContent (not hostNetwork)."""
    t = MANAGED_HOSTS_HEADER
    t += "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    t += "fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\n"
    t += "fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
    for ip in pod_ips:
        t += f"{ip}\t{hostname}.{domain}\t{hostname}\n" if domain else f"{ip}\t{hostname}\n"
    if aliases:
        t += "\n# Entries added by HostAliases.\n"
        for a in aliases:
            t += f"{a['ip']}\t" + "\t".join(a["hostnames"]) + "\n"
    return t


def etchosts_package(text: str) -> bytes:
    return make_deploy_package({"/etc/hosts": (text.encode(), 0o644)})


# ---------------------------------------------------------------------------
# the status, as json.Unmarshal into Kip's api.PodStatusReply sees it

class GoDecodeError(ValueError):
    pass


def _go_time(v, where):
    if v is None:
        return None
    if not isinstance(v, str):
        raise GoDecodeError(f"{where}: time is not a string")
    try:
        return datetime.datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        try:
            return datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError as e:
            raise GoDecodeError(f"{where}: {v!r} is not RFC 3339") from e


def _go_int32(v, where):
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int) or not -2 ** 31 <= v < 2 ** 31:
        raise GoDecodeError(f"{where}: {v!r} is not an int32")
    return v


def _go_str(v, where):
    if v is None:
        return ""
    if not isinstance(v, str):
        raise GoDecodeError(f"{where}: {v!r} is not a string")
    return v


def _go_bool(v, where):
    if v is None:
        return False
    if not isinstance(v, bool):
        raise GoDecodeError(f"{where}: {v!r} is not a bool")
    return v


def _state(o, where) -> dict:
    if o is None:
        o = {}
    if not isinstance(o, dict):
        raise GoDecodeError(f"{where}: not an object")
    st = {"Waiting": None, "Running": None, "Terminated": None}
    if o.get("waiting") is not None:
        w = o["waiting"]
        st["Waiting"] = {"Reason": _go_str(w.get("reason"), where),
                         "StartFailure": _go_bool(w.get("startFailure"), where),
                         "Message": _go_str(w.get("message"), where)}
    if o.get("running") is not None:
        st["Running"] = {"StartedAt": _go_time(o["running"].get("startedAt"), where)}
    if o.get("terminated") is not None:
        t = o["terminated"]
        st["Terminated"] = {"ExitCode": _go_int32(t.get("exitCode"), where),
                            "FinishedAt": _go_time(t.get("finishedAt"), where),
                            "Reason": _go_str(t.get("reason"), where),
                            "Message": _go_str(t.get("message"), where),
                            "StartedAt": _go_time(t.get("startedAt"), where)}
    return st


def _unit_status(o, where) -> dict:
    if not isinstance(o, dict):
        raise GoDecodeError(f"{where}: not an object")
    started = o.get("started")
    if started is not None and not isinstance(started, bool):
        raise GoDecodeError(f"{where}.started: not a bool")
    return {"Name": _go_str(o.get("name"), where), "State": _state(o.get("state"), where),
            "LastTerminationState": _state(o.get("lastState"), where),
            "RestartCount": _go_int32(o.get("restartCount"), where),
            "Image": _go_str(o.get("image"), where), "Ready": _go_bool(o.get("ready"), where),
            "Started": started}


def decode_status(text: str) -> dict:
    import json
    o = json.loads(text)
    if not isinstance(o, dict):
        raise GoDecodeError("not an object")
    usage = o.get("resourceUsage") or {}
    for k, v in usage.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GoDecodeError(f"resourceUsage[{k}]: {v!r} is not a float64")
    return {"UnitStatuses": [_unit_status(u, "unitStatus") for u in o.get("unitStatus") or []],
            "InitUnitStatuses": [_unit_status(u, "initUnitStatus")
                                 for u in o.get("initUnitStatus") or []],
            "ResourceUsage": usage, "PodIP": _go_str(o.get("podIP"), "podIP")}


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def now() -> float:
    return time.time()
