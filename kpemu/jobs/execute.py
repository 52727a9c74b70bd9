"""The kernel half of a run: execute a job (see kpemu.jobs) on the kernel this process runs on.

Deploy the lab from its steps (state file first, rollback on failure), save the rules the kernel
holds, serve every pod from this process, capture at every point, send each flow (traced and
between two counter snapshots), read conntrack and IPVS, stop, destroy the lab (always), and
write `collected.json` with everything the host's analysis needs.

The same code runs on the host and in the guest. In a software-emulated guest every Python import
costs seconds, so this module and what it imports use the standard library and light kpemu
modules only (no pydantic, pyroute2, rich, scapy, yaml: a unit test holds this), and start no
Python process: servers and clients are sockets opened inside the lab's namespaces.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kpemu.analyse.drops import window as drops_window
from kpemu.capture.tcpdump import render_text, start_captures, stop_captures
from kpemu.cni.spec import DeviceNeed
from kpemu.errors import ApplyError, EnvironmentProblem, InputError, KpemuError, Problem
from kpemu.jobs.balancers import check_balancers
from kpemu.jobs.schema import COLLECTED, Collected, FlowSpec, Job
from kpemu.kernel import netns as nsmod
from kpemu.kernel import nfacct, snapshot
from kpemu.kernel.drops import DropSession, start_drop_tracing
from kpemu.kernel.faults import apply_faults, restore_kernel_wide
from kpemu.kernel.lab import destroy
from kpemu.kernel.labstate import LabState, state_path, taken
from kpemu.kernel.runowner import my_token
from kpemu.kernel.tracers import TRACERS
from kpemu.pace import scaled
from kpemu.plan.batch import Step
from kpemu.plan.faultstep import AppliedFault
from kpemu.plan.tracing import TraceData
from kpemu.sizing import descriptors_needed
from kpemu.statedir import scratch_dir
from kpemu.traffic.client import connections
from kpemu.traffic.health import HealthServers, serve_health
from kpemu.traffic.labserver import SERVE_FILES, start_lab_server
from kpemu.traffic.result import FlowResult
from kpemu.traffic.server import PodServers, kernel_has_sctp, serve_pods

DROP_SLACK_NS = 300_000_000  # a drop reported just after the client gave up still belongs to the flow
# Seconds between a traced flow's connections: xtables-monitor prints (and looks up) every event,
# and a burst of back-to-back connections can overflow its netlink socket (it then exits).
TRACE_GAP = float(os.environ.get("KPEMU_TRACE_GAP", "0.02"))
READY_TIMEOUT = 5.0  # seconds (scaled) for an image's own server to listen
SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM = 0x17
IFREQ_SIZE = 40

Progress = Callable[[str], None]
Timings = list[tuple[str, float]]  # (what, seconds) of the steps and phases one job ran


def _quiet(_: str) -> None:
    pass


@contextlib.contextmanager
def timed(timings: Timings, what: str) -> Iterator[None]:
    """Record in `timings` how long `what` took (collected.json carries them; `make bench` reads them)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings.append((what, round(time.perf_counter() - t0, 3)))


# ---------------------------------------------------------------- steps


def tx_checksum_off(devices: list[str]) -> None:
    """Turn TX checksum offload off on `devices` of the calling thread's namespace (SIOCETHTOOL, as
    `ethtool -K DEV tx off`), so captured checksums are the real ones (containerlab does it too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for dev in devices:
            value = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_STXCSUM, 0), 8)
            ifreq = struct.pack("16sP", dev.encode(), ctypes.addressof(value)).ljust(IFREQ_SIZE, b"\0")
            try:
                fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
            except OSError as e:
                raise ApplyError(f"TX checksum offload off on {dev}: {e.strerror}") from None


def write_sysctls(values: tuple[tuple[str, str, bool], ...]) -> None:
    """Write (key, value, optional) sysctls in the calling thread's namespace (/proc/sys/net follows it)."""
    for key, value, optional in values:
        try:
            Path("/proc/sys", key).write_text(str(value))
        except OSError as e:
            if not optional:
                what = "does not exist" if isinstance(e, FileNotFoundError) else f"cannot be set: {e.strerror}"
                raise ApplyError(f"sysctl {key.replace('/', '.')}={value} {what}") from None


