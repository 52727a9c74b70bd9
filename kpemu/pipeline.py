"""`kpemu run` as one recipe: load -> choose a runtime -> plan -> job -> collect -> analyse -> write reports.

`load` validates every file before anything is built; `run` does the rest for any list of scenarios,
and `compare_modes` is `run` over one scenario's kube-proxy mode variants. What a run must say on the
way (which runtime, progress, a hung guest) goes to a `Listener`; printing is the CLI's.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kpemu import runtimes
from kpemu.analyse.expect import fixed_ports
from kpemu.analyse.pipeline import RunResult, analyse
from kpemu.errors import EnvironmentProblem, InputError, KpemuError
from kpemu.inputs.scenario import load_scenario
from kpemu.jobs.build import collect_job, release_tuple
from kpemu.jobs.schema import COLLECTED, Collected, Readback, RealKubeProxy
from kpemu.jobs.verify import check_saved_rules
from kpemu.kernel.lab import require_root
from kpemu.labplan import LabPlan, lab_plan
from kpemu.model.modes import MODE_FACTS
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from kpemu.outlock import out_dir_lock
from kpemu.report.write import write_reports
from kpemu.runtimes.base import Gathered, Progress, Runtime, Work


@dataclass(frozen=True)
class Options:
    """How to run: where (`runtime`: auto | host | vm, None: the runtimes' default), with traces or not, and
    what to do with goldens and failures."""

    runtime: str | None = None
    trace: bool = True
    update_goldens: bool = False
    runs_dir: Path = Path("runs")  # several scenarios' parent folder: a runtime's shared files go to its guest/
    work_root: Path | None = None  # where a runtime keeps its own folder (default: see `_work_root`)
    keep_going: bool = False  # a scenario that fails is its outcome, and the others run (else it stops the run)
    keep: bool = False  # each lab stays after its run, its pods serving, until kpemu destroy (kpemu run --keep)


@dataclass(frozen=True)
class Outcome:
    """One scenario's run: where it ran and why, and what it produced or the error that stopped it."""

    scenario: Scenario
    out: Path
    runtime: Runtime
    reason: str
    result: RunResult | KpemuError


class Listener(Protocol):
    """What a run tells on the way (the CLI prints it)."""

    def placed(self, runtime: Runtime, reason: str, scenarios: list[Scenario]) -> None:
        """A batch of scenarios is about to run in `runtime`."""

    def skipped(self, sc: Scenario, why: str, fix: str) -> None:
        """A scenario of several cannot run where it would."""

    def progress(self) -> AbstractContextManager[Progress]:
        """A live progress line for one batch."""
        ...

    def notice(self, msg: str) -> None:
        """Something that must stay on screen (a guest that hung)."""

    def failed(self, outcome: Outcome) -> None:
        """A scenario of a batch failed; the others went on."""


def out_dir_for(out: str | None, name: str, several: bool) -> Path:
    """Where one scenario's files go: --out itself for one scenario, --out/<name> for several."""
    if out is None:
        return Path("runs") / name
    return Path(out) / name if several else Path(out)


def load(files: Sequence[str], proxy_mode: str | None = None, lab: str | None = None,
         kube_proxy: str | None = None) -> list[Scenario]:
    """Every scenario file loaded and valid (each name once) before anything is built, then this process
    checked for the privilege to build labs."""
    scenarios = [load_scenario(f, proxy_mode, lab, kube_proxy) for f in files]
    names = [sc.name for sc in scenarios]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"kpemu run: scenario {', '.join(dups)} given twice")
    require_root()
    return scenarios


def run(scenarios: Sequence[tuple[Scenario, Path]], opts: Options, tell: Listener) -> list[Outcome]:
    """Run each (scenario, output folder): choose its runtime, drop what cannot run there, then per batch
    plan each lab for the runtime's kernel, build its job, collect, analyse and write the reports.
    Outcomes in the order the batches ran (a batched runtime's first, see kpemu.runtimes.batches)."""
    placed = runtimes.choose(opts.runtime, [runtimes.needs_of(sc) for sc, _ in scenarios])
    runnable = _runnable(list(scenarios), placed, tell, opts.keep)
    outcomes: list[Outcome] = []
    for runtime, reason, batch in runtimes.batches(runnable):
        tell.placed(runtime, reason, [sc for sc, _ in batch])
        done = _run_batch(runtime, reason, batch, opts, tell)
        for o in done:
            if isinstance(o.result, KpemuError):
                tell.failed(o)
        outcomes += done
    return outcomes


