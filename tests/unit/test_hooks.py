"""Hook walks from a recorded trace, and the common hook claims checked against them, per mode."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kpemu.analyse.attribution.xtables import parse_trace
from kpemu.analyse.hooks import check_hook_claim, hook_walk, hooks_only, walk_text
from kpemu.proxy.modes import MODES
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "trace"
FORWARDED = ["PREROUTING", "FORWARD", "POSTROUTING"]
LOCAL = ["PREROUTING", "INPUT", "POSTROUTING"]


def test_nodeport_syn_walk_on_the_entry_node_and_on_the_backend_node() -> None:
    syn = parse_trace((DATA / "nodeport_node1.txt").read_text(), "node1")[0]
    assert hook_walk(syn) == [("PREROUTING", ["raw", "nat"]), ("FORWARD", ["filter"]), ("POSTROUTING", ["nat"])]
    assert walk_text(hook_walk(syn)) == "PREROUTING (raw, nat) -> FORWARD (filter) -> POSTROUTING (nat)"
    remote = parse_trace((DATA / "nodeport_node2.txt").read_text(), "node2")[0]
    assert hooks_only(remote)[:2] == ["PREROUTING", "FORWARD"]


def test_nodeport_forward_claim_holds_in_iptables_mode_and_names_postrouting() -> None:
    v = check_hook_claim("NodePort", FORWARDED)
    assert v.right and v.sentence == "NodePort traffic goes PREROUTING -> FORWARD"
    assert v.describe().startswith("Claim: NodePort traffic goes PREROUTING -> FORWARD. The trace on the node shows "
                                   "PREROUTING -> FORWARD -> POSTROUTING: the claim holds in iptables mode.")
    assert "KUBE-NODEPORTS" in v.explanation and "POSTROUTING" in v.explanation
    assert "IPVS" not in v.describe() and "seed" not in v.describe().lower()


def test_clusterip_input_claim_does_not_hold_in_iptables_mode_and_the_text_stays_in_iptables() -> None:
    v = check_hook_claim("ClusterIP", FORWARDED)
    assert not v.right and v.claim == "PREROUTING -> INPUT"
    assert "never reaches INPUT" in v.explanation and "IPVS" not in v.explanation


def test_nodeport_without_local_endpoint_goes_to_input_in_iptables_mode_and_says_why_without_ipvs() -> None:
    v = check_hook_claim("NodePort", ["PREROUTING", "INPUT"])
    assert not v.right and "No DNAT happened in nat PREROUTING" in v.explanation
    assert "KUBE-EXTERNAL-SERVICES" in v.explanation and "IPVS" not in v.explanation and "LOCAL_IN" not in v.explanation


def test_ipvs_mode_clusterip_claim_holds_and_nodeport_does_not_with_local_in_explained() -> None:
    c = check_hook_claim("ClusterIP", LOCAL, mode="ipvs")
    assert c.right and "kube-ipvs0" in c.explanation and "does not hold" not in c.describe()
    v = check_hook_claim("NodePort", LOCAL, mode="ipvs")
    assert not v.right and "LOCAL_IN" in v.explanation and "never seen in FORWARD" in v.explanation
    assert "KUBE-SEP" not in v.explanation and "in ipvs mode" in v.describe()


def test_locally_generated_packet_starts_in_output_in_every_mode() -> None:
    for mode in MODES:
        v = check_hook_claim("ClusterIP", ["OUTPUT", "POSTROUTING"], mode=mode)
        assert not v.right and "starts in OUTPUT" in v.explanation


def test_nftables_mode_names_its_own_chains_and_maps_not_iptables_or_ipvs() -> None:
    v = check_hook_claim("NodePort", FORWARDED, "nftables")
    assert v.right and "service-nodeports verdict map" in v.explanation and "nat-postrouting" in v.explanation
    c = check_hook_claim("ClusterIP", FORWARDED, "nftables")
    assert not c.right and "service-ips verdict map" in c.explanation and "never reaches INPUT" in c.explanation
    local = check_hook_claim("NodePort", ["PREROUTING", "INPUT"], "nftables")
    for text in (v.describe(), c.describe(), local.describe()):
        assert "KUBE-" not in text and "IPVS" not in text and "in nftables mode" in text


def test_a_mode_plugs_in_its_own_explainer_and_an_unknown_mode_says_none_was_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no explanation written for ebpf mode" in check_hook_claim("NodePort", FORWARDED, "ebpf").explanation
    monkeypatch.setitem(MODES, "test-mode", replace(
        MODES["iptables"], explain_hooks=lambda access, hooks, right: f"{access} {'/'.join(hooks)} {right}"))
    assert check_hook_claim("NodePort", FORWARDED, "test-mode").explanation == \
        "NodePort PREROUTING/FORWARD/POSTROUTING True"
