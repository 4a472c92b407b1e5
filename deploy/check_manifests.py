#!/usr/bin/env python3
"""Consistency checks on rendered manifests that API-schema validation cannot make.

Reads a kustomize build (a YAML stream) on stdin; prints one line per finding; exits 1 if any.
Used by deploy/validate. Checks:
  - StatefulSets run exactly one replica (sled is single-writer), name an existing headless
    Service, and select their own pod template; Deployments (scaled, HPA) set a shared store
    (*_SVC_STORE) when they run a server, and HorizontalPodAutoscalers target a Deployment with CPU requests;
  - Secrets referenced by env secretKeyRef exist and hold the key;
  - every Service and PodDisruptionBudget selects a pod template, Service target ports exist;
  - ConfigMaps and Secrets referenced by pods exist (or are listed with --external-secret);
  - probe ports, the Prometheus annotation and the listen addresses in the ConfigMap agree with
    the container ports; terminationGracePeriodSeconds exceeds the configured shutdown grace;
  - the hardening every pod must keep (non-root, read-only root, no privilege escalation, all
    capabilities dropped, RuntimeDefault seccomp, requests and limits);
  - session-svc's StatefulSet sets its sled cache (*_SVC_CACHE_BYTES) to at most a quarter of
    the container's memory limit (sled holds much more than its accounted cache; see
    deploy/README.md, "Memory"), and memory-svc its memory budget (MEMORY_SVC_MEMORY_BUDGET,
    which sizes its redb cache) to at most half of it (a quarter is the default); memory-svc
    Deployments set their budget too;
  - with --bin-dir DIR: every flag in `args` and every SESSION_SVC_*/MEMORY_SVC_* key of the
    ConfigMaps is known to the binary's --help (a misspelt environment variable is silently
    ignored otherwise).
"""

import argparse
import os
import re
import subprocess
import sys

import yaml

findings = []


def finding(obj, msg):
    findings.append(f"{obj['kind']}/{obj['metadata']['name']}: {msg}")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


