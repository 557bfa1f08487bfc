#!/usr/bin/env python3
"""What the AgentDeployment writes of the fleet benchmark cost kube-apiserver,
with two sets of CRDs side by side (docs/BENCHMARKS.md, "Capacity").

Usage: hack/crd-write-cost.sh DIR_A DIR_B [N] [ROUNDS]

The shell wrapper starts two kube-apiservers (`testenv`, one per CRD
directory) and runs this script with KUBECONFIG_A and KUBECONFIG_B set. It
sends the same writes to both, N objects at a time (default 600) in
alternating batches, ROUNDS times (default 3), and prints each server's CPU
(from /proc, user + system) per request, median of the rounds, for: the
server-side apply that creates the object (the benchmark's), the finalizer
and create-marker patch, the id-annotation patch, a status write as a merge
patch and one as the operator sends it (a server-side apply with its field
manager), and a metadata patch of an object that has a deployment id. With
the same directory twice (A/A) it shows the noise: about 8 % a row.
Both servers run at once on the same cores, so the host's drift in speed
(a third within an hour on the 2-core machine) touches both alike.
"""
import base64
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

BASE = "/apis/agentserver.dev/v1alpha1/namespaces/default/agentdeployments"
ID = "d171f5cb-197f-4960-ad51-6fa41a7fa77a"
MERGE = "application/merge-patch+json"


class Server:
    """One kube-apiserver: its address, client certificate and process."""

    def __init__(self, name, kubeconfig):
        self.name = name
        k = yaml.safe_load(open(kubeconfig))
        user, cluster = k["users"][0]["user"], k["clusters"][0]["cluster"]
        d = tempfile.mkdtemp(prefix=f"crd-cost-{name}-")
        paths = {}
        for part, data in (("ca", cluster["certificate-authority-data"]),
                           ("crt", user["client-certificate-data"]),
                           ("key", user["client-key-data"])):
            paths[part] = os.path.join(d, part)
            with open(paths[part], "wb") as f:
                f.write(base64.b64decode(data))
        self.host, self.port = cluster["server"].removeprefix("https://").split(":")
        self.ctx = ssl.create_default_context(cafile=paths["ca"])
        self.ctx.load_cert_chain(paths["crt"], paths["key"])
        self.local = threading.local()
        out = subprocess.check_output(["ss", "-ltnpH", f"sport = :{self.port}"]).decode()
        self.pid = out.split("pid=")[1].split(",")[0]

    def send(self, method, path, body, content_type):
        if not hasattr(self.local, "conn"):
            self.local.conn = http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx)
        c = self.local.conn
        c.request(method, path, body=json.dumps(body),
                  headers={"Content-Type": content_type, "Accept": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{self.name}: {method} {path}: {r.status} {data[:300]!r}")

    def cpu_seconds(self):
        fields = open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def manifest(name):
    return {"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": name},
            "spec": {"source": "github", "controlPlaneRef": {"name": "cp"},
                     "sourceConfig": {"integrationId": "3f2a0f9e-6c1d-4a57-9b2e-5d8c7a1b0e42",
                                      "repoUrl": "https://github.com/example/agent",
                                      "deploymentType": "dev", "buildOnPush": False},
                     "sourceRevisionConfig": {"repoRef": "main",
                                              "langgraphConfigPath": "langgraph.json"}}}


def steps(rnd):
    """The writes of one object, as (label, send(server, i))."""
    def name(i):
        return f"a{rnd}-{i:05d}"
    status = {"status": {"observedGeneration": 1, "deploymentId": ID, "conditions": [
        {"type": "Ready", "status": "True", "reason": "RevisionDeployed", "message": "m",
         "lastTransitionTime": "2026-11-28T05:00:00Z", "observedGeneration": 1}]}}
    return [
        ("create (apply)", lambda s, i: s.send(
            "PATCH", f"{BASE}/{name(i)}?fieldManager=bench&force=true", manifest(name(i)),
            "application/apply-patch+yaml")),
        ("finalizer+marker", lambda s, i: s.send("PATCH", f"{BASE}/{name(i)}", {"metadata": {
            "finalizers": ["agentserver.dev/remote-deployment"],
            "annotations": {"agentserver.dev/create-pending": "2026-11-28T05:00:00Z"}}}, MERGE)),
        ("id annotation", lambda s, i: s.send("PATCH", f"{BASE}/{name(i)}", {"metadata": {
            "annotations": {"agentserver.dev/create-pending": None,
                            "agentserver.dev/deployment-id": ID}}}, MERGE)),
        ("status (merge)", lambda s, i: s.send("PATCH", f"{BASE}/{name(i)}/status", status, MERGE)),
        ("status (apply)", lambda s, i: s.send(
            "PATCH", f"{BASE}/{name(i)}/status?fieldManager=agent-operator&force=true",
            {"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
             "status": dict(status["status"], conditions=[
                 dict(status["status"]["conditions"][0], message="applied")])},
            "application/apply-patch+yaml")),
        ("later metadata", lambda s, i: s.send(
            "PATCH", f"{BASE}/{name(i)}", {"metadata": {"labels": {"team": "a"}}}, MERGE)),
    ]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    a = Server("A", os.environ["KUBECONFIG_A"])
    b = Server("B", os.environ["KUBECONFIG_B"])
    ms = {}
    with ThreadPoolExecutor(8) as pool:
        for rnd in range(rounds):
            for label, send in steps(rnd):
                for s in (a, b) if rnd % 2 == 0 else (b, a):
                    time.sleep(0.5)
                    before = s.cpu_seconds()
                    list(pool.map(lambda i: send(s, i), range(n)))
                    ms.setdefault((label, s.name), []).append(1000 * (s.cpu_seconds() - before) / n)
    total_a = total_b = 0.0
    print(f"kube-apiserver CPU per request, ms (median of {rounds} rounds of {n}):")
    for label, _ in steps(0):
        ma = sorted(ms[(label, "A")])[rounds // 2]
        mb = sorted(ms[(label, "B")])[rounds // 2]
        total_a += ma
        total_b += mb
        print(f"  {label:18s} A {ma:6.2f}   B {mb:6.2f}")
    print(f"  {'sum':18s} A {total_a:6.2f}   B {total_b:6.2f}   B/A {total_b / total_a:.3f}")


if __name__ == "__main__":
    main()
