"""What a run's kernel half collected, as the analysis reads it: `collected.json` (written by
kpemu.jobs.execute.collect) decoded into one record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kpemu.analyse.explain import TraceData
from kpemu.kernel import counters
from kpemu.plan.types import Interface
from kpemu.traffic.result import FlowResult


@dataclass
class Collected:
    """Raw material gathered while the lab was up."""

    results: dict[str, FlowResult] = field(default_factory=dict)
    conntrack: dict[str, str] = field(default_factory=dict)  # member -> conntrack -L text
    ipvs: dict[str, str] = field(default_factory=dict)  # node -> ipvsadm -Lnc text
    points: list[Interface] = field(default_factory=list)
    traces: dict[str, TraceData] = field(default_factory=dict)  # flow -> trace texts and counter snapshots
    faults: list[dict] = field(default_factory=list)  # the faults applied (plan step + commands run)


def collected_from_json(data: dict[str, Any]) -> Collected:
    """The record of a `collected.json` document (the executor's `collect` writes it)."""

    def snap(d: dict[str, Any] | None) -> counters.CounterSnapshot | None:
        return counters.CounterSnapshot(**d) if d else None

    return Collected(
        results={k: FlowResult(**v) for k, v in data["results"].items()},
        conntrack=data["conntrack"],
        ipvs=data["ipvs"],
        faults=data.get("faults", []),
        points=[Interface(**i) for i in data["points"]],
        traces={k: TraceData(texts=t["texts"], unavailable=t["unavailable"], before=snap(t["before"]),
                             after=snap(t["after"]), drops=t.get("drops", ""),
                             drops_unavailable=t.get("drops_unavailable"), drop_members=t.get("drop_members", {}))
                for k, t in data["traces"].items()},
    )
