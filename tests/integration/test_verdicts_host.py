"""Verdicts on this kernel: the eTP=Local no-endpoint drop named from the trace, a different verdict
when that rule is removed by hand (so it is read from the kernel, not inferred), every fault
scenario passing with its `died:` expectation through the real CLI, and the kernel's reason joined
by time window when bpftrace is not used (tracefs alone, no tracing instance left behind)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kpemu import faults as fault_registry
from kpemu.analyse.pipeline import analyse, hops_document
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs import execute
from kpemu.jobs.build import collect_job, release_tuple
from kpemu.jobs.schema import Job
from kpemu.kernel.drops import (
    BPFTRACE_WRAPPER,
    INSTANCE_PREFIX,
    DropSession,
    start_drop_tracing,
    why_no_reasons,
    why_unavailable,
)
from kpemu.kernel.lab import destroy
from kpemu.kernel.netns import list_netns, run_in
from kpemu.labplan import LabPlan, lab_plan
from kpemu.runtimes.host import HostRuntime
from kpemu.statedir import scratch_dir
from tests.helpers import ROOT, kpemu, needs_root

pytestmark = [needs_root, pytest.mark.root]
FAULTS = sorted((ROOT / "scenarios" / "faults").glob("*.yaml"))
DROP_RULE = ('-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "default/web:http has no local endpoints" '
             '-m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DROP')
FLOW = "to-node-without-endpoint"


def _verdict(sc, lp: LabPlan, job: Job, state, out: Path) -> dict:
    """One pass of the flow's traffic in the deployed lab, analysed: the flow of hops.json."""
    execute.prepare_out(out)
    drops = start_drop_tracing(out / "drops-raw.txt")
    try:
        drops.watch(state.members)
        gathered = execute._Gathered()
        execute._traffic(job, out, execute._quiet, gathered, drops)
    finally:
        drops.stop()
    a = analyse(sc, lp, gathered.collected(job, 0.0), out, False)
    return next(f for f in hops_document(sc, a, "host", "test", os.uname().release)["flows"] if f["name"] == FLOW)


def test_removing_the_dropping_rule_by_hand_changes_the_verdict(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "nodeport-local.yaml")
    spec = sc.spec.model_copy(update={"flows": [f for f in sc.spec.flows if f.name == FLOW],
                                      "expect": [e for e in sc.spec.expect if e.flow == FLOW]})
    sc = sc.__class__(spec, HostRuntime().resolve(sc.topology), sc.path,
                      tuple(f for f in sc.flows if f.flow.name == FLOW))
    kernel = release_tuple(os.uname().release)
    lp = lab_plan(sc.topology, kernel, sc.spec.faults)
    job = collect_job(sc, lp)
    state = execute.deploy(job)
    try:
        first = _verdict(sc, lp, job, state, tmp_path / "with-rule")
        ns = state.members["node2"]
        assert DROP_RULE in run_in(ns, ["iptables-nft-save", "-t", "filter"]).stdout
        res = run_in(ns, ["iptables-nft-restore", "--noflush"], input="*filter\n-D" + DROP_RULE[2:] + "\nCOMMIT\n")
        assert res.returncode == 0, res.stderr
        second = _verdict(sc, lp, job, state, tmp_path / "without-rule")
    finally:
        destroy(state.lab)
        shutil.rmtree(scratch_dir(state.lab), ignore_errors=True)  # _traffic's trace files (collect removes them)
    assert not list_netns(f"kp-{sc.topology.name}-")
    v1, v2 = first["verdict"], second["verdict"]
    assert v1["action"] == "DROP" and v1["at"] == "node2" and v1["hook"] == "INPUT" and v1["table"] == "filter"
    assert v1["chain"] == "KUBE-EXTERNAL-SERVICES" and v1["rule"] == DROP_RULE and v1["evidence"] == "netfilter trace"
    assert first["connections"][0]["verdict"] == v1
    # without the rule nothing in netfilter drops the SYN: node2 has no socket on 30080 and says so
    assert second["connections"][0]["outcome"] == "refused"
    if why_unavailable() is None:
        assert v1["reason"] == "NETFILTER_DROP"
        assert v2["action"] == "KERNEL-DROP" and v2["at"] == "node2" and v2["reason"] == "NO_SOCKET", v2
        assert v2["function"] == "tcp_v4_rcv" and v2["evidence"] == "kfree_skb by tuple"
    else:
        assert v2["action"] != "DROP" and "kernel drop reasons" in v2["text"], v2


