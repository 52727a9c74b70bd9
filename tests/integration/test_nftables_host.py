"""Load kube-proxy's nftables transaction with `nft -f` in throwaway namespaces and compare
`nft list table ip kube-proxy` with the listing kpemu predicts (upstream's fixture, the
reference's worked example, a rich rule set in every modelled release), and check that a
difference or a refused transaction fails naming the first differing line / nft's message."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kpemu.errors import ApplyError
from kpemu.inputs.topology import load_topology
from kpemu.jobs.execute import run_step
from kpemu.jobs.schema import Readback
from kpemu.jobs.verify import readback_problems
from kpemu.kernel.snapshot import rules_text
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step
from kpemu.proxy.modes import mode_of
from tests.helpers import DATA, needs_root

pytestmark = [needs_root, pytest.mark.root]


def _apply(ns: str, topo: Topology, node: str) -> list[dict]:
    """The node's nftables step (one `nft -f -`), then the read-back problems must be none; the expectations."""
    st = mode_of(topo).build(topo, node, (6, 1))
    expected = [Readback.from_json(r) for r in st.readback]
    for step in st.steps:
        run_step(replace(step, ns=ns))
    assert _problems(ns, expected) == []
    return expected


def _problems(ns: str, expected: list[Readback]) -> list[str]:
    return readback_problems(expected, lambda _, kind: rules_text(ns, kind, "nft"))


def _list(ns: str) -> str:
    return rules_text(ns, "nft", "nft")


def _nft(topo: Topology, version: str) -> Topology:
    return topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"mode": "nftables",
                                                                                  "version": version})})


def test_upstream_overall_fixture(scratch: str) -> None:
    _apply(scratch, load_topology(DATA / "nftables" / "overall.yaml"), "test-node")
    got = _list(scratch)
    assert "\t\tip saddr != 203.0.113.0/25 drop\n" in got
    assert "\t\tflags dynamic,timeout\n\t\ttimeout 3h\n" in got


def test_upstream_1_36_fixture_listing_is_the_stored_one(scratch: str) -> None:
    """1.36: hairpin-connections, inline marks and `dnat ip addr . port to numgen ... map` load and
    list as tests/data/nftables/overall-1.36.list."""
    _apply(scratch, load_topology(DATA / "nftables" / "overall-1.36.yaml"), "test-node")
    assert _list(scratch) == (DATA / "nftables" / "overall-1.36.list").read_text()


def test_upstream_1_37_fixture_listing_is_the_stored_one(scratch: str) -> None:
    """1.37 with the localhost NodePort gate: named counters, `counter name "C" reject` and one-endpoint
    `dnat to A:P` load and list as tests/data/nftables/overall-1.37.list."""
    _apply(scratch, load_topology(DATA / "nftables" / "overall-1.37.yaml"), "test-node")
    assert _list(scratch) == (DATA / "nftables" / "overall-1.37.list").read_text()


def test_worked_example_listing_is_the_reference(scratch: str) -> None:
    _apply(scratch, load_topology(DATA / "nftables" / "worked-1.33.yaml"), "node-a")
    assert _list(scratch) == (DATA / "nftables" / "worked-1.33.list").read_text()


@pytest.mark.parametrize("version", ["1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37"])
@pytest.mark.parametrize("node", ["node1", "node2"])
def test_rich_rule_set_across_releases(scratch: str, version: str, node: str) -> None:
    _apply(scratch, _nft(load_topology(DATA / "rich.yaml"), version), node)


def test_readback_difference_names_the_first_line(scratch: str) -> None:
    expected = _apply(scratch, _topo := load_topology(DATA / "nftables" / "worked-1.33.yaml"), "node-a")
    wrong = [replace(e, expected=e.expected.replace("masquerade fully-random", "masquerade")) for e in expected]
    problems = _problems(scratch, wrong)
    assert len(problems) == 1 and problems[0].startswith(
        "node-a: nft list table ip kube-proxy read back differs from the plan: line ")
    assert problems[0].endswith("expected '\\t\\tmasquerade', kernel has '\\t\\tmasquerade fully-random'")


def test_refused_transaction_is_an_apply_error(scratch: str) -> None:
    step = Step("run", "node-a: kube-proxy's nftables transaction", scratch, ("nft", "-f", "-"),
                "add rule ip kube-proxy no-such-chain drop\n")
    with pytest.raises(ApplyError, match="node-a: kube-proxy's nftables transaction: nft -f failed: "):
        run_step(step)