def run_step(step: Step, job: Job | None = None) -> None:
    """Execute one step of `job`; ApplyError naming it when it fails."""
    try:
        with nsmod.inside(step.ns):
            if step.kind == "sysctl":
                write_sysctls(step.sysctls)
            elif step.kind == "txcsum-off":
                tx_checksum_off(list(step.devices))
            elif step.kind == "nfacct":
                nfacct.ensure_counters(step.ns)
            elif step.kind == "containers":
                from kpemu.docker.members import start_members  # the docker SDK: only for labs with images

                assert job is not None, "a containers step runs as part of its job"
                start_members(job.lab, {m: job.containers[m].to_json() for m in step.devices})
            else:
                res = subprocess.run(step.argv, input=step.input, capture_output=True, text=True, check=False)
                if res.returncode != 0:
                    raise ApplyError(_failure(step, res.stderr, job.device_needs if job is not None else ()))
    except ApplyError as e:
        raise ApplyError(f"{step.what}: {e}") from None
    except FileNotFoundError as e:
        raise EnvironmentProblem(f"{step.what}: {e.filename} is not installed",
                                 "make setup (or install iproute2, iptables, ipset, ipvsadm)") from None


def _failure(step: Step, stderr: str, device_needs: tuple[DeviceNeed, ...]) -> str:
    """What a failed step says; EnvironmentProblem when the kernel lacks a device the lab needs
    (`device_needs`: the CNI's, carried by the job)."""
    text = stderr.strip()
    for need in device_needs:
        if need.device in (step.input or "") and need.error in text:
            raise EnvironmentProblem(need.problem, need.fix)
    if "kube-ipvs0" in (step.input or "") and "Unknown device type" in text:
        raise EnvironmentProblem("this kernel has no dummy device (module dummy), which IPVS mode needs",
                                 "run with --runtime vm (a guest kernel with dummy and ip_vs)")
    hint = f"\n  {nfacct.XT_NFACCT_HINT}" if "nfacct" in text else ""
    return f"{' '.join(step.argv[:2])} failed: {text[-400:]}{hint}"


def claim(job: Job, command: str = "deploy", out: str = "") -> LabState:
    """Make the job's lab this process's: its state file, written only if the lab has none (exactly one
    of two runs of one lab wins) and no namespace of its name exists. EnvironmentProblem, naming the
    owner and how to wait for it or stop it, when the lab is taken; nothing is changed then."""
    namespaces = [n.name for n in job.namespaces]
    state = LabState(lab=job.lab, source=job.source, namespaces=namespaces,
                     members={n.member: n.name for n in job.namespaces},
                     kinds={n.member: n.kind for n in job.namespaces},
                     containers=sorted(job.containers), created_at=time.time(),
                     owner=my_token(), command=command, out=out)
    recorded = state.claim()
    if recorded is not None:
        raise EnvironmentProblem(*taken(job.lab, recorded))
    existing = set(nsmod.list_netns(job.prefix))
    clashes = [ns for ns in namespaces if ns in existing]
    if clashes:
        state_path(job.lab).unlink(missing_ok=True)
        raise EnvironmentProblem(f"lab {job.lab!r}: namespace(s) {', '.join(clashes)} exist with no state file "
                                 "of this lab", f"kpemu destroy {job.lab} (it removes only namespaces marked "
                                 "as this lab's), or --name another lab name")
    return state


def deploy(job: Job, progress: Progress = _quiet, state: LabState | None = None,
           timings: Timings | None = None) -> LabState:
    """Claim the lab (unless `state` says this process has), then run every step (each one's seconds into
    `timings`); on any failure remove what exists and re-raise."""
    state = state or claim(job)
    timings = [] if timings is None else timings
    namespaces = state.namespaces
    nsmod.raise_nofile(descriptors_needed(sum(len(s.tcp) + len(s.udp) + len(s.sctp) for s in job.servers)
                                          + sum(1 + len(h.services) * len(h.bind) for h in job.health),
                                          len(job.captures)))
    started = time.perf_counter()
    try:
        for step in job.steps:
            with timed(timings, step.what):
                run_step(step, job)
    except BaseException:
        destroy(job.lab)
        raise
    state.deploy_seconds = time.perf_counter() - started
    if job.serve:
        try:
            start_lab_server([s.to_json() for s in job.servers if not s.own], scratch_dir(job.lab),
                             [h.to_json() for h in job.health])
            for probed in check_balancers(job.balancers, run_step):  # as a run does, once the servers listen
                progress(f"{probed.balancer} health checks: "
                         + ", ".join(f"{k} {v or 'no answer'}" for k, v in probed.status.items()))
        except BaseException:
            destroy(job.lab)
            raise
    state.complete = True
    state.save()
    progress(f"deployed {job.lab}: {len(namespaces)} namespaces in {state.deploy_seconds:.1f}s")
    return state


