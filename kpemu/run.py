"""`kpemu run` on this kernel: deploy, serve, capture, send, collect, destroy, then explain and check.

The lab is destroyed on every path out of `run_scenario`, including Ctrl-C and SIGTERM (turned
into KeyboardInterrupt while a run is in progress). Everything after destroy is pure analysis of
the files the run left in the output directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kpemu.analyse.pipeline import RunResult, analyse
from kpemu.errors import EnvironmentProblem, KpemuError
from kpemu.jobs.collected import collected_from_json
from kpemu.jobs.execute import COLLECTED
from kpemu.jobs.verify import check_saved_rules
from kpemu.model.scenario import Scenario
from kpemu.outlock import holding_out_dir, out_dir_lock
from kpemu.plan.types import Plan
from kpemu.report.write import write_reports
from kpemu.runtimes.base import Gathered, Runtime, Work
from kpemu.runtimes.guest import GuestRuntime
from kpemu.runtimes.host import HostRuntime

Progress = Callable[[str], None]  # told what a run is doing now (the CLI shows it)


def _quiet(msg: str) -> None:
    pass


def resolved(sc: Scenario, runtime: Runtime) -> Scenario:
    """The scenario with what depends on the machine decided for `runtime` (kpemu.runtimes.base.Runtime.resolve)."""
    return replace(sc, topology=runtime.resolve(sc.topology))


def run_plan(sc: Scenario, kernel: str | None = None) -> Plan:
    """The (resolved) scenario's plan with kube-proxy's state of every node, generated once for the
    kernel release `kernel` (default: this one); the job and the analysis of the run both use it."""
    from kpemu.jobs.build import lab_plan, release_tuple

    return lab_plan(sc.topology, release_tuple(kernel or os.uname().release))


def scenario_job(sc: Scenario, trace: bool = True, kernel: str | None = None, plan: Plan | None = None,
                 ) -> dict[str, Any]:
    """The collect job of a (resolved) scenario, for the kernel release `kernel` (default: this one), from
    its `run_plan` (made here when not given)."""
    from kpemu.jobs.build import collect_job, release_tuple

    plan = plan or run_plan(sc, kernel)
    return collect_job(sc, plan, release_tuple(kernel or os.uname().release), trace)


@holding_out_dir
def collect_scenario(sc: Scenario, out: Path, trace: bool = True, progress: Progress = _quiet,
                     plan: Plan | None = None, runtime: HostRuntime | None = None) -> Gathered:
    """The kernel half of a run on this kernel (kpemu.runtimes.host): deploy, serve, capture, send,
    snapshot, destroy (always). Writes pcaps/, capture/, rules/, trace/ and collected.json into `out`."""
    got = (runtime or HostRuntime()).collect([Work(sc.name, scenario_job(sc, trace, plan=plan), out)], out / "guest",
                                            progress)[0]
    if isinstance(got, KpemuError):
        raise got
    return got


def analyse_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: str = "host",
                     reason: str = "", progress: Progress = _quiet, plan: Plan | None = None,
                     got: Gathered | None = None) -> RunResult:
    """The pure half of a run, from the files `collect_scenario` left in `out`: ledger, attribution,
    oracle, checks; writes hops.json, report.md and report.html. `plan`: the run's (`run_plan`), made
    here for the kernel that collected the files when not given."""
    started = time.perf_counter()
    path = out / COLLECTED
    if not path.is_file():
        raise EnvironmentProblem(f"{sc.name}: the run left no {path} (the collection did not finish)",
                                 got.logs if got else "")
    data = json.loads(path.read_text())
    if "readback" in data:
        check_saved_rules(data["readback"], out / "rules")
    progress(f"analysing {sc.name}: ledger, pcapng, attribution, oracle, reports")
    a = analyse(sc, plan or run_plan(sc, data["kernel"]), collected_from_json(data), out, update_goldens)
    seconds = data["seconds"] + time.perf_counter() - started
    hops = write_reports(out, sc, a, runtime, reason, data["kernel"], seconds, data["trace"])
    return RunResult(sc.name, out, runtime, reason, seconds, a.ledgers, a.checks, hops, a.written, a.explanations)


@holding_out_dir
def run_scenario(sc: Scenario, out: Path, update_goldens: bool = False, runtime: HostRuntime | None = None,
                 reason: str = "", trace: bool = True, progress: Progress = _quiet) -> RunResult:
    """Run one (resolved) scenario on this kernel; write report.md/.html, hops.json, pcaps/, capture/,
    rules/, trace/."""
    plan = run_plan(sc)
    got = collect_scenario(sc, out, trace, progress, plan, runtime)
    return analyse_scenario(sc, out, update_goldens, "host", reason, progress, plan, got)


def out_dir_for(out: str | None, name: str, several: bool) -> Path:
    """Where one scenario's files go: --out itself for one scenario, --out/<name> for several."""
    if out is None:
        return Path("runs") / name
    return Path(out) / name if several else Path(out)


def run_in_guest(scenarios: list[tuple[Scenario, Path]], cold_root: Path, update_goldens: bool, reason: str,
                 trace: bool = True, progress: Progress = _quiet, notice: Progress = _quiet,
                 ) -> tuple[list[RunResult], list[tuple[str, KpemuError]]]:
    """The kernel half of each scenario in the guest (kpemu.runtimes.guest: the warm one if up, else one cold
    boot for all; a fresh one for what a hung guest left, told to `notice`), then the analysis here; results,
    and (name, error) for each scenario whose collection failed."""
    runtime = GuestRuntime()
    release = runtime.kernel_release()
    plans = [run_plan(sc, release) for sc, _ in scenarios]
    jobs = [Work(sc.name, scenario_job(sc, trace, release, plan), out)
            for (sc, out), plan in zip(scenarios, plans, strict=True)]
    with contextlib.ExitStack() as held:  # each output folder is this run's from here on
        for _, out in scenarios:
            held.enter_context(out_dir_lock(out))
        gathered = runtime.collect(jobs, cold_root, progress, notice)
        results, failed = [], []
        for (sc, out), plan, got in zip(scenarios, plans, gathered, strict=True):
            if isinstance(got, KpemuError):
                failed.append((sc.name, got))
                continue
            try:
                results.append(analyse_scenario(sc, out, update_goldens, "vm", f"{reason}; {got.how}", progress,
                                                plan, got))
            except KpemuError as e:
                failed.append((sc.name, e))
        return results, failed
