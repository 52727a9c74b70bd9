"""Apply kube-proxy's iptables rules in throwaway namespaces through the job steps a deploy runs, and
compare iptables-save read-back with kpemu's canonical text (seed 001 on the legacy and nft backends,
the flannel topology's nodes, and the rich rule set across releases)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kpemu.inputs.topology import load_topology
from kpemu.jobs.execute import run_step
from kpemu.jobs.schema import Readback
from kpemu.jobs.verify import readback_problems
from kpemu.kernel.netfilter import supports_random_fully
from kpemu.kernel.snapshot import rules_text
from kpemu.model.topology import Topology
from kpemu.proxy.modes import mode_of
from tests.helpers import ROOT, TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root]


def _with(topo: Topology, **kp: object) -> Topology:
    return topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update=kp)})


def _apply(ns: str, topo: Topology, node: str) -> list[dict]:
    """Run the node's kube-proxy steps in `ns`, assert the read-back equals; the expectations."""
    st = mode_of(topo).build(topo, node, (6, 1))
    expected = [Readback.from_json(r) for r in st.readback]
    for step in st.steps:
        run_step(replace(step, ns=ns))
    assert readback_problems(expected, lambda _, kind: rules_text(ns, kind, topo.kubeProxy.backend)) == []
    return expected


@pytest.mark.parametrize("backend", ["legacy", "nft"])
def test_seed_001(scratch: str, backend: str) -> None:
    topo = _with(load_topology(TOPOLOGIES / "seed-001.yaml"), backend=backend)
    _apply(scratch, topo, "minikube")
    got = rules_text(scratch, "iptables", backend)
    assert '-A KUBE-SVC-4N57TFCL4MD7ZTDA -m statistic --mode random --probability 0.50000000000' in got


@pytest.mark.parametrize("node", ["node1", "node2"])
def test_flannel_nodes(scratch: str, node: str) -> None:
    _apply(scratch, load_topology(TOPOLOGIES / "flannel-vxlan.yaml"), node)


@pytest.mark.parametrize("version", ["1.10", "1.14", "1.20", "1.23", "1.26", "1.33", "1.37"])
def test_rich_rule_set_across_releases(scratch: str, version: str) -> None:
    topo = _with(load_topology(ROOT / "tests" / "data" / "rich.yaml"), version=version)
    _apply(scratch, topo, "node2")


def test_mismatch_names_first_differing_line(scratch: str) -> None:
    expected = _apply(scratch, load_topology(TOPOLOGIES / "flannel-vxlan.yaml"), "node1")
    wrong = [replace(e, expected=e.expected.replace("--probability 0.33333333349", "--probability 0.25000000000"))
             for e in expected]
    problems = readback_problems(wrong, lambda _, kind: rules_text(scratch, kind, "nft"))
    assert len(problems) == 1
    assert problems[0].startswith("node1: iptables-save -t nat read back differs from the plan: line ")
    assert "expected '-A KUBE-SVC-" in problems[0] and "0.25000000000" in problems[0]
    assert "kernel has '-A KUBE-SVC-" in problems[0] and "0.33333333349" in problems[0]


def test_random_fully_decided_by_the_iptables_version() -> None:
    assert supports_random_fully("nft") is True  # iptables 1.8 here: kube-proxy's HasRandomFully()