# ---------------------------------------------------------------- traffic


@dataclass
class _Gathered:
    """What `_traffic` gathers, flow by flow, for collected.json."""

    results: dict[str, FlowResult] = field(default_factory=dict)
    traces: dict[str, TraceData] = field(default_factory=dict)
    conntrack: dict[str, str] = field(default_factory=dict)
    ipvs: dict[str, str] = field(default_factory=dict)
    faults: list[AppliedFault] = field(default_factory=list)
    balanced: list[dict[str, Any]] = field(default_factory=list)
    timings: Timings = field(default_factory=list)
    upstream: dict[str, Any] | None = None

    def collected(self, job: Job, seconds: float) -> Collected:
        """collected.json's content: what was gathered for `job` in `seconds`, on this kernel."""
        return Collected(results=self.results, conntrack=self.conntrack, ipvs=self.ipvs, traces=self.traces,
                         points=job.captures, faults=tuple(self.faults), balanced=tuple(self.balanced),
                         seconds=seconds, trace=job.trace,
                         kernel=os.uname().release, readback=job.readback, timings=tuple(self.timings),
                         upstream=self.upstream)


def _serve_health(job: Job) -> HealthServers:
    """kube-proxy's health-check servers of every node, listening in its namespace; `close()` when done."""
    try:
        return serve_health(list(job.health))
    except OSError as e:
        raise ApplyError(f"kube-proxy's health servers: {e.strerror or e}") from None


def refuse_sctp_flows(job: Job, has_sctp: bool) -> None:
    """InputError (exit 2) naming the scenario file and every SCTP flow when this kernel has no SCTP:
    such a flow is never sent as TCP in its place. Before the lab is claimed: nothing is created."""
    if has_sctp:
        return
    problems = [Problem(job.source or job.lab, f"flows[{i}]",
                        f"flow {f.name} is SCTP and this kernel ({os.uname().release}) has no SCTP (module sctp): "
                        "kpemu never sends it as TCP instead; run it on a kernel with SCTP (kpemu doctor shows "
                        "feature sctp; --runtime auto takes the guest kernel when this one lacks it), or drop the "
                        "flow")
                for i, f in enumerate(job.flows) if f.proto == "sctp"]
    if problems:
        raise InputError(problems)


@contextlib.contextmanager
def _servers(job: Job) -> Iterator[PodServers]:
    sctp = kernel_has_sctp()  # without it no SCTP flow runs (refuse_sctp_flows), so no SCTP port is served
    try:
        servers = serve_pods([(s.pod, s.ns, list(s.tcp), list(s.udp), list(s.sctp) if sctp else [])
                              for s in job.servers if not s.own])
    except OSError as e:
        raise ApplyError(f"the pods' servers: {e.strerror or e}") from None
    health = None
    try:
        health = _serve_health(job)
        own = [s.to_json() for s in job.servers if s.own]  # an image's own server answers in its container
        if own:
            from kpemu.traffic.container import wait_listening

            wait_listening(own, scaled(READY_TIMEOUT))
        yield servers
    finally:
        servers.close()
        if health is not None:
            health.close()


def run_flow(flow: FlowSpec, gap: float = 0.0) -> FlowResult:
    """One flow's connections from its source namespace, in this thread (a container source runs its own
    command in its container)."""
    out = FlowResult(flow.name)
    if flow.container:
        from kpemu.traffic.container import run_in_container

        budget = flow.connections * (flow.timeout + 2.0 + gap) + scaled(5.0)
        out.connections, out.stderr = run_in_container(flow.src_ns, flow.to_json(), budget)
        return out
    try:
        with nsmod.inside(flow.src_ns):
            out.connections = list(connections(flow.name, flow.dst, flow.port, flow.proto, flow.connections,
                                               flow.timeout, gap, flow.http, list(flow.candidates), flow.size,
                                               flow.sport or 0))
    except OSError as e:
        out.stderr = f"client failed: {e}"
    return out


