"""kube-proxy's health servers on this kernel: a run of health-check-local answers each node's
healthCheckNodePort and /healthz as kube-proxy does, its balancer keeps only the node that answered 200,
and nothing the servers held outlives the lab (its namespaces are gone, no socket is left listening);
a deployed lab that serves keeps answering until destroy, which stops the server that answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kpemu.kernel.netns import list_netns
from kpemu.statedir import scratch_dir
from kpemu.traffic.labserver import PIDFILE
from tests.helpers import SCENARIOS, kpemu, needs_root

pytestmark = [needs_root, pytest.mark.root]


def test_a_run_answers_health_checks_and_its_balancer_skips_the_503_nodes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = kpemu("run", str(SCENARIOS / "health-check-local.yaml"), "--runtime", "host", "--name", "it-health",
                "--out", str(out), timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not list_netns("kp-it-health-"), "the lab was not destroyed"
    collected = json.loads((out / "collected.json").read_text())
    first = {name: r["connections"][0] for name, r in collected["results"].items()}
    assert (first["probe-node1"]["status"], first["probe-node2"]["status"], first["probe-node3"]["status"]) == \
        (200, 503, 503)
    assert first["probe-node1"]["reply"] == ('{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n'
                                             '\t},\n\t"localEndpoints": 1,\n\t"serviceProxyHealthy": true\n}')
    assert collected["balanced"] == [{"balancer": "lb", "status": {"node1:32000": 200, "node2:32000": 503,
                                                                    "node3:32000": 503}}]
    assert {c["backend"] for c in collected["results"]["via-load-balancer"]["connections"]} == {"web-0"}


def test_a_served_deployed_lab_answers_until_destroy(tmp_path: Path) -> None:
    topo = yaml.safe_load((SCENARIOS / "health-check-local.yaml").read_text())["topology"]
    topo["name"] = "it-healthd"
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(topo, sort_keys=False))
    assert kpemu("deploy", str(path), "--serve", "--runtime", "host", timeout=120).returncode == 0
    try:
        got = kpemu("exec", "it-healthd", "prober", "--", "curl", "-s", "-i", "-m", "2",
                    "http://192.168.1.100:10256/healthz", timeout=30)
        # text mode reads the \r\n line ends as \n
        assert got.stdout.startswith("HTTP/1.1 200 OK\nContent-Type: application/json\n"), got.stdout
        assert '"nodeEligible":true,"healthy":true' in got.stdout
        server = int((scratch_dir("it-healthd") / PIDFILE).read_text().split(":")[0])
    finally:
        done = kpemu("destroy", "it-healthd", timeout=60)
    assert done.returncode == 0, done.stderr
    assert not list_netns("kp-it-healthd-")
    status = Path(f"/proc/{server}/status")  # the process that served the health checks is stopped (gone, or a
    assert not status.exists() or "State:\tZ" in status.read_text()  # zombie where nothing reaps orphans)
