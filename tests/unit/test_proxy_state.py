"""kube-proxy's state is generated once per node for a run, and the job, `kpemu rules` and the oracle
reuse it: the generator of each mode is counted through a real pass of the run's pure path (plan, job,
texts, oracle, analysis), nothing of the kernel involved."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kpemu.analyse.oracle import predict_for_topology
from kpemu.analyse.oracle.types import Packet
from kpemu.analyse.pipeline import analyse
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs.build import collect_job, release_tuple
from kpemu.jobs.schema import Collected
from kpemu.labplan import lab_plan
from kpemu.proxy.iptables import mode as iptables_mode
from kpemu.proxy.ipvs import mode as ipvs_mode
from kpemu.proxy.modes import node_state, node_texts
from kpemu.proxy.nftables import mode as nftables_mode
from tests.helpers import SCENARIOS

# each mode's generator, as its registry entry's build calls it
GENERATORS = {"iptables": (iptables_mode, "iptables_rules"), "ipvs": (ipvs_mode, "ipvs_rules"),
              "nftables": (nftables_mode, "nftables_transaction")}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[str]]:
    """Count the nodes a mode's generator is called for (the real generator still runs)."""

    def count(mode: str) -> list[str]:
        module, name = GENERATORS[mode]
        real, calls = getattr(module, name), []

        def generator(topo, node, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(node)
            return real(topo, node, *args, **kwargs)

        monkeypatch.setattr(module, name, generator)
        return calls

    return count


@pytest.mark.parametrize("file", ["nodeport-iptables.yaml", "nodeport-ipvs.yaml", "nft-nodeport.yaml"])
def test_a_run_generates_each_node_s_proxy_state_once(file: str, counted: Callable[[str], list[str]],
                                                      tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / file)
    topo = sc.topology
    nodes = [n.name for n in topo.nodes]
    calls = counted(topo.kubeProxy.mode)
    kernel = release_tuple(os.uname().release)
    plan = lab_plan(topo, kernel)
    assert sorted(plan.proxy.nodes) == sorted(nodes)
    job = collect_job(sc, plan)
    node_port = next(p.nodePort for s in topo.services for p in s.ports if p.nodePort)
    for n in topo.nodes:
        state = plan.proxy.node(n.name)
        assert node_texts(topo, n.name, state)["iptables-save" if "iptables-save" in state.texts else "nft"]
        assert predict_for_topology(topo, n.name, Packet("203.0.113.9", n.ip, node_port), state=state).outcomes
    nothing = Collected(results={}, conntrack={}, ipvs={}, traces={}, points=(), seconds=0.0, trace=False,
                        kernel=os.uname().release)
    analyse(sc, plan, nothing, tmp_path, False)
    assert sorted(calls) == sorted(nodes)
    steps = [s for n in nodes for s in plan.proxy.node(n).steps]
    first = job.steps.index(steps[0])
    assert list(job.steps[first:first + len(steps)]) == steps  # the job applies the plan's steps
    assert [r.to_json() for r in job.readback] == [r for n in nodes for r in plan.proxy.node(n).readback]
    predict_for_topology(topo, nodes[0], Packet("203.0.113.9", topo.nodes[0].ip, node_port), node_state(topo, nodes[0]))
    assert len(calls) == len(nodes) + 1  # without the run's state the oracle generates again: the count is live