QUANTITY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
                     "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def bytes_of(quantity):
    """A Kubernetes memory quantity ("1Gi", "512M", "1073741824") in bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T|)", str(quantity))
    return int(m.group(1)) * QUANTITY_SUFFIXES[m.group(2)] if m else None


def port_of(addr):
    m = re.search(r":(\d+)$", addr or "")
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--external-secret", action="append", default=[],
                    help="a Secret that is created out of band (may be referenced, not rendered)")
    ap.add_argument("--bin-dir", help="directory with the server binaries, to check flags and env names")
    opts = ap.parse_args()

    objs = [o for o in yaml.safe_load_all(sys.stdin) if o]
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    configmaps = by_kind.get("ConfigMap", {})
    secrets = set(by_kind.get("Secret", {})) | set(opts.external_secret)
    services = by_kind.get("Service", {})
    workloads = [o for k in ("StatefulSet", "Deployment") for o in by_kind.get(k, {}).values()]
    templates = [(w, w["spec"]["template"]) for w in workloads]

    for w, tpl in templates:
        spec, labels = tpl["spec"], tpl["metadata"].get("labels", {})
        if not selects(w["spec"]["selector"].get("matchLabels"), labels):
            finding(w, "selector does not match the pod template labels")
        stores = [e for c in spec["containers"] for e in c.get("env", [])
                  if re.match(r"^(SESSION|MEMORY)_SVC_STORE$", e["name"])]
        servers = [c for c in spec["containers"]
                   if os.path.basename((c.get("command") or [""])[0]) in ("session-svc", "memory-svc")]
        if w["kind"] == "Deployment" and servers and not stores:
            finding(w, "a Deployment needs a shared store (*_SVC_STORE): sled is one process per volume")
        if w["kind"] == "StatefulSet":
            if w["spec"].get("replicas") != 1:
                finding(w, "replicas must be 1 (sled is single-writer: one replica per volume)")
            svc = services.get(w["spec"].get("serviceName"))
            if svc is None or svc["spec"].get("clusterIP") != "None":
                finding(w, f"serviceName {w['spec'].get('serviceName')!r} is not a headless Service")
        psc = spec.get("securityContext", {})
        if psc.get("runAsNonRoot") is not True or not isinstance(psc.get("runAsUser"), int):
            finding(w, "pod must set runAsNonRoot and a numeric runAsUser")
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            finding(w, "pod seccompProfile must be RuntimeDefault")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in w["spec"].get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "secret" in v and v["secret"]["secretName"] not in secrets and not v["secret"].get("optional"):
                finding(w, f"volume {v['name']}: Secret {v['secret']['secretName']} is not defined")
            if "configMap" in v and v["configMap"]["name"] not in configmaps:
                finding(w, f"volume {v['name']}: ConfigMap {v['configMap']['name']} is not defined")
        ann = tpl["metadata"].get("annotations", {})
        for c in spec["containers"]:
            where = f"container {c['name']}"
            ports = {p["containerPort"]: p.get("name") for p in c.get("ports", [])}
            env = {}
            for src in c.get("envFrom", []):
                ref = src.get("configMapRef") or src.get("secretRef")
                pool = configmaps if "configMapRef" in src else secrets
                if ref["name"] not in pool:
                    finding(w, f"{where}: envFrom {ref['name']} is not defined")
                elif "configMapRef" in src:
                    env.update(configmaps[ref["name"]].get("data", {}))
            for e in c.get("env", []):
                if "value" in e:
                    env[e["name"]] = e["value"]
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref is not None:
                    secret = by_kind.get("Secret", {}).get(ref["name"])
                    if ref["name"] not in secrets:
                        finding(w, f"{where}: env {e['name']}: Secret {ref['name']} is not defined")
                    elif secret is not None and ref["key"] not in secret.get("data", {}):
                        finding(w, f"{where}: env {e['name']}: Secret {ref['name']} has no key {ref['key']}")
                    env[e["name"]] = "(from a Secret)"
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes and m["name"] not in claims:
                    finding(w, f"{where}: volumeMount {m['name']} has no volume")
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if probe is None:
                    if kind != "startupProbe":
                        finding(w, f"{where}: no {kind}")
                    continue
                handler = probe.get("grpc") or probe.get("tcpSocket") or probe.get("httpGet") or {}
                port = handler.get("port")
                if port not in ports and port not in ports.values():
                    finding(w, f"{where}: {kind} port {port} is not a container port")
            scrape = ann.get("prometheus.io/port")
            if scrape is not None and int(scrape) not in ports:
                finding(w, f"prometheus.io/port {scrape} is not a container port")
            for key, value in env.items():
                if key.endswith("_LISTEN") or key.endswith("_METRICS_LISTEN"):
                    p = port_of(value)
                    if p not in ports:
                        finding(w, f"{where}: {key}={value} listens on a port that is not a container port")
                if key.endswith("_SHUTDOWN_GRACE_SECS"):
                    if int(value) >= spec.get("terminationGracePeriodSeconds", 30):
                        finding(w, f"terminationGracePeriodSeconds must exceed {key}={value}")
            csc = c.get("securityContext", {})
            if (csc.get("allowPrivilegeEscalation") is not False
                    or csc.get("readOnlyRootFilesystem") is not True
                    or csc.get("capabilities", {}).get("drop") != ["ALL"]):
                finding(w, f"{where}: needs allowPrivilegeEscalation false, readOnlyRootFilesystem, drop ALL")
            res = c.get("resources", {})
            if not res.get("requests") or not res.get("limits", {}).get("memory"):
                finding(w, f"{where}: needs resource requests and a memory limit")
            limit = bytes_of(res.get("limits", {}).get("memory"))
            budget = env.get("MEMORY_SVC_MEMORY_BUDGET")
            if budget is not None:
                if not str(budget).isdigit():
                    finding(w, f"{where}: MEMORY_SVC_MEMORY_BUDGET={budget} is not a number of bytes")
                elif limit is not None and int(budget) * 2 > limit:
                    finding(w, f"{where}: memory budget {budget} bytes is more than half the memory limit {limit}")
            elif any(k.startswith("MEMORY_SVC_") for k in env):
                finding(w, f"{where}: set MEMORY_SVC_MEMORY_BUDGET explicitly, a quarter of the memory limit")
            if w["kind"] == "StatefulSet" and budget is None:
                cache = next((v for k, v in env.items() if re.match(r"^(SESSION|MEMORY)_SVC_CACHE_BYTES$", k)), None)
                if cache is None or not str(cache).isdigit():
                    finding(w, f"{where}: set *_SVC_CACHE_BYTES (the database's cache) explicitly, below the memory limit")
                elif limit is not None and int(cache) * 4 > limit:
                    finding(w, f"{where}: cache {cache} bytes is more than a quarter of the memory limit {limit}")
            if opts.bin_dir:
                check_binary(w, c, env, opts.bin_dir)

    for hpa in by_kind.get("HorizontalPodAutoscaler", {}).values():
        ref = hpa["spec"]["scaleTargetRef"]
        target = by_kind.get(ref["kind"], {}).get(ref["name"])
        if target is None:
            finding(hpa, f"scaleTargetRef {ref['kind']}/{ref['name']} is not defined")
        elif ref["kind"] == "StatefulSet":
            finding(hpa, "a sled StatefulSet must not be scaled (one replica per volume)")
        elif any(c.get("resources", {}).get("requests", {}).get("cpu") is None
                 for c in target["spec"]["template"]["spec"]["containers"]):
            finding(hpa, "CPU utilization needs a CPU request on every container")

    for kind in ("Service", "PodDisruptionBudget"):
        for o in by_kind.get(kind, {}).values():
            sel = o["spec"].get("selector") or {}
            sel = sel.get("matchLabels", sel) if kind == "PodDisruptionBudget" else sel
            matched = [t for _, t in templates if selects(sel, t["metadata"].get("labels", {}))]
            if not matched:
                finding(o, "selector matches no pod template")
            if kind == "Service":
                for p in o["spec"].get("ports", []):
                    target = p.get("targetPort", p["port"])
                    known = {x for t in matched for c in t["spec"]["containers"]
                             for q in c.get("ports", []) for x in (q["containerPort"], q.get("name"))}
                    if matched and target not in known:
                        finding(o, f"targetPort {target} is not a port of the selected pods")

    for f in findings:
        print(f"ERROR {f}")
    print(f"check_manifests: {len(objs)} objects, {len(findings)} findings")
    return 1 if findings else 0


def check_binary(w, c, env, bin_dir):
    exe = os.path.join(bin_dir, os.path.basename((c.get("command") or ["?"])[0]))
    try:
        help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30).stdout
    except OSError as e:
        finding(w, f"cannot run {exe} --help: {e}")
        return
    for arg in c.get("args", []):
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and not re.search(rf"{re.escape(flag)}(?![\w-])", help_text):
            finding(w, f"{os.path.basename(exe)} has no flag {flag}")
    for key in env:
        if re.match(r"^(SESSION|MEMORY)_SVC_", key) and f"env: {key}=" not in help_text:
            finding(w, f"{os.path.basename(exe)} does not read {key} (no such env fallback)")


if __name__ == "__main__":
    sys.exit(main())