@pytest.mark.parametrize("path", FAULTS, ids=[p.stem for p in FAULTS])
def test_fault_scenario_dies_where_and_why_it_expects(path: Path, tmp_path: Path) -> None:
    if why_unavailable() is not None:
        pytest.skip(f"kernel drop reasons unavailable: {why_unavailable()}")
    if any(fault_registry.FAULTS[f.kind].features for f in load_scenario(path).spec.faults):
        pytest.skip("a fault that only kpemu's guest kernel may apply (tests/vm runs it)")
    res = kpemu("run", str(path), "--runtime", "host", "--out", str(tmp_path), timeout=180)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    data = json.loads((tmp_path / "hops.json").read_text())
    assert data["faults"] and data["faults"][0]["done"]
    md = (tmp_path / "report.md").read_text()
    assert "## faults applied after deploy" in md and "Symptom:" in md
    died = [c for c in data["checks"] if c["what"] == "died"]
    if not any(e.died for e in load_scenario(path).spec.expect):  # a fault kube-proxy repairs: nothing dies
        assert not died and not [c for f in data["flows"] for c in f["connections"] if c["verdict"]]
        assert "| ✗ |" not in md
        return
    assert died and all(c["ok"] for c in died), died
    assert "| ✗ |" in md and "-x" in md.split("```mermaid", 1)[1]


@pytest.mark.parametrize("path", FAULTS, ids=[p.stem for p in FAULTS])
def test_fault_scenario_in_nftables_mode_dies_the_same_way_or_is_refused(path: Path, tmp_path: Path) -> None:
    """A fault that edits kube-proxy's state edits the nft ruleset in nftables mode (no-masquerade removes
    the masquerading chain's rules); one that cannot (stale-conntrack re-syncs iptables chains) is refused
    with exit 2 naming the fault and the mode, before anything is made."""
    if why_unavailable() is not None:
        pytest.skip(f"kernel drop reasons unavailable: {why_unavailable()}")
    if any(fault_registry.FAULTS[f.kind].features for f in load_scenario(path).spec.faults):
        pytest.skip("a fault that only kpemu's guest kernel may apply (tests/vm runs it)")
    res = kpemu("run", str(path), "--proxy-mode", "nftables", "--runtime", "host", "--out", str(tmp_path),
                timeout=180)
    if load_scenario(path).spec.faults[0].kind == "stale-conntrack":
        assert res.returncode == 2, res.stdout + res.stderr
        assert "faults[0].kind: stale-conntrack re-programs kube-proxy's iptables rules, which kubeProxy.mode " \
               "nftables has none of; use it with kubeProxy.mode: iptables" in res.stderr
        assert not list_netns("kp-flt-stale")
        return
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    data = json.loads((tmp_path / "hops.json").read_text())
    assert data["faults"] and data["faults"][0]["done"]
    died = [c for c in data["checks"] if c["what"] == "died"]
    if not any(e.died for e in load_scenario(path).spec.expect):
        assert not died
        return
    assert died and all(c["ok"] for c in died), died
    if data["faults"][0]["kind"] == "no-masquerade":
        assert [d for d in data["faults"][0]["done"] if d.startswith("nft delete rule ip kube-proxy masquerading ")]


def _tracing_instances() -> list[str]:
    """The kernel's tracefs instances (tracefs mounted in a private mount namespace only)."""
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                          "mount -t tracefs nodev /sys/kernel/tracing && ls /sys/kernel/tracing/instances"],
                         capture_output=True, text=True, check=True)
    return res.stdout.split()


def test_without_bpftrace_the_kernel_reason_is_joined_by_time_window_and_no_instance_stays(tmp_path: Path) -> None:
    if why_no_reasons() is not None:
        pytest.skip(f"kernel drop reasons unavailable: {why_no_reasons()}")
    res = kpemu("run", str(ROOT / "scenarios" / "faults" / "no-masquerade.yaml"), "--runtime", "host",
                "--out", str(tmp_path), timeout=180, env={"KPEMU_DROP_TRACE": "tracefs"})
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    flow = json.loads((tmp_path / "hops.json").read_text())["flows"][0]
    v = flow["verdict"]
    assert (v["reason"], v["function"], v["at"]) == ("NO_SOCKET", "tcp_v4_rcv", "client"), v
    assert v["evidence"] == "kfree_skb by time window" and v["joined"] == "time window"
    assert "joined by time window" in v["text"] and "KPEMU_DROP_TRACE=tracefs" in v["text"]
    assert flow["drops"]["joined"] == "time window"
    assert (tmp_path / "trace" / "drops.txt").read_text().startswith("NOTE bpftrace not used")
    assert not [i for i in _tracing_instances() if i.startswith(INSTANCE_PREFIX)]


def test_a_bpftrace_that_cannot_attach_falls_back_to_the_time_window_reader(tmp_path: Path) -> None:
    if why_unavailable() is not None:
        pytest.skip(f"bpftrace unavailable: {why_unavailable()}")
    session = DropSession(tmp_path / "drops.txt")
    session._spawn(BPFTRACE_WRAPPER, {**os.environ, "KPEMU_DROPS_PROG": "tracepoint:skb:kfree_skb { nope( }"})
    session.wait_ready()
    assert session.unavailable is None and "ERROR: syntax error" in (session.by_time or ""), session.by_time
    assert [i for i in _tracing_instances() if i.startswith(INSTANCE_PREFIX)]
    assert session.stop().startswith(f"NOTE {session.by_time}\n")
    assert not [i for i in _tracing_instances() if i.startswith(INSTANCE_PREFIX)]


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    res = kpemu("run", *args, "--runtime", "host", "--out", str(tmp_path), timeout=240)
    return res, json.loads((tmp_path / "hops.json").read_text())