def _traced_flow(job: Job, flow: FlowSpec, out: Path) -> tuple[FlowResult, TraceData]:
    before = snapshot.read_counters(job.nodes, job.backend, job.ipvs)
    session = TRACERS[job.trace_kind](job.nodes, flow.match, job.backend, scratch_dir(job.lab))
    try:
        result = run_flow(flow, gap=TRACE_GAP if session.unavailable is None else 0.0)
    finally:
        texts = session.stop()
    after = snapshot.read_counters(job.nodes, job.backend, job.ipvs)
    texts = texts if session.unavailable is None else {}
    tdir = out / "trace"
    tdir.mkdir(parents=True, exist_ok=True)
    for node, text in texts.items():
        (tdir / f"{flow.name}_{node}.txt").write_text(text)
    return result, TraceData(texts=texts, unavailable=session.unavailable, before=before, after=after)


def _traffic(job: Job, out: Path, progress: Progress, gathered: _Gathered, drops: DropSession | None = None
             ) -> None:
    timings = gathered.timings
    windows: dict[str, tuple[int, int]] = {}
    with timed(timings, "save the rules"):
        snapshot.save_rules(job.nodes, job.backend, list(job.rule_kinds), out / "rules")
    with timed(timings, "apply the faults"):  # after the rules are saved: rules/ is what kube-proxy programmed
        gathered.faults = apply_faults(job.faults, job.backend, in_guest=job.in_guest)
    caps = []
    with _servers(job):
        try:
            with timed(timings, "start the captures"):
                caps = start_captures(list(job.captures), out / "pcaps", job.snaplen)
            progress(f"capturing at {len(caps)} points")
            if job.balancers:
                with timed(timings, "health-check the balanced nodes"):
                    for probed in check_balancers(job.balancers, run_step):
                        gathered.balanced.append(probed.to_json())
                        progress(f"{probed.balancer} health checks: "
                                 + ", ".join(f"{k} {v or 'no answer'}" for k, v in probed.status.items()))
            if drops is not None:
                with timed(timings, "attach the drop tracer"):
                    drops.wait_ready()
            for flow in job.flows:
                start = time.monotonic_ns()
                with timed(timings, f"flow {flow.name}"):
                    _one_flow(job, flow, gathered, out)
                windows[flow.name] = (start, time.monotonic_ns())
                gathered.faults += apply_faults(job.faults, job.backend, after=flow.name, in_guest=job.in_guest)
                outcomes = gathered.results[flow.name].outcomes
                progress(f"flow {flow.name}: {', '.join(outcomes) or 'no result'}")
            time.sleep(job.settle)
            if drops is not None and job.trace:
                with timed(timings, "stop the drop tracer"):
                    _split_drops(drops, windows, gathered, out)
            with timed(timings, "conntrack and IPVS snapshots"):
                gathered.conntrack, gathered.ipvs = snapshot.connection_tables(job.nat_members, job.nodes, job.ipvs)
        finally:
            with timed(timings, "stop the captures"):
                stop_captures(caps)
    if job.render:  # a guest leaves it to the host, where tcpdump starts far faster
        with timed(timings, "render the captures as text"):
            render_text(caps, out / "capture")


def _split_drops(session: DropSession, windows: dict[str, tuple[int, int]], gathered: _Gathered, out: Path) -> None:
    """Stop the drop tracer, keep its text in trace/drops.txt and give each flow the kernel drops
    inside its window (+ a little slack)."""
    text = session.stop()
    (out / "trace").mkdir(parents=True, exist_ok=True)
    (out / "trace" / "drops.txt").write_text(text)
    members = {str(k): v for k, v in session.members.items()}
    starts = sorted(start for start, _ in windows.values())
    for name, (start, end) in windows.items():
        following = [s for s in starts if s > start]
        end = min(end + DROP_SLACK_NS, following[0] if following else end + DROP_SLACK_NS)
        gathered.traces[name] = replace(
            gathered.traces[name], drops_unavailable=session.unavailable, drop_members=members,
            drops=drops_window(text, start, end) if session.unavailable is None else "")


