"""Resolve a scenario into one job (pure): every step, text and address the kernel half needs.

The host does all the thinking here (the model, the plan, kube-proxy's rules for the kernel that
will run them, capture points, flows and their trace matches) so that the executor, on the host or
in the guest, only runs tools and opens sockets. What the kernel must read back equal (iptables,
ipsets, IPVS) travels with the job and is checked by the host afterwards (kpemu.jobs.verify).
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict
from typing import Any

from kpemu.analyse.explain import flow_match
from kpemu.capture.points import capture_points
from kpemu.kernel.labstate import PREFIX
from kpemu.kernel.owner import alias, lab_owner
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step, batch_step, fabric_steps, sysctl_steps
from kpemu.plan.types import Plan, Sysctl
from kpemu.proxy.versions import flavour_for

JOB_VERSION = 1
RESTORE = {"nft": "iptables-nft-restore", "legacy": "iptables-legacy-restore"}


def release_tuple(release: str) -> tuple[int, int]:
    """(major, minor) of a kernel release string such as 6.1.0-57-amd64."""
    major, minor, *_ = (int("".join(c for c in p if c.isdigit()) or 0) for p in [*release.split(".")[:2], "0"])
    return major, minor


def _restore(what: str, ns: str, text: str, backend: str) -> Step:
    return Step("run", what, ns, (RESTORE[backend], "--noflush", "--wait"), text)


def needs_route_localnet(topo: Topology) -> bool:
    """iptables mode: always before 1.24; since then only with localhostNodePorts and loopback among
    the nodePortAddresses (an empty list means all addresses)."""
    kp = topo.kubeProxy
    loopback = not kp.nodePortAddresses or any(
        ipaddress.IPv4Address("127.0.0.1") in ipaddress.IPv4Network(c) for c in kp.nodePortAddresses
    )
    return flavour_for(kp).route_localnet_always or (kp.localhostNodePorts and loopback)


def proxy_steps(topo: Topology, node: str, ns: str, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """kube-proxy's state on one node as kube-proxy applies it (one ipset restore, one iptables-restore
    with all tables, IPVS in one go), and what each part must read back as."""
    from kpemu.proxy.save import ruleset_from_restore, save_text

    backend = topo.kubeProxy.backend
    if topo.kubeProxy.mode == "ipvs":
        from kpemu.proxy.ipset_text import restore_input
        from kpemu.proxy.iptables import kube_proxy_chains
        from kpemu.proxy.ipvs import DUMMY_DEVICE, ipvs_rules

        state = ipvs_rules(topo, node, kernel=kernel)
        rs = ruleset_from_restore(state.restore_text())
        steps = [
            Step("run", f"{node}: ipset restore", ns, ("ipset", "restore", "-exist"), restore_input(state.ipsets)),
            _restore(f"{node}: kube-proxy rules", ns, state.restore_text(), backend),
            batch_step(f"{node}: {DUMMY_DEVICE}", ns, [f"link add {DUMMY_DEVICE} type dummy"]
                       + [f"addr add {ip}/32 dev {DUMMY_DEVICE}" for ip in state.bound_addresses]),
            *sysctl_steps(f"{node}: IPVS sysctls", (Sysctl(ns, k, v) for k, v in state.sysctls)),
            Step("run", f"{node}: ipvsadm -R", ns, ("ipvsadm", "-R"), state.ipvsadm_text()),
        ]
        expected = [
            {"node": node, "kind": "iptables", "expected": save_text(rs, backend),
             "chains": {t: sorted(c) for t, c in kube_proxy_chains(rs).items()}},
            {"node": node, "kind": "ipset", "expected": state.ipset_save_text(),
             "sets": [s.name for s in state.ipsets]},
            {"node": node, "kind": "ipvs", "expected": state.ipvsadm_text()},
        ]
        return steps, expected
    from kpemu.proxy.iptables import iptables_rules, kube_proxy_chains, restore_text, uses_nfacct

    rs = iptables_rules(topo, node)
    steps = [Step("nfacct", f"{node}: kube-proxy's nfacct counters", ns)] if uses_nfacct(topo) else []
    steps.append(_restore(f"{node}: kube-proxy rules", ns, restore_text(rs), backend))
    if needs_route_localnet(topo):
        steps += sysctl_steps(f"{node}: route_localnet", [Sysctl(ns, "net/ipv4/conf/all/route_localnet", "1")])
    return steps, [{"node": node, "kind": "iptables", "expected": save_text(rs, backend),
                    "chains": {t: sorted(c) for t, c in kube_proxy_chains(rs).items()}}]


def lab_steps(topo: Topology, plan: Plan, kernel: tuple[int, int]) -> tuple[list[Step], list[dict]]:
    """Every step that builds the lab (fabric, kube-proxy per node, CNI rules) and the read-back expectations."""
    steps = fabric_steps(plan, alias(lab_owner(topo.name)))
    expected: list[dict] = []
    for node in topo.nodes:
        s, e = proxy_steps(topo, node.name, plan.netns(node.name), kernel)
        steps += s
        expected += e
    steps += [_restore(f"{r.owner} rules in {r.ns}", r.ns, r.text, topo.kubeProxy.backend) for r in plan.rules]
    return steps, expected


def namespaces_json(plan: Plan) -> list[dict[str, Any]]:
    return [{"name": n.name, "member": n.member, "kind": n.kind} for n in plan.namespaces]


def deploy_job(topo: Topology, plan: Plan, kernel: tuple[int, int], source: str = "") -> dict[str, Any]:
    """A job that only builds the lab (`kpemu deploy`)."""
    steps, expected = lab_steps(topo, plan, kernel)
    return {"version": JOB_VERSION, "kind": "deploy", "lab": topo.name, "source": source, "prefix": PREFIX,
            "namespaces": namespaces_json(plan), "steps": [s.to_json() for s in steps], "readback": expected,
            "backend": topo.kubeProxy.backend, "ipvs": topo.kubeProxy.mode == "ipvs",
            "nodes": {n.name: plan.netns(n.name) for n in topo.nodes}}


def collect_job(sc: Scenario, plan: Plan, kernel: tuple[int, int], trace: bool = True) -> dict[str, Any]:
    """A job that deploys the scenario's lab, runs its flows with captures and traces, and removes it."""
    topo = sc.topology
    job = deploy_job(topo, plan, kernel, str(sc.path))
    nat = [n.name for n in topo.nodes] + [e.name for e in topo.externals if e.role == "loadbalancer"]
    job.update(
        kind="collect", trace=trace, settle=sc.spec.settle,
        servers=[{"ns": plan.netns(p.name), "pod": p.name,
                  "tcp": [pp.port for pp in p.ports if pp.protocol == "TCP"],
                  "udp": [pp.port for pp in p.ports if pp.protocol == "UDP"]} for p in topo.pods if p.ports],
        captures=[asdict(i) for i in capture_points(plan, topo, sc.flows)],
        nat_members={m: plan.netns(m) for m in nat},
        flows=[{"name": f.flow.name, "src_ns": plan.netns(f.src_member), "dst": f.dst_ip, "port": f.dst_port,
                "proto": f.protocol.lower(), "connections": f.flow.connections, "timeout": f.flow.timeout,
                "match": asdict(flow_match(topo, f))} for f in sc.flows],
    )
    return job