def _runnable(scenarios: list[tuple[Scenario, Path]], placed: list[tuple[Runtime, str]], tell: Listener,
              keep_labs: bool = False) -> list[tuple[Runtime, str, tuple[Scenario, Path]]]:
    """The scenarios their runtime can run (container members need the host's kernel and docker; a lab
    kept after its run, a runtime whose labs outlive the run): one that cannot is an environment problem
    (exit 3); in a batch it is skipped with the reason."""
    keep = []
    for (sc, out), (runtime, reason) in zip(scenarios, placed, strict=True):
        why = runtime.refuses(sc.topology)
        if why is None and keep_labs and not runtime.keeps_labs:
            why = (f"--keep: a {runtime.name} run's lab goes with its guest",
                   f"kpemu deploy {sc.spec.topology if isinstance(sc.spec.topology, str) else sc.path} "
                   "--serve keeps a lab there, or run it on this kernel")
        if why is None:
            keep.append((runtime, reason, (sc, out)))
        elif len(scenarios) == 1:
            raise EnvironmentProblem(f"{sc.name}: {why[0]}", why[1])
        else:
            tell.skipped(sc, *why)
    return keep


def _work_root(batch: list[tuple[Scenario, Path]], opts: Options) -> Path:
    """Where a runtime keeps its own folder for a batch (the runtime names it): `opts.work_root`, else the
    one scenario's output folder, else the runs folder."""
    return opts.work_root or (batch[0][1] if len(batch) == 1 else opts.runs_dir)


def _run_batch(runtime: Runtime, reason: str, batch: list[tuple[Scenario, Path]], opts: Options,
               tell: Listener) -> list[Outcome]:
    """Plan, job, collect, analyse and report one batch, holding every output folder throughout."""
    try:
        with tell.progress() as step, contextlib.ExitStack() as held:
            for _, out in batch:
                held.enter_context(out_dir_lock(out))
            kernel = release_tuple(runtime.kernel_release())
            resolved = [replace(sc, topology=runtime.resolve(sc.topology)) for sc, _ in batch]
            real = [_real_kube_proxy(sc, runtime, step) for sc in resolved]
            resolved = [replace(sc, topology=r[1]) if r else sc for sc, r in zip(resolved, real, strict=True)]
            plans = [lab_plan(sc.topology, kernel, sc.spec.faults) for sc in resolved]
            jobs = [Work(sc.name, collect_job(sc, plan, opts.trace, opts.keep, r[0] if r else None), out)
                    for sc, plan, r, (_, out) in zip(resolved, plans, real, batch, strict=True)]
            gathered = runtime.collect(jobs, _work_root(batch, opts), step, tell.notice)
            return [_outcome(runtime, reason, sc, plan, w, got, opts, step)
                    for sc, plan, w, got in zip(resolved, plans, jobs, gathered, strict=True)]
    except KpemuError as e:
        if not opts.keep_going:
            raise
        return [Outcome(sc, out, runtime, reason, e) for sc, out in batch]


def _real_kube_proxy(sc: Scenario, runtime: Runtime, say: Progress) -> tuple[RealKubeProxy, Topology] | None:
    """For a topology whose kubeProxy.implementation is upstream: the real kube-proxy's part of its job, and
    the topology as that kube-proxy sees it (with the API server's own Service), which the model predicts."""
    topo = sc.topology
    if topo.kubeProxy.implementation != "upstream":
        return None
    if runtime.name != "host":
        raise EnvironmentProblem(f"{sc.name}: the real kube-proxy runs on this machine's kernel (iptables and nftables "
                                 f"modes); in kpemu's guest ({topo.kubeProxy.mode} mode here) it does not run yet",
                                 "run it in iptables or nftables mode (--proxy-mode), or with kpemu's model (no "
                                 "--kube-proxy)")
    from pydantic import ValidationError

    from kpemu.controlplane.flags import service_range
    from kpemu.model.topology import KubeProxy
    from kpemu.realproxy import binary
    from kpemu.realproxy.config import as_probed, with_apiserver_service
    from kpemu.realproxy.spec import real_kube_proxy
    from kpemu.upstream.build import control_plane_binaries

    found = binary.resolve(topo, say)
    minor = binary.minor_of(found.version)
    if minor is not None and minor != topo.kubeProxy.minor:  # a binary of another minor: the model predicts it
        try:
            topo = topo.model_copy(update={"kubeProxy": KubeProxy.model_validate(
                {**topo.kubeProxy.model_dump(), "version": f"1.{minor}"})})
        except ValidationError:
            say(f"{sc.name}: kube-proxy {found.version} is of a release kpemu does not model in {topo.kubeProxy.mode} "
                f"mode; the model predicts 1.{topo.kubeProxy.minor}")
    topo = as_probed(topo)
    cidr = service_range(topo)
    try:
        seen = with_apiserver_service(topo, cidr)
    except ValueError as e:
        raise InputError(f"{sc.name}: {e}; give the topology a serviceCIDR whose first address no Service "
                         "holds") from None
    return real_kube_proxy(topo, found, control_plane_binaries(say), cidr), seen


def _outcome(runtime: Runtime, reason: str, sc: Scenario, plan: LabPlan, w: Work, got: Gathered | KpemuError,
             opts: Options, progress: Progress) -> Outcome:
    """The analysed run of what the runtime gathered (a failed analysis stops the run unless the runtime
    batches or `opts.keep_going`)."""
    if isinstance(got, KpemuError):
        return Outcome(sc, w.out, runtime, reason, got)
    try:
        result = _analysed(sc, plan, w.out, got, runtime.name, f"{reason}; {got.how}" if got.how else reason,
                           opts.update_goldens, progress)
    except KpemuError as e:
        if not (runtime.batched or opts.keep_going):
            raise
        return Outcome(sc, w.out, runtime, reason, e)
    return Outcome(sc, w.out, runtime, reason, result)