def _one_flow(job: Job, flow: FlowSpec, gathered: _Gathered, out: Path) -> None:
    if job.trace:
        gathered.results[flow.name], gathered.traces[flow.name] = _traced_flow(job, flow, out)
    else:
        gathered.results[flow.name] = run_flow(flow)


def prepare_out(out: Path) -> None:
    """Empty the run directory's generated parts (keeps anything else a user put there)."""
    for sub in ("pcaps", "capture", "rules", "trace"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for f in ("report.md", "hops.json", "report.html", "report.png", "run.pcapng", COLLECTED):
        (out / f).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the lab is removed, so a second Ctrl-C cannot leave it half-removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _keep(job: Job, state: LabState) -> bool:
    """`kpemu run --keep`: the lab stays as a deployed one, its pods serving (kpemu.traffic.labserver);
    the kernel-wide settings its faults changed are put back, as the lab's own stay."""
    restore_kernel_wide()
    start_lab_server([s.to_json() for s in job.servers if not s.own], scratch_dir(job.lab),
                     [h.to_json() for h in job.health])
    state.command = "deploy"
    state.save()
    return True


@contextlib.contextmanager
def _real_kube_proxy(job: Job, out: Path, progress: Progress, gathered: _Gathered) -> Iterator[None]:
    """The real kube-proxy programming the nodes while the block runs (a job with `upstream`), else nothing."""
    if job.upstream is None:
        yield
        return
    from kpemu.realproxy.lab import running

    gathered.upstream = {}
    with running(job.lab, job.upstream, job.nodes, progress, gathered.upstream, out / "kube-proxy"):
        yield


def collect(job: Job, out: Path, progress: Progress = _quiet) -> float:
    """Execute a collect job into `out`: pcaps/, capture/, rules/, trace/ and collected.json; its seconds.

    The lab is destroyed on every way out, Ctrl-C and SIGTERM included.
    """
    started = time.perf_counter()
    refuse_sctp_flows(job, kernel_has_sctp())
    claimed = claim(job, "run", str(out))  # before anything else: a refused run touches nothing of the owner's
    gathered = _Gathered()
    drops = None
    kept = False
    with _sigterm_as_interrupt():
        try:
            # the drop tracer attaches while the lab is deployed; its scratch files are this run's, as the lab is
            drops = start_drop_tracing(scratch_dir(job.lab) / "drops.txt", job.in_guest) if job.trace else None
            state = deploy(job, progress, claimed, gathered.timings)
            try:
                prepare_out(out)  # only once the lab is ours: a refused run leaves the folder alone
                if drops is not None:
                    drops.watch(state.members)
                with _real_kube_proxy(job, out, progress, gathered):
                    _traffic(job, out, progress, gathered, drops)
                if job.keep:
                    kept = _keep(job, state)
            finally:
                if drops is not None:  # before the destroy removes the lab's scratch folder, where it writes
                    drops.stop()
                if not kept:
                    with _signals_blocked(), timed(gathered.timings, "destroy the lab"):
                        restore_kernel_wide()
                        destroy(state.lab)
        finally:
            if drops is not None:  # deploy failed (a second stop returns what the first kept)
                drops.stop()
            for p in sorted(scratch_dir(job.lab).glob("*")) if kept else [scratch_dir(job.lab)]:
                if not p.name.startswith(SERVE_FILES):  # trace and drop files: read, now gone
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            if not kept:
                state_path(job.lab).unlink(missing_ok=True)  # the claim, when deploy never started
    seconds = time.perf_counter() - started
    (out / COLLECTED).write_text(json.dumps(gathered.collected(job, seconds).to_json()) + "\n")
    return seconds


def main(argv: list[str] | None = None) -> int:
    """`python -m kpemu.jobs.execute JOB.json OUT_DIR`: collect; exit 0, or the error's exit code with the
    reason on stderr (3 when the kernel or the machine refused, 2 for a malformed job)."""
    job_file, out = (argv if argv is not None else sys.argv[1:])[:2]
    try:
        collect(Job.from_json(json.loads(Path(job_file).read_text())), Path(out),
                lambda m: print(m, file=sys.stderr, flush=True))
    except KpemuError as e:
        print(f"kpemu: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