def test_nftables_mode_dropped_and_refused_flows_carry_verdicts_from_nft_monitor_trace(tmp_path: Path) -> None:
    res, data = _run(tmp_path, str(ROOT / "scenarios" / "nft-nodeport.yaml"), "--name", "vd-nft")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    flows = {f["name"]: f for f in data["flows"]}
    for f in data["flows"]:  # every unanswered connection has a verdict, every answered one none
        assert all((c["verdict"] is None) == (c["outcome"] == "reply") for c in f["connections"]), f["name"]
    v = flows["local-without-endpoint"]["verdict"]
    rule = "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"
    assert (v["action"], v["at"], v["point"], v["evidence"], v["hook"], v["table"], v["chain"], v["rule"]) == (
        "DROP", "node2", "node2/eth0", "netfilter trace", "INPUT", "kube-proxy", "nodeport-endpoints-check", rule)
    assert ("(element { tcp . 30081 : drop } of map no-endpoint-nodeports) (default/local:http has no local "
            "endpoints)") in v["text"]
    v = flows["no-endpoints"]["verdict"]
    assert (v["action"], v["at"], v["point"], v["hook"], v["chain"], v["rule"], v["icmp"]) == (
        "REJECT", "node1", "node1/cni0", "FORWARD", "reject-chain", "reject", "icmp-port-unreachable")
    assert "(element { 10.96.0.40 . tcp . 80 : goto reject-chain } of map no-endpoint-services)" in v["text"]
    if why_unavailable() is None:  # the drop tracer confirms both
        assert flows["local-without-endpoint"]["verdict"]["reason"] == "NETFILTER_DROP"
        assert v["reason"] == "NETFILTER_DROP" and v["function"] == "nft_do_chain"


def test_nodeport_local_in_nftables_mode_dies_where_and_why_it_expects(tmp_path: Path) -> None:
    res, data = _run(tmp_path, str(ROOT / "scenarios" / "nodeport-local.yaml"), "--proxy-mode", "nftables",
                     "--name", "vd-npl")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    died = [c for c in data["checks"] if c["what"] == "died"]
    assert len(died) == 1 and died[0]["ok"] and died[0]["expected"] == "at node2; reason has no local endpoints"
    v = next(f for f in data["flows"] if f["name"] == FLOW)["verdict"]
    assert (v["at"], v["chain"], v["hook"]) == ("node2", "nodeport-endpoints-check", "INPUT")


def test_an_mtu_mismatch_verdict_points_at_the_underlay_and_the_table_follows_the_segment_that_died(
        tmp_path: Path) -> None:
    if why_unavailable() is not None:
        pytest.skip(f"kernel drop reasons unavailable: {why_unavailable()}")
    res, data = _run(tmp_path, str(ROOT / "scenarios" / "faults" / "mtu-mismatch.yaml"), "--name", "vd-mtu")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    flow = next(f for f in data["flows"] if f["name"] == "large-request")
    v, conn = flow["verdict"], flow["connections"][0]
    hops = conn["hops"]
    assert (v["at"], v["function"], v["evidence"]) == ("underlay", "__dev_forward_skb2", "kfree_skb by tuple")
    assert v["point"] == hops[-1]["member"] + "/" + hops[-1]["interface"] and v["point"].startswith("underlay/")
    assert "(1514 bytes)" in v["text"]
    # the table shows the dropped segment (an ACK-flagged data segment in VXLAN), numbered in run.pcapng
    assert all(h["direction"] == "request" and h["flags"] == "." and h["frame"] for h in hops), hops
    assert hops[-1]["outer"] and hops[-1]["outer"]["dst"] == "192.168.1.101"
    # the handshake that was answered is kept apart: it reached web-1 and came back
    assert [h["member"] for h in conn["opened"] if h["direction"] == "request"][-1] == "web-1"
    assert flow["hops"] == hops
    md = (tmp_path / "report.md").read_text().split("## flow large-request", 1)[1]
    lane = v["point"].replace("/", "_").replace("-", "_")
    assert f"-x{lane}: " in md.split("```mermaid", 1)[1].split("```", 1)[0]


def test_in_nftables_mode_the_oracle_skips_a_packet_that_died_outside_netfilter(tmp_path: Path) -> None:
    if why_unavailable() is not None:
        pytest.skip(f"kernel drop reasons unavailable: {why_unavailable()}")
    res, data = _run(tmp_path, str(ROOT / "scenarios" / "faults" / "rp-filter.yaml"), "--proxy-mode", "nftables",
                     "--name", "vd-rpf")
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    flow = data["flows"][0]
    assert (flow["verdict"]["reason"], flow["verdict"]["at"]) == ("IP_RPFILTER", "node1")
    assert flow["oracle"]["text"] == ("not checked: connection 0 died on node1 outside netfilter (IP_RPFILTER), "
                                      "where the model's path goes on")
