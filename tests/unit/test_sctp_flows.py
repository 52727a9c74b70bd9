"""SCTP flows are SCTP end to end or refused: resolved from an SCTP Service port as SCTP (never TCP), served
and sent on SCTP sockets, traced with SCTP matches (accepted by iptables-restore and nft on this machine),
decoded from the captures; a kernel without SCTP sends them to the guest (auto) or refuses them (exit 2)."""

from __future__ import annotations

import pytest

from kpemu.capture.pcap import _decode
from kpemu.errors import InputError
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs.build import collect_job
from kpemu.jobs.execute import refuse_sctp_flows
from kpemu.jobs.schema import Job
from kpemu.kernel.nfttrace import trace_table_text
from kpemu.kernel.probe import Capabilities, Feature, requirements
from kpemu.labplan import lab_plan
from kpemu.model.scenario import Scenario
from kpemu.plan.tracing import FlowMatch, trace_rule_args
from kpemu.runtimes import choose, needs_of

SCENARIO = "scenarios/sctp-service.yaml"


@pytest.fixture(scope="module")
def job() -> tuple[Scenario, Job]:
    sc = load_scenario(SCENARIO)
    return sc, collect_job(sc, lab_plan(sc.topology, (6, 1)))


def test_an_sctp_service_port_makes_sctp_flows_and_sctp_servers(job: tuple[Scenario, Job]) -> None:
    sc, j = job
    assert [f.protocol for f in sc.flows] == ["SCTP", "SCTP"]
    assert [(f.name, f.proto, f.dst, f.port, f.match.proto) for f in j.flows] == [
        ("pod-to-clusterip", "sctp", "10.96.0.38", 3868, "sctp"),
        ("external-to-nodeport", "sctp", "192.168.1.101", 30868, "sctp")]
    assert [(s.pod, s.tcp, s.udp, s.sctp) for s in j.servers] == [("sig-0", (), (), (3868,)),
                                                                   ("sig-1", (), (), (3868,))]


def test_sctp_trace_rules_select_init_and_init_ack() -> None:
    m = FlowMatch("sctp", "10.244.0.10", "10.96.0.38", 3868, (("10.244.0.2", 3868),), "f", syn_only=True)
    chunks = ("--chunk-types", "any", "INIT,INIT_ACK")
    com = ("-m", "comment", "--comment", "kpemu-trace:f", "-j", "TRACE")
    assert trace_rule_args(m) == [
        ("-s", "10.244.0.10", "-d", "10.96.0.38", "-p", "sctp", "-m", "sctp", "--dport", "3868", *chunks, *com),
        ("-s", "10.96.0.38", "-d", "10.244.0.10", "-p", "sctp", "-m", "sctp", "--sport", "3868", *chunks, *com),
        ("-d", "10.244.0.2", "-p", "sctp", "-m", "sctp", "--dport", "3868", *chunks, *com),
        ("-s", "10.244.0.2", "-p", "sctp", "-m", "sctp", "--sport", "3868", *chunks, *com),
    ]
    assert ("add rule ip kpemu-trace pre ip daddr 10.244.0.2 sctp dport 3868 sctp chunk init exists meta nftrace "
            "set 1\n") in trace_table_text(m)


def test_captured_sctp_is_decoded_as_sctp_with_its_ports() -> None:
    from scapy.layers.inet import IP
    from scapy.layers.sctp import SCTP, SCTPChunkInit

    pkt = _decode(IP(bytes(IP(src="10.244.0.10", dst="10.96.0.38") / SCTP(sport=40000, dport=3868) /
                           SCTPChunkInit())), "cl-1/eth0", 0, 0)
    assert pkt is not None
    assert (pkt.proto, pkt.src, pkt.sport, pkt.dst, pkt.dport) == ("sctp", "10.244.0.10", 40000, "10.96.0.38", 3868)


def _caps(sctp: bool) -> Capabilities:
    names = set(requirements("flannel-vxlan", "iptables")) | {"sctp"}
    return Capabilities(features={n: Feature(n, n != "sctp" or sctp, "test") for n in names}, kernel="6.18")


def test_auto_takes_the_guest_for_sctp_flows_when_this_kernel_lacks_sctp() -> None:
    needs = needs_of(load_scenario(SCENARIO))
    (runtime, why), = choose("auto", [needs], _caps(sctp=False))
    assert type(runtime).__name__ == "GuestRuntime"
    assert why == ("this kernel (6.18) lacks what is needed: SCTP flow scenarios/sctp-service.yaml: flows[0] "
                   "pod-to-clusterip, scenarios/sctp-service.yaml: flows[1] external-to-nodeport (sent as SCTP, "
                   "never as TCP) needs sctp")
    (runtime, _), = choose("auto", [needs], _caps(sctp=True))
    assert type(runtime).__name__ == "HostRuntime"


def test_the_executor_refuses_sctp_flows_without_sctp_before_anything_is_made(job: tuple[Scenario, Job]) -> None:
    _, j = job
    refuse_sctp_flows(j, has_sctp=True)
    with pytest.raises(InputError) as e:
        refuse_sctp_flows(j, has_sctp=False)
    assert e.value.exit_code == 2
    assert [(p.file, p.path) for p in e.value.problems] == [(SCENARIO, "flows[0]"), (SCENARIO, "flows[1]")]
    assert e.value.problems[1].message.startswith("flow external-to-nodeport is SCTP and this kernel (")
    assert e.value.problems[1].message.endswith(
        ") has no SCTP (module sctp): kpemu never sends it as TCP instead; run it on a kernel with SCTP (kpemu "
        "doctor shows feature sctp; --runtime auto takes the guest kernel when this one lacks it), or drop the flow")
