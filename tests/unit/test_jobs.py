"""The job a run resolves to (pure), the read-back check, and the agent's request protocol."""

from __future__ import annotations

import json
from pathlib import Path

from kpemu.cni import cni_of
from kpemu.inputs.topology import load_topology
from kpemu.jobs import exchange
from kpemu.jobs.agent import serve
from kpemu.jobs.schema import Readback, Reply
from kpemu.jobs.verify import readback_problems
from kpemu.plan.batch import fabric_steps, route_line
from kpemu.plan.fabric import plan_fabric
from kpemu.plan.types import Route
from kpemu.proxy.modes import mode_of
from tests.helpers import TOPOLOGIES


def test_fabric_is_a_few_batches_per_namespace_and_veths_go_straight_into_their_namespaces() -> None:
    topo = load_topology(TOPOLOGIES / "flannel-vxlan.yaml")
    plan = plan_fabric(topo, cni_of(topo).plan)
    steps = fabric_steps(plan, "kpemu:lab=flannel")
    create, veths = steps[0], next(s for s in steps if s.what == "create the veth pairs")
    assert create.argv == ("ip", "-batch", "-") and create.ns is None
    assert create.input == "".join(f"netns add {ns.name}\n" for ns in plan.namespaces)
    for line in veths.input.splitlines():  # created from the executor's namespace, never living there
        assert " netns kp-flannel-" in line.split(" type veth ")[0] and " netns kp-flannel-" in line.split(" peer ")[1]
    node1 = next(s for s in steps if s.what == "links and addresses in kp-flannel-node1")
    assert node1.input.splitlines()[0] == "link set lo alias kpemu:lab=flannel"  # marked in its first batch
    assert ("link add flannel.1 address " in node1.input and " type vxlan id 1 local 192.168.1.100 dev eth0 "
            "dstport 8472 nolearning" in node1.input)
    kinds = [s.kind for s in steps]
    assert kinds.count("run") < 4 * len(plan.namespaces)  # batches, not one process per object


def test_route_lines() -> None:
    assert route_line(Route("n", "10.244.1.0/24", via="10.244.1.0", dev="flannel.1", onlink=True)) == \
        "route replace 10.244.1.0/24 via 10.244.1.0 dev flannel.1 onlink"
    assert route_line(Route("n", "192.168.97.0/24", type="blackhole", proto="bird")) == \
        "route replace blackhole 192.168.97.0/24 proto bird"


def test_ipvs_mode_programs_a_node_in_one_go_per_tool() -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    st = mode_of(topo).build(topo, "node1", (6, 1))
    steps, expected = st.steps, st.readback
    assert {s.ns for s in steps} == {f"kp-{topo.name}-node1"}
    assert [s.argv[0] for s in steps if s.kind == "run"] == ["ipset", "iptables-nft-restore", "ip", "ipvsadm"]
    assert [e["kind"] for e in expected] == ["iptables", "ipset", "ipvs"]  # as kube-proxy's state says them
    ipvsadm = next(s for s in steps if s.argv[:1] == ("ipvsadm",))
    assert "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n" in ipvsadm.input


def test_a_removed_real_server_is_named_as_the_first_difference() -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    expected = [Readback.from_json(e) for e in mode_of(topo).build(topo, "node1", (6, 1)).readback]
    ipvs = next(e for e in expected if e.kind == "ipvs")
    kernel = ipvs.expected.replace("-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n", "")
    problems = readback_problems([ipvs], lambda node, kind: kernel)
    assert len(problems) == 1
    assert problems[0].startswith("node1: ipvsadm -Sn read back differs from the plan: line ")
    assert "expected '-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1'" in problems[0]
    assert readback_problems([ipvs], lambda node, kind: ipvs.expected) == []


def test_agent_answers_what_is_queued_then_stops(tmp_path: Path) -> None:
    exchange.prepare(tmp_path)
    odd = exchange.submit(tmp_path, "frobnicate")
    stop = exchange.submit(tmp_path, "stop")
    later = exchange.submit(tmp_path, "frobnicate")  # queued after stop: left for the next agent
    assert serve(tmp_path, once=False, idle=5.0) == 0
    assert exchange.result(tmp_path, odd) == Reply(rc=2, error="unknown request kind 'frobnicate'")
    assert json.loads((tmp_path / exchange.RESULTS / f"{stop}.json").read_text()) == {"rc": 0}
    assert exchange.result(tmp_path, later) is None and [p.stem for p in exchange.pending(tmp_path)] == [later]
    assert (tmp_path / exchange.AGENT).is_file() and exchange.heartbeat_age(tmp_path) is not None


def test_a_cold_agent_exits_when_the_queue_is_empty(tmp_path: Path) -> None:
    assert serve(tmp_path, once=True, idle=0.0) == 0
    assert exchange.pending(tmp_path) == []
