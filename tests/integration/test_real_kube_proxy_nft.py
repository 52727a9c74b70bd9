"""The test of record run for real: kube-proxy itself (v1.37.2 and v1.29.6, built from source by `kpemu
upstream build`) in nftables mode, in a throwaway namespace, against etcd and kube-apiserver holding
upstream's TestOverallNFTablesRules fixture (tests/data/nftables/overall-1.37.yaml, at the binary's
release); the table it programs, as `nft list table ip kube-proxy` prints it, is what kpemu predicts
for that topology, set by set and chain by chain (1.37 with the KubeProxyNFTablesLocalhostNodePorts
gate on and off). A release not built is skipped, naming the command that builds it.

Two differences are the lab's, not kpemu's: the API server's own Service default/kubernetes
(172.30.0.1:443, without endpoints, as no endpoint reconciler runs) is added to the prediction, and
chains are compared as a set, since the order nft lists them in is the order they were created
across the real process's syncs, where kpemu models one full sync on a clean node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpemu.inputs.topology import load_topology
from kpemu.kernel.netns import run_in
from kpemu.proxy.nftables import listing, nftables_transaction
from tests.helpers import ROOT, needs_root

pytestmark = [needs_root, pytest.mark.root]
BIN = Path("/var/cache/kpemu/upstream/bin")
FIXTURE = ROOT / "tests" / "data" / "nftables" / "overall-1.37.yaml"

# Run inside the namespace: the control plane, the topology written, kube-proxy started with the
# fixture's settings, and its table once it holds the services' elements.
DRIVER = """
import json, subprocess, sys, time
from pathlib import Path
from kpemu.controlplane.plane import start
from kpemu.controlplane.write import write_topology
from kpemu.model.topology import Topology
from kpemu.upstream.build import built_control_plane

topo, out, kube_proxy = Topology.model_validate(json.loads(sys.argv[1])), Path(sys.argv[2]), sys.argv[3]
say = lambda m: print(m, file=sys.stderr, flush=True)
cp = start(topo.name, topo, {k: Path(v.path) for k, v in built_control_plane().items()}, say)
try:
    write_topology(cp.client, topo)
    (out / "kubeconfig").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": cp.server, "certificate-authority": str(cp.client.ca)}}],
        "users": [{"name": "u", "user": {"token": cp.client.token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    kp = topo.kubeProxy
    (out / "config.json").write_text(json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "nftables",
        "hostnameOverride": topo.nodes[0].name, "clusterCIDR": kp.clusterCIDR, "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": kp.nodePortAddresses,
        "featureGates": json.loads(sys.argv[4]),
        "clientConnection": {"kubeconfig": str(out / "kubeconfig")},
        # nothing kernel-wide: no conntrack table size or timeouts
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
                      "udpTimeout": "0s", "udpStreamTimeout": "0s"},
        "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249"}))
    with open(out / "kube-proxy.log", "w") as log:
        proc = subprocess.Popen([kube_proxy, "--config", str(out / "config.json"), "-v", "2"], stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        for _ in range(90):
            time.sleep(1)
            if "SyncProxyRules complete" in (out / "kube-proxy.log").read_text():
                time.sleep(2)  # the syncs the informers' last events cause
                break
        print(subprocess.run(["nft", "list", "table", "ip", "kube-proxy"], capture_output=True, text=True).stdout)
    finally:
        proc.terminate()
        proc.wait(20)
finally:
    cp.stop()
"""


def _blocks(text: str) -> dict[str, str]:
    """A listing's objects by their heading (`\\tchain NAME {`), each its whole text."""
    out: dict[str, str] = {}
    head = ""
    for line in text.splitlines():
        if line.startswith("\t") and not line.startswith("\t\t") and line.endswith("{"):
            head = line
            out[head] = ""
        elif head:
            out[head] += line + "\n"
            if line == "\t}":
                head = ""
    return out


@pytest.mark.parametrize(("release", "gate"), [("1.37.2", True), ("1.37.2", False), ("1.29.6", False)],
                         ids=["1.37.2-localhost-gate-on", "1.37.2-localhost-gate-off", "1.29.6"])
def test_real_kube_proxy_programs_what_kpemu_predicts(scratch: str, tmp_path: Path, release: str, gate: bool) -> None:
    """1.29's nftables mode is alpha, behind NFTablesProxyMode; the localhost gate exists from 1.37."""
    kube_proxy = BIN / f"v{release}" / "kube-proxy"
    if not kube_proxy.is_file():
        pytest.skip(f"kube-proxy v{release} is not built: kpemu upstream build {release}")
    minor = release.rsplit(".", 1)[0]
    gates = {"NFTablesProxyMode": True} if minor == "1.29" else {"KubeProxyNFTablesLocalhostNodePorts": gate}
    for argv in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                 ["ip", "address", "add", "192.168.0.2/24", "dev", "v0"], ["ip", "link", "set", "v0", "up"],
                 ["ip", "link", "set", "v1", "up"]):
        assert run_in(scratch, argv).returncode == 0
    topo = load_topology(FIXTURE)
    kp = topo.kubeProxy
    topo = topo.model_copy(update={"name": "rel-real-kp", "kubeProxy": kp.model_copy(update={"version": minor,
        "featureGates": kp.featureGates.model_copy(update={"KubeProxyNFTablesLocalhostNodePorts": gate})})})
    res = subprocess.run(["ip", "netns", "exec", scratch, sys.executable, "-c", DRIVER,
                          json.dumps(topo.model_dump(mode="json")), str(tmp_path), str(kube_proxy), json.dumps(gates)],
                         capture_output=True, text=True, timeout=240, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    got = res.stdout
    assert "service-ips" in got, (tmp_path / "kube-proxy.log").read_text()[-2000:]
    apiserver = {"name": "kubernetes", "clusterIP": "172.30.0.1", "endpoints": [],
                 "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}
    predicted = topo.model_copy(update={"services": [*topo.services, type(topo.services[0]).model_validate(apiserver)]})
    want = listing(nftables_transaction(predicted, "test-node").table())
    assert got.splitlines()[:2] == want.splitlines()[:2]  # the table and its comment
    assert _blocks(got) == _blocks(want)
    assert ("localhost-nodeport-reject-ports" in got) is gate
