"""IPVS-mode ipsets (and the iptables rules that use them) applied in a throwaway namespace.

Runs on the host kernel (ipsets work here; IPVS does not, see tests/vm/test_ipvs_apply.py).
"""

from __future__ import annotations

import subprocess

import pytest

from kpemu.inputs.topology import load_topology
from kpemu.jobs.execute import run_step
from kpemu.jobs.schema import Readback
from kpemu.jobs.verify import readback_problems
from kpemu.kernel import netns as nsmod
from kpemu.kernel.snapshot import rules_text
from kpemu.plan.batch import Step
from kpemu.proxy.ipvs import ipvs_rules
from kpemu.proxy.ipvs.ipset_text import IpSet, make_set, restore_input
from kpemu.proxy.ipvs.ipset_text import save_text as ipset_save_text
from kpemu.proxy.save import rule_lines, ruleset_from_restore, save_text
from tests.helpers import TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root]


@pytest.fixture
def ns(scratch: str) -> str:
    return scratch


def apply_ipsets(ns: str, sets: list[IpSet] | tuple[IpSet, ...]) -> list[str]:
    """The ipset step of a deploy, then the read-back problems (empty when equal)."""
    run_step(Step("run", "ipset restore", ns, ("ipset", "restore", "-exist"), restore_input(sets)))
    expected = [Readback("n", "ipset", ipset_save_text(sets), sets=tuple(s.name for s in sets))]
    return readback_problems(expected, lambda _, kind: rules_text(ns, kind, "nft"))


@pytest.mark.parametrize("version", ["1.15", "1.20", "1.33"])
def test_ipvs_sets_read_back_equal(ns: str, version: str) -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"version": version})})
    state = ipvs_rules(topo, "node1")
    assert apply_ipsets(ns, state.ipsets) == []


def _root_sets() -> list[str]:
    return subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False).stdout.split()


def test_sets_are_per_namespace(ns: str) -> None:
    before = _root_sets()
    assert apply_ipsets(ns, [make_set("KUBE-CLUSTER-IP", "hash:ip,port", "c", ["10.96.0.1,tcp:443"])]) == []
    assert _root_sets() == before  # the root namespace is untouched
    inside = nsmod.run_in(ns, ["ipset", "list", "-n"]).stdout.split()
    assert inside == ["KUBE-CLUSTER-IP"]


def test_readback_mismatch_names_the_line(ns: str) -> None:
    nsmod.run_in(ns, ["ipset", "create", "KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535"])
    nsmod.run_in(ns, ["ipset", "add", "KUBE-NODE-PORT-TCP", "31000"])  # stale entry kube-proxy would delete
    problems = apply_ipsets(ns, [make_set("KUBE-NODE-PORT-TCP", "bitmap:port", "c", ["30080"])])
    assert problems == ["n: ipset save read back differs from the plan: line 3: expected '<end>', "
                        "kernel has 'add KUBE-NODE-PORT-TCP 31000'"]


def test_seed_000_rules_restore_and_save_as_predicted(ns: str) -> None:
    """iptables-restore accepts the IPVS rules (sets exist) and iptables-save prints what save.py predicts."""
    state = ipvs_rules(load_topology(TOPOLOGIES / "calico-ipip.yaml"), "node1")
    assert apply_ipsets(ns, state.ipsets) == []
    res = nsmod.run_in(ns, ["iptables-restore", "--noflush"], input=state.restore_text())
    assert res.returncode == 0, res.stderr
    saved = nsmod.run_in(ns, ["iptables-save"]).stdout
    predicted = save_text(ruleset_from_restore(state.restore_text()))
    got, want = rule_lines(saved), rule_lines(predicted)
    assert {k: v for k, v in got.items() if k in want} == want
