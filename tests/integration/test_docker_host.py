"""Container members on this kernel: the docker scenario end to end (real HTTP through a NodePort
to busybox httpd containers), and SIGKILLed runs cleaned up by `destroy --all` with the host's
interfaces, routes and rules byte-identical before and after.

The engine is the host's when one answers, else kpemu's own dockerd (own socket and data-root, no
bridge, no iptables), which these tests leave stopped. KPEMU_DOCKER_KILL_RUNS sets how many runs
the kill test starts (default 3; the issue's acceptance figure is 10).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kpemu.docker.daemon import PrivateDockerd
from kpemu.docker.engine import connect
from kpemu.docker.image import build_local_image
from kpemu.docker.members import LABEL_LAB
from kpemu.kernel.netns import list_netns
from tests.helpers import SCENARIOS, kpemu, needs_root, start_kpemu

SCENARIO = SCENARIOS / "nodeport-iptables-docker.yaml"
KILL_RUNS = int(os.environ.get("KPEMU_DOCKER_KILL_RUNS", "3"))
pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(shutil.which("dockerd") is None and not Path("/var/run/docker.sock").exists(),
                       reason="no docker engine and no dockerd (make setup installs docker.io)"),
]


def host_state() -> str:
    """The root namespace's interfaces, addresses, routes, rules and forwarding switch, as text."""
    cmds = [["ip", "link"], ["ip", "addr"], ["ip", "route"], ["iptables-save"], ["ip6tables-save"],
            ["nft", "list", "ruleset"], ["sysctl", "net.ipv4.ip_forward"]]
    out = []
    for c in cmds:
        res = subprocess.run(c, capture_output=True, text=True)
        out.append(f"$ {' '.join(c)}\n" + "".join(line for line in res.stdout.splitlines(keepends=True)
                                                  if not line.startswith("#")))  # iptables-save dates
    return "\n".join(out)


def kpemu_containers() -> list[str]:
    client = connect(start=False)
    if client is None:  # no engine runs: kpemu's own dockerd was stopped with nothing left in it
        return []
    return sorted(c.name for c in client.containers.list(all=True, filters={"label": LABEL_LAB}))


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    """The test image on the engine; afterwards the private dockerd is stopped and the host unchanged."""
    before = host_state()
    client = connect(start=True)
    assert client is not None
    build_local_image(client)
    client.close()
    try:
        yield
    finally:
        PrivateDockerd().stop()
        assert host_state() == before, "the host's interfaces, routes or rules changed"


def test_http_through_the_nodeport_to_container_pods(engine: None, tmp_path: Path) -> None:
    res = kpemu("run", str(SCENARIO), "--runtime", "host", "--out", str(tmp_path), "--json", timeout=120)
    assert res.returncode == 0, res.stderr[-4000:]
    data = json.loads(res.stdout)
    flows = {f["name"]: f for f in data["flows"]}
    ext = flows["external-http-nodeport"]
    assert ext["ok"] and ext["backends"] == ["nginx-0", "nginx-1"]
    assert {(c["status"], c["reply"]) for c in ext["connections"]} == {
        (200, "kpemu pod nginx-0"), (200, "kpemu pod nginx-1")}
    wget = flows["container-wget-nodeport"]  # the container client's own wget
    assert wget["ok"] and all(c["status"] == 200 and c["sport"] is None for c in wget["connections"])
    assert [f"{h['member']}/{h['interface']}" for h in wget["connections"][0]["hops"]][:4] == [
        "wget-client/eth0", "underlay/x-wget-client", "underlay/n-minikube", "minikube/eth0"]
    report = (tmp_path / "report.md").read_text()
    assert "got HTTP 200:" in report and "kpemu pod nginx-" in report
    assert not list_netns("kp-nodeport-iptables-docker-")
    assert kpemu_containers() == []


def kill_scenario(tmp_path: Path, i: int) -> Path:
    """The docker scenario under its own lab name, so killed runs do not collide."""
    data = yaml.safe_load(SCENARIO.read_text())
    data.update(name=f"docker-kill-{i}", topology=str((SCENARIO.parent / data["topology"]).resolve()))
    path = tmp_path / f"kill-{i}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_sigkilled_runs_leave_nothing_destroy_all_cannot_find(engine: None, tmp_path: Path) -> None:
    before = host_state()
    delays = [0.4, 1.0, 1.8, 2.6, 3.4]  # while the dockerd starts, containers start, traffic runs
    for i in range(KILL_RUNS):
        p = start_kpemu("run", str(kill_scenario(tmp_path, i)), "--runtime", "host", "--no-trace",
                        "--out", str(tmp_path / f"out-{i}"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i % KILL_RUNS != KILL_RUNS - 1 or KILL_RUNS == 1:  # every run but the last is killed
            time.sleep(delays[i % len(delays)])
            p.send_signal(signal.SIGKILL)
        p.wait(timeout=120)
    res = kpemu("destroy", "--all", timeout=120)
    assert res.returncode == 0, res.stderr
    assert not list_netns("kp-docker-kill-")
    assert kpemu_containers() == []
    assert not PrivateDockerd().running(), "destroy --all stops kpemu's own dockerd once it holds nothing"
    assert host_state() == before


def test_exec_in_a_container_member_runs_docker_exec(engine: None, tmp_path: Path) -> None:
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump({
        "name": "docker-exec",
        "nodes": [{"name": "node1", "ip": "10.246.0.2", "podCIDR": "10.244.0.0/24"}],
        "pods": [{"name": "web-0", "node": "node1", "ip": "10.244.0.2", "ports": [80],
                  "image": "kpemu/busybox:local", "env": {"PORT": "80"}}],
    }))
    try:
        assert kpemu("deploy", str(topo)).returncode == 0
        res = kpemu("exec", "docker-exec", "web-0", "--", "sh", "-c",
                    "hostname; wget -q -O - http://127.0.0.1/; ip -4 addr show eth0", timeout=30)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[:2] == ["web-0", "kpemu pod web-0"]  # the image's own shell, wget and httpd
        assert "inet 10.244.0.2/24" in res.stdout  # kpemu's veth and address in the container
        assert kpemu_containers() == ["kp-docker-exec-web-0"]
    finally:
        kpemu("destroy", "docker-exec", timeout=60)
    assert kpemu_containers() == [] and not list_netns("kp-docker-exec-")