def _analysed(sc: Scenario, plan: LabPlan, out: Path, got: Gathered, runtime: str, reason: str,
              update_goldens: bool, progress: Progress) -> RunResult:
    """The pure half of a run from the files the runtime left in `out` (with the plan its job was made
    from): the read-back check, the analysis, and the reports."""
    started = time.perf_counter()
    path = out / COLLECTED
    if not path.is_file():
        raise EnvironmentProblem(f"{sc.name}: the run left no {path} (the collection did not finish)", got.logs)
    col = Collected.from_json(json.loads(path.read_text()))
    if col.upstream is None:
        check_saved_rules(col.readback, out / "rules")
        kube_proxy = None
    else:
        kube_proxy = {**col.upstream, "modelVsReal": model_vs_real(col.readback, out / "rules", out)}
    progress(f"analysing {sc.name}: ledger, pcapng, attribution, oracle, reports")
    a = analyse(sc, plan, col, out, update_goldens)
    seconds = col.seconds + time.perf_counter() - started
    hops = write_reports(out, sc, a, runtime, reason, col.kernel, seconds, col.trace, kube_proxy)
    return RunResult(sc.name, out, runtime, reason, seconds, a.ledgers, a.checks, hops, a.written, a.explanations)


def model_vs_real(expected: Sequence[Readback], rules_dir: Path, out: Path) -> list[dict[str, Any]]:
    """Where the real kube-proxy's rules (rules/) differ from the model's for the same objects, also written
    to model-vs-real.txt (empty when they agree)."""
    from kpemu.kernel.snapshot import RULE_KINDS
    from kpemu.realproxy.compare import differences

    def read(node: str, kind: str) -> str:
        path = rules_dir / f"{node}.{RULE_KINDS[kind]}"
        return path.read_text() if path.exists() else ""

    found = differences(expected, read)
    (out / "model-vs-real.txt").write_text("".join(f"# {d.node}: {d.what}\n" + "\n".join(d.diff) + "\n\n"
                                                   for d in found))
    return [d.to_json() for d in found]


# ---------------------------------------------------------------- --compare-modes


@dataclass
class Comparison:
    """`run` over one scenario's mode variants: the outcomes, and each mode's hops.json (None: none)."""

    name: str
    baseline: str  # the mode every other is compared with (iptables)
    base: Path
    outcomes: list[Outcome]
    ledgers: dict[str, dict[str, Any] | None]
    notes: dict[str, str] = field(default_factory=dict)  # mode -> why it has no ledger, or what to know
    fixed: set[int] = field(default_factory=set)  # the ports every mode shares (kpemu.analyse.expect.fixed_ports)
    exit_code: int = 0


def mode_variants(file: str, notes: dict[str, str]) -> dict[str, Scenario]:
    """The scenario in every mode its kube-proxy release has (a mode it lacks gets a note); the first
    mode (iptables), the one every other is compared with, must load."""
    out = {}
    for m in MODE_FACTS:
        try:
            out[m] = load_scenario(file, m)
        except InputError as e:
            if not out:
                raise
            notes[m] = f"not run: {e}"
    return out


def compare_modes(file: str, base: Path, opts: Options, tell: Listener) -> Comparison:
    """`kpemu run FILE --compare-modes`: `run` over the flows under iptables, IPVS and nftables, each mode
    where its kernel needs are met (this kernel, or the guest: one boot for every mode that needs it),
    into <base>/<mode>/; then every mode's hops.json, for the comparison with iptables mode's."""
    notes: dict[str, str] = {}
    variants = mode_variants(file, notes)
    modes, every = tuple(variants), tuple(MODE_FACTS)
    for m in every:
        (base / m / "hops.json").unlink(missing_ok=True)
    outcomes = run([(sc, base / m) for m, sc in variants.items()],
                   replace(opts, update_goldens=False, work_root=base, keep_going=True), tell)
    rcs: dict[str, int] = {}
    for o in outcomes:
        m = o.scenario.topology.kubeProxy.mode
        if isinstance(o.result, KpemuError):
            rcs[m] = o.result.exit_code
            notes[m] = o.runtime.could_not_run(f"{m} mode", o.reason, o.result)
        else:
            rcs[m] = o.result.exit_code
    ledgers: dict[str, dict[str, Any] | None] = {}
    for m in every:
        path = base / m / "hops.json"
        ledgers[m] = json.loads(path.read_text()) if path.is_file() else None
        if ledgers[m] is None and m not in notes:
            notes[m] = f"{m} mode left no {path} (exit {rcs.get(m)})"
    ran = [m for m in modes if ledgers[m] is not None]
    baseline = modes[0]
    return Comparison(variants[baseline].name, baseline, base, outcomes, ledgers, notes,
                      fixed_ports(variants[baseline].topology),
                      max([*rcs.values(), 3 if len(ran) < len(modes) else 0]))
