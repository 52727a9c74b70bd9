"""Hook walks from a recorded trace, and seed 002's summary table checked against them."""

from __future__ import annotations

from pathlib import Path

from kpemu.analyse.attribution import parse_trace
from kpemu.analyse.hooks import compare_with_seed002, hook_walk, hooks_only, walk_text

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def test_nodeport_syn_walk_on_the_entry_node_and_on_the_backend_node() -> None:
    syn = parse_trace((DATA / "nodeport_node1.txt").read_text(), "node1")[0]
    assert hook_walk(syn) == [("PREROUTING", ["raw", "nat"]), ("FORWARD", ["filter"]), ("POSTROUTING", ["nat"])]
    assert walk_text(hook_walk(syn)) == "PREROUTING (raw, nat) -> FORWARD (filter) -> POSTROUTING (nat)"
    remote = parse_trace((DATA / "nodeport_node2.txt").read_text(), "node2")[0]
    assert hooks_only(remote)[:2] == ["PREROUTING", "FORWARD"]


def test_seed002_nodeport_claim_is_right_and_the_missing_postrouting_is_named() -> None:
    v = compare_with_seed002("NodePort", ["PREROUTING", "FORWARD", "POSTROUTING"])
    assert v.right and "POSTROUTING" in v.explanation
    assert "the note is right" in v.describe()


def test_seed002_clusterip_claim_is_wrong_in_iptables_mode() -> None:
    v = compare_with_seed002("ClusterIP", ["PREROUTING", "FORWARD", "POSTROUTING"])
    assert not v.right and v.claim == "PREROUTING -> INPUT"
    assert "never reaches INPUT" in v.explanation and "IPVS" in v.explanation


def test_seed002_clusterip_claim_holds_in_ipvs_mode_and_nodeport_does_not() -> None:
    assert compare_with_seed002("ClusterIP", ["PREROUTING", "INPUT", "POSTROUTING"], mode="ipvs").right
    v = compare_with_seed002("NodePort", ["PREROUTING", "INPUT", "POSTROUTING"], mode="ipvs")
    assert not v.right and "LOCAL_IN" in v.explanation
