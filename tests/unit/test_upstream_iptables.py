"""The test of record for iptables mode: upstream's `TestOverallIPTablesRules`.

tests/data/upstream/iptables-overall.yaml is that test's services, EndpointSlices and fake-proxier
settings as a kpemu topology; iptables-overall.expected is its `expected` text, copied verbatim from
kubernetes/kubernetes pkg/proxy/iptables/proxier_test.go. kpemu's output is compared the way
upstream compares the proxier's output (`assertIPTablesRulesEqual`: `sortIPTablesRules` on the
result, then equality), after two setup differences of upstream's fake proxier: its restore data
lacks what kube-proxy writes with EnsureChain/EnsureRule (canaries, built-in chain jumps), and it
prints the masquerade mark as 0x4000 where real kube-proxy writes Go's %#08x (0x00004000).
"""

from __future__ import annotations

from kpemu.inputs.topology import load_topology
from kpemu.proxy.iptables import iptables_rules, restore_text
from tests.helpers import ROOT
from tests.unit.upstream_iptables import check_iptables_rule_jumps, restore_data, sort_iptables_rules

DATA = ROOT / "tests" / "data" / "upstream"


def _generated(**kube_proxy: object) -> str:
    topo = load_topology(DATA / "iptables-overall.yaml")
    if kube_proxy:
        topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update=kube_proxy)})
    text = restore_data(restore_text(iptables_rules(topo, "test-node")))
    return sort_iptables_rules(text.replace("0x00004000", "0x4000"))


def test_overall_iptables_rules_equal_upstream_line_for_line() -> None:
    expected = (DATA / "iptables-overall.expected").read_text()
    got = _generated()
    body = [ln for ln in expected.splitlines() if ln not in ("*filter", "*nat", "COMMIT")]
    assert len(body) == 91
    assert got.splitlines() == expected.splitlines()


def test_every_jump_lands_on_a_target_or_a_declared_chain() -> None:
    """Upstream's checkIPTablesRuleJumps, on its expected text and on kpemu's whole restore input."""
    assert check_iptables_rule_jumps((DATA / "iptables-overall.expected").read_text()) == []
    topo = load_topology(DATA / "iptables-overall.yaml")
    assert check_iptables_rule_jumps(restore_text(iptables_rules(topo, "test-node"))) == []


def test_the_jump_check_names_a_jump_to_a_chain_never_declared() -> None:
    data = "\n".join(["*nat", ":KUBE-SERVICES - [0:0]", "-I PREROUTING 1 -j KUBE-SERVICES",
                      "-A KUBE-SERVICES -j KUBE-SVC-GONE", "-A KUBE-SERVICES -j OUTPUT", "-A KUBE-NODEPORTS -j DROP",
                      "COMMIT", ""])
    assert check_iptables_rule_jumps(data) == [
        "*nat: KUBE-SERVICES jumps to KUBE-SVC-GONE, neither a target nor a declared chain",
        "*nat: KUBE-SERVICES jumps to OUTPUT, neither a target nor a declared chain",
        "*nat: a rule is added to KUBE-NODEPORTS, which is not declared",
    ]


def test_without_nfacct_counters_the_four_nfacct_lines_change_and_nothing_else() -> None:
    expected = (DATA / "iptables-overall.expected").read_text().splitlines()
    got = _generated(nfacct=False).splitlines()
    missing = [ln for ln in expected if ln not in got]
    extra = [ln for ln in got if ln not in expected]
    assert [ln for ln in missing if "-m nfacct" not in ln] == []
    assert len(missing) == 4
    assert extra == ["-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"]


def test_every_release_with_nfacct_counters_writes_them_from_1_31_and_the_invalid_one_from_1_30() -> None:
    for version, lines in (("1.29", 0), ("1.30", 1), ("1.31", 4), ("1.37", 4)):
        got = _generated(version=version)
        assert got.count("-m nfacct --nfacct-name") == lines, version


def test_sort_keeps_the_last_rule_last_and_orders_chains_like_upstream() -> None:
    data = "\n".join([
        "*nat", ":KUBE-SVC-B - [0:0]", ":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]", ":OTHER - [0:0]",
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule'
        ' in this chain" -j KUBE-NODEPORTS',
        '-A KUBE-SERVICES -m comment --comment "ns2/b:p cluster IP" -j KUBE-SVC-B',
        '-A KUBE-SERVICES -m comment --comment "ns1/a:p cluster IP" -j KUBE-SVC-A',
        "COMMIT", "*filter", ":KUBE-FORWARD - [0:0]", "COMMIT", ""])
    assert sort_iptables_rules(data).splitlines() == [
        "*filter", ":KUBE-FORWARD - [0:0]", "COMMIT",
        "*nat", ":KUBE-NODEPORTS - [0:0]", ":KUBE-SERVICES - [0:0]", ":KUBE-SVC-B - [0:0]", ":OTHER - [0:0]",
        '-A KUBE-SERVICES -m comment --comment "ns1/a:p cluster IP" -j KUBE-SVC-A',
        '-A KUBE-SERVICES -m comment --comment "ns2/b:p cluster IP" -j KUBE-SVC-B',
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule'
        ' in this chain" -j KUBE-NODEPORTS',
        "COMMIT"]
