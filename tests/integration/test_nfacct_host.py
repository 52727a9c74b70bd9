"""kube-proxy's nfacct counters on the real kernel: created per namespace before iptables-restore,
the upstream test-of-record rules (with `-m nfacct`) applied and read back, and the failure a
missing counter causes."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from kpemu.errors import ApplyError
from kpemu.inputs.topology import load_topology
from kpemu.jobs.execute import run_step
from kpemu.jobs.schema import Readback
from kpemu.jobs.verify import readback_problems
from kpemu.kernel import nfacct
from kpemu.kernel.netns import run_in
from kpemu.kernel.snapshot import rules_text
from kpemu.proxy.iptables import iptables_rules, restore_text, uses_nfacct
from kpemu.proxy.modes import mode_of
from tests.helpers import ROOT, needs_root

pytestmark = [needs_root, pytest.mark.root]
UPSTREAM = ROOT / "tests" / "data" / "upstream" / "iptables-overall.yaml"


def _counters(ns: str) -> str:
    return run_in(ns, ["nfacct", "list"]).stdout


def test_counters_are_created_per_namespace_and_ensure_is_idempotent(scratch: str) -> None:
    assert "ct_state_invalid_dropped_pkts" not in _counters(scratch)
    nfacct.ensure_counters(scratch)
    nfacct.ensure_counters(scratch)  # kube-proxy's Ensure: an existing counter is fine
    listed = _counters(scratch)
    assert "= ct_state_invalid_dropped_pkts;" in listed and "= localhost_nps_accepted_pkts;" in listed


@pytest.mark.parametrize("backend", ["nft", "legacy"])
def test_upstream_overall_rules_with_nfacct_apply_and_read_back(scratch: str, backend: str) -> None:
    topo = load_topology(UPSTREAM)
    topo = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"backend": backend})})
    assert uses_nfacct(topo)
    st = mode_of(topo).build(topo, "test-node", (6, 1))
    expected = [Readback.from_json(r) for r in st.readback]
    assert st.steps[0].kind == "nfacct"  # the counters exist before iptables-restore names them
    for step in st.steps:
        run_step(replace(step, ns=scratch))
    assert readback_problems(expected, lambda _, kind: rules_text(scratch, kind, backend)) == []
    saved = rules_text(scratch, "iptables", backend)
    assert "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts" \
           " -j DROP" in saved


def test_without_the_counters_iptables_restore_refuses_the_rules(scratch: str) -> None:
    rs = iptables_rules(load_topology(UPSTREAM), "test-node")
    res = run_in(scratch, ["iptables-nft-restore", "--noflush", "--wait"], input=restore_text(rs))
    assert res.returncode != 0 and "RULE_APPEND failed (No such file or directory)" in res.stderr


def test_unset_nfacct_resolves_to_what_this_kernel_can_do(scratch: str) -> None:
    topo = load_topology(UPSTREAM)
    unset = topo.model_copy(update={"kubeProxy": topo.kubeProxy.model_copy(update={"nfacct": None})})
    assert nfacct.resolve_nfacct(unset, scratch).kubeProxy.nfacct is True  # CONFIG_NETFILTER_NETLINK_ACCT=y here
    old = unset.model_copy(update={"kubeProxy": unset.kubeProxy.model_copy(update={"version": "1.29"})})
    assert nfacct.resolve_nfacct(old, scratch).kubeProxy.nfacct is None  # no nfacct before 1.30


@pytest.fixture
def kernel_without_nfacct(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """An `nfacct` that answers as on a kernel without nfnetlink_acct (this kernel has it built in)."""
    tool = tmp_path / "nfacct"
    tool.write_text("#!/bin/sh\necho 'nfacct v1.0.2: error: Protocol not supported' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_a_kernel_without_nfacct_is_named_with_the_fix(scratch: str, kernel_without_nfacct: None) -> None:
    with pytest.raises(ApplyError) as err:
        nfacct.ensure_counters(scratch)
    assert str(err.value) == (
        f"{scratch}: cannot create the nfacct counter ct_state_invalid_dropped_pkts (nfacct v1.0.2: error: "
        "Protocol not supported): the kernel lacks nfnetlink_acct here; set kubeProxy.nfacct: false (kube-proxy "
        "then writes the rules without -m nfacct), or use a kernel with CONFIG_NETFILTER_NETLINK_ACCT and "
        "CONFIG_NETFILTER_XT_MATCH_NFACCT")
    unset = load_topology(UPSTREAM)
    unset = unset.model_copy(update={"kubeProxy": unset.kubeProxy.model_copy(update={"nfacct": None})})
    assert nfacct.resolve_nfacct(unset, scratch).kubeProxy.nfacct is False  # kube-proxy's fallback: no -m nfacct
