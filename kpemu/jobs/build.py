"""Resolve a scenario into one job (pure): every step, text and address the kernel half needs.

The host does all the thinking here (the model, the plan, kube-proxy's rules for the kernel that
will run them, capture points, flows and their trace matches) so that the executor, on the host or
in the guest, only runs tools and opens sockets. What the kernel must read back equal (iptables,
ipsets, IPVS) travels with the job and is checked by the host afterwards (kpemu.jobs.verify).
"""

from __future__ import annotations

from dataclasses import replace

from kpemu.capture.points import capture_points
from kpemu.cni import cni_of
from kpemu.errors import InputError
from kpemu.jobs.schema import JOB_VERSION, ContainerSpec, FlowSpec, Job, Readback, RealKubeProxy, ServerSpec
from kpemu.kernel.owner import alias, lab_owner
from kpemu.labplan import LabPlan
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from kpemu.plan.batch import Step, fabric_steps
from kpemu.plan.fabric import loadbalancer_targets
from kpemu.plan.lbrules import BalancerSpec
from kpemu.plan.tracing import flow_match
from kpemu.plan.types import Plan
from kpemu.proxy.health import health_specs
from kpemu.proxy.modes import mode_of
from kpemu.proxy.proxymode import restore_step
from kpemu.statedir import PREFIX


def release_tuple(release: str) -> tuple[int, int]:
    """(major, minor) of a kernel release string such as 6.1.0-57-amd64."""
    major, minor, *_ = (int("".join(c for c in p if c.isdigit()) or 0) for p in [*release.split(".")[:2], "0"])
    return major, minor


def lab_steps(lp: LabPlan) -> tuple[list[Step], list[Readback]]:
    """Every step that builds the lab (fabric, kube-proxy per node unless the real one programs them, CNI
    rules) and the read-back expectations (the model's, which the real kube-proxy is compared with)."""
    topo, plan = lp.topology, lp.fabric
    steps = fabric_steps(plan, alias(lab_owner(topo.name)), tuple(sorted(topo.containers())))
    expected: list[Readback] = []
    for node in topo.nodes:
        st = lp.proxy.node(node.name)
        steps += st.steps if topo.kubeProxy.implementation == "model" else st.kubelet_steps
        expected += [Readback.from_json(r, f"{node.name}'s kube-proxy state") for r in st.readback]
    steps += [restore_step(f"{r.owner} rules in {r.ns}", r.ns, r.text, topo.kubeProxy.backend) for r in plan.rules]
    return steps, expected


def pod_servers(topo: Topology, plan: Plan) -> tuple[ServerSpec, ...]:
    """Every pod's server: its TCP, UDP and SCTP ports (an image's own when it has one)."""
    return tuple(ServerSpec(plan.netns(p.name), p.name, p.has_image,
                            tuple(pp.port for pp in p.ports if pp.protocol == "TCP"),
                            tuple(pp.port for pp in p.ports if pp.protocol == "UDP"),
                            tuple(pp.port for pp in p.ports if pp.protocol == "SCTP"))
                 for p in topo.pods if p.ports)


def deploy_job(lp: LabPlan, source: str = "", serve: bool = False, upstream: RealKubeProxy | None = None) -> Job:
    """A job that only builds the lab (`kpemu deploy`); with `serve`, its pods keep serving until destroy.
    With `upstream` the real kube-proxy programs the nodes and serves their health checks itself."""
    topo, plan = lp.topology, lp.fabric
    if (topo.kubeProxy.implementation == "upstream") != (upstream is not None):
        raise InputError(f"{topo.name}: kubeProxy.implementation upstream runs the real kube-proxy for the length "
                         "of a `kpemu run`; a deployed lab is programmed by kpemu's model (implementation: model)")
    steps, expected = lab_steps(lp)
    mode = mode_of(topo)
    return Job(version=JOB_VERSION, kind="deploy", lab=topo.name, source=source, prefix=PREFIX,
               serve=serve, servers=pod_servers(topo, plan) if serve else (),
               namespaces=plan.namespaces, steps=tuple(steps), readback=tuple(expected),
               backend=topo.kubeProxy.backend, ipvs="ipvs" in mode.saved, rule_kinds=tuple(mode.saved),
               trace_kind=mode.trace,
               containers={m: ContainerSpec(plan.netns(m), c.image, tuple(c.command) if c.command is not None else None,
                                            dict(c.env)) for m, c in sorted(topo.containers().items())},
               nodes={n.name: plan.netns(n.name) for n in topo.nodes}, device_needs=cni_of(topo).device_needs,
               health=health_specs(topo, plan) if upstream is None else (), balancers=health_checking_balancers(lp),
               upstream=upstream)


def health_checking_balancers(lp: LabPlan) -> tuple[BalancerSpec, ...]:
    """The lab's external load balancers with a Service kube-proxy health-checks behind them."""
    topo, out = lp.topology, []
    for e in topo.externals:
        targets = loadbalancer_targets(topo, e) if e.role == "loadbalancer" and e.vip is not None else ()
        if any(t.health_port for t in targets):
            assert e.vip is not None
            out.append(BalancerSpec(e.name, lp.fabric.netns(e.name), e.vip, targets,
                                    restore_step("", "", "", topo.kubeProxy.backend).argv))
    return tuple(out)


def collect_job(sc: Scenario, lp: LabPlan, trace: bool = True, keep: bool = False,
                upstream: RealKubeProxy | None = None) -> Job:
    """A job that deploys the scenario's lab (planned with its faults: `lab_plan(topo, kernel,
    sc.spec.faults)`), runs its flows with captures and traces, and removes it; with `upstream`, under
    the real kube-proxy."""
    topo, plan = sc.topology, lp.fabric
    if upstream is not None and keep:
        raise InputError(f"{sc.name}: --keep keeps a lab programmed by kpemu's model; the real kube-proxy runs "
                         "for the length of the run")
    nat = [n.name for n in topo.nodes] + [e.name for e in topo.externals if e.role == "loadbalancer"]
    return replace(
        deploy_job(lp, str(sc.path), upstream=upstream),
        kind="collect", trace=trace, settle=sc.spec.settle, keep=keep,
        faults=lp.faults,
        servers=pod_servers(topo, plan),
        captures=tuple(capture_points(plan, topo, sc.flows)),
        snaplen=sc.spec.snaplen,
        nat_members={m: plan.netns(m) for m in nat},
        flows=tuple(FlowSpec(name=f.flow.name, src_ns=plan.netns(f.src_member), dst=f.dst_ip, port=f.dst_port,
                             proto=f.protocol.lower(),  # type: ignore[arg-type]
                              match=flow_match(topo, f),
                             from_=f.flow.from_, connections=f.flow.connections, timeout=f.flow.timeout,
                             size=f.flow.size or 0, sport=f.flow.sourcePort, http=f.flow.http,
                             command=tuple(f.flow.command) if f.flow.command is not None else None,
                             container=f.src_container, candidates=tuple(f.candidates))
                    for f in sc.flows),
    )
