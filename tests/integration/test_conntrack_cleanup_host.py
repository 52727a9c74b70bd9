"""kube-proxy's UDP conntrack cleanup against a real conntrack table: two entries of one client to a
UDP ClusterIP (one DNATed to an endpoint that went away, one to the endpoint that serves) are put in
a throwaway namespace's table with the conntrack tool; each release's cleanup (kpemu.proxy.ctplan's
plan, carried out by kpemu.kernel.faults) must delete the stale one and keep the other."""

from __future__ import annotations

import pytest

from kpemu.kernel.faults import conntrack_cleanup
from kpemu.kernel.netns import run_in
from kpemu.proxy.conntrack import parse_entries
from tests.helpers import needs_root

pytestmark = [needs_root, pytest.mark.root]
STALE, SERVING = ("10.244.1.5", 40053), ("10.244.0.2", 40054)


def _table(ns: str) -> None:
    """A conntrack hook in the namespace (so it has a table) and the two DNATed entries."""
    for argv in (["nft", "add", "table", "ip", "t"],
                 ["nft", "add", "chain", "ip", "t", "o", "{ type filter hook output priority 0; }"],
                 ["nft", "add", "rule", "ip", "t", "o", "ct", "state", "new", "accept"]):
        assert run_in(ns, argv).returncode == 0
    for reply, sport in (STALE, SERVING):
        res = run_in(ns, ["conntrack", "-I", "-p", "udp", "--src", "10.244.0.3", "--dst", "10.96.0.10", "--sport",
                          str(sport), "--dport", "53", "--reply-src", reply, "--reply-dst", "10.244.0.3",
                          "--reply-port-src", "53", "--reply-port-dst", str(sport), "--timeout", "100",
                          "--dst-nat", reply])  # DNATed, as kube-proxy's rules leave it
        assert res.returncode == 0, res.stderr


def _left(ns: str) -> list[int]:
    return sorted(e.sport for e in parse_entries(run_in(ns, ["conntrack", "-L", "-p", "udp"]).stdout))


@pytest.mark.parametrize("plan", [
    {"reconcile": {"frontends": {"10.96.0.10:53": ["10.244.0.2"]}, "nodePorts": {}, "endpointPort": False}},
    {"reconcile": {"frontends": {"10.96.0.10:53": ["10.244.0.2:53"]}, "nodePorts": {}, "endpointPort": True}},
    {"commands": [["conntrack", "-D", "--orig-dst", "10.96.0.10", "--dst-nat", "10.244.1.5", "-p", "udp"],
                  ["conntrack", "-D", "--orig-dst", "10.96.0.10", "--dst-nat", "10.244.9.9", "-p", "udp"]]},
], ids=["reconciler-1.32", "reconciler-1.34", "conntrack-tool-1.31"])
def test_cleanup_deletes_the_stale_entry_and_keeps_the_serving_one(scratch: str, plan: dict) -> None:
    _table(scratch)
    assert _left(scratch) == [40053, 40054]
    done = conntrack_cleanup(scratch, plan, "stale-conntrack")
    assert _left(scratch) == [40054]
    if "reconcile" in plan:
        assert done[0] == "kube-proxy's conntrack reconciler: 2 UDP entries listed, 1 stale"
    else:  # a command that matches nothing is success, as kube-proxy takes it
        assert done[1].endswith("0 flow entries have been deleted.")


def test_without_the_tool_nothing_is_deleted(scratch: str) -> None:
    _table(scratch)
    assert conntrack_cleanup(scratch, {"skipped": "kube-proxy 1.31 logs ..."}, "stale-conntrack") == [
        "kube-proxy: kube-proxy 1.31 logs ..."]
    assert _left(scratch) == [40053, 40054]
