"""`kpemu run`'s recipe (kpemu.pipeline) with a stand-in runtime: the batches, what is told on the way,
the reports each run writes, and which failures stop the run. No kernel involved."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from kpemu import pipeline, runtimes
from kpemu.errors import EnvironmentProblem, KpemuError
from kpemu.inputs.scenario import load_scenario
from kpemu.model.scenario import Scenario
from kpemu.model.topology import Topology
from kpemu.runtimes.base import Gathered, Progress, Work, quiet
from tests.helpers import ROOT

NOTHING = {"results": {}, "conntrack": {}, "ipvs": {}, "points": [], "traces": {}, "faults": [], "seconds": 1.0,
           "trace": False, "kernel": "6.1.0-test"}


@dataclass(frozen=True)
class Stand:
    """A runtime that collects nothing: each job's folder gets an empty collected.json (or, for a job of
    a scenario named in `fails`, no file at all)."""

    name: str = "stand"
    batched: bool = True
    fails: tuple[str, ...] = ()

    def refuses(self, topo: Topology) -> tuple[str, str] | None:
        return None

    def resolve(self, topo: Topology) -> Topology:
        return topo

    def kernel_release(self) -> str:
        return "6.1.0-test"

    def collect(self, jobs: Sequence[Work], work_root: Path, progress: Progress = quiet,
                notice: Progress = quiet) -> list[Gathered | KpemuError]:
        out: list[Gathered | KpemuError] = []
        for w in jobs:
            if w.name not in self.fails:
                (w.out / "collected.json").write_text(json.dumps(NOTHING))
            out.append(Gathered("stand-in", "see nowhere"))
        return out

    def could_not_run(self, what: str, reason: str, error: KpemuError) -> str:
        return f"{what}: {error}"


class Told:
    """A Listener that records what it is told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def placed(self, runtime: runtimes.Runtime, reason: str, scenarios: list[Scenario]) -> None:
        self.lines.append(f"placed {runtime.name} {[sc.name for sc in scenarios]} ({reason})")

    def skipped(self, sc: Scenario, why: str, fix: str) -> None:
        self.lines.append(f"skipped {sc.name}")

    @contextlib.contextmanager
    def progress(self) -> Iterator[Progress]:
        yield lambda msg: self.lines.append(f"progress {msg.split(':')[0]}")

    def notice(self, msg: str) -> None:
        self.lines.append(f"notice {msg}")

    def failed(self, outcome: pipeline.Outcome) -> None:
        self.lines.append(f"failed {outcome.scenario.name}")


def _scenarios(tmp_path: Path, *names: str) -> list[tuple[Scenario, Path]]:
    return [(load_scenario(ROOT / "scenarios" / f"{n}.yaml"), tmp_path / n) for n in names]


def test_a_batch_runs_together_and_each_run_writes_its_reports(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "choose", lambda req, labs: [(Stand(), "as a test")] * len(labs))
    told = Told()
    outcomes = pipeline.run(_scenarios(tmp_path, "nodeport-iptables", "clusterip-iptables"), pipeline.Options(), told)
    names = ["nodeport-iptables", "clusterip-iptables"]
    assert told.lines == [f"placed stand {names} (as a test)", "progress analysing nodeport-iptables",
                          "progress analysing clusterip-iptables"]
    assert [o.scenario.name for o in outcomes] == names
    for o in outcomes:
        assert not isinstance(o.result, KpemuError)
        assert o.result.reason == "as a test; stand-in" and o.result.runtime == "stand"
        hops = json.loads((o.out / "hops.json").read_text())
        assert (hops["scenario"], hops["runtime"], hops["kernel"], hops["trace"]) == (o.scenario.name, "stand",
                                                                                      "6.1.0-test", False)
        assert {"run.pcapng", "hops.json", "report.md", "report.html"} <= {p.name for p in o.out.iterdir()}


def test_a_failure_is_its_scenario_s_in_a_batch_and_stops_a_run_one_by_one(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    batched = Stand(fails=("nodeport-iptables",))
    monkeypatch.setattr(runtimes, "choose", lambda req, labs: [(batched, "as a test")] * len(labs))
    told = Told()
    outcomes = pipeline.run(_scenarios(tmp_path, "nodeport-iptables", "clusterip-iptables"), pipeline.Options(), told)
    first, second = (o.result for o in outcomes)
    assert isinstance(first, EnvironmentProblem) and first.fix == "see nowhere"
    assert not isinstance(second, KpemuError) and "failed nodeport-iptables" in told.lines
    one_by_one = Stand(batched=False, fails=("nodeport-iptables",))
    monkeypatch.setattr(runtimes, "choose", lambda req, labs: [(one_by_one, "as a test")] * len(labs))
    with pytest.raises(EnvironmentProblem, match="the run left no"):
        pipeline.run(_scenarios(tmp_path, "nodeport-iptables"), pipeline.Options(), Told())
    kept = pipeline.run(_scenarios(tmp_path, "nodeport-iptables"), pipeline.Options(keep_going=True), Told())
    assert isinstance(kept[0].result, EnvironmentProblem)


def test_batches_put_a_batched_runtime_s_items_together_first() -> None:
    guest, host = Stand(name="g"), Stand(name="h", batched=False)
    placed = [(host, "a", 1), (guest, "b", 2), (host, "c", 3), (guest, "d", 4)]
    assert runtimes.batches(placed) == [(guest, "b", [2, 4]), (host, "a", [1]), (host, "c", [3])]
