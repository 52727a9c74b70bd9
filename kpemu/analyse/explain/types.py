"""What explaining a flow takes and gives, whichever way its packets were traced (pure): the kernel
side's collection for one flow (`TraceData`) and what was learnt from it (`FlowExplanation`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kpemu.analyse.verdict import Verdict


@dataclass
class FlowExplanation:
    """Everything explain_flow learnt about one flow; `to_json` is merged into hops.json's flow."""

    traced: bool
    reason: str | None = None
    chains: dict[str, list[str]] = field(default_factory=dict)  # node -> nat chain path of the first packet
    hooks: dict[str, dict] = field(default_factory=dict)  # node -> {"walk", "text"}
    hook_claim: dict | None = None
    oracle_checked: int = 0
    oracle_skipped: int = 0  # first packets on a node whose trace lost events
    lossy: list[str] = field(default_factory=list)  # nodes where xtables-monitor's socket overflowed
    unchecked: list[str] = field(default_factory=list)  # why other first packets were not checked
    oracle_nodes: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    counters: dict[str, list[dict]] = field(default_factory=dict)
    ipvs_decisions: dict[str, list[dict]] = field(default_factory=dict)
    details: dict[int, dict[str, list[str]]] = field(default_factory=dict)  # hop index -> rules / capture
    verdicts: dict[int, Verdict] = field(default_factory=dict)  # connection index -> why it died
    drops: dict = field(default_factory=dict)  # kernel drop tracing: available, reason, events

    @property
    def oracle_ok(self) -> bool:
        return not self.disagreements

    def oracle_text(self) -> str:
        """One line: agreement, the disagreements, or why nothing was checked."""
        lost = (f" ({self.oracle_skipped} first packet(s) not checked: the trace on {', '.join(self.lossy)} "
                "lost events)") if self.lossy else ""
        lost += "".join(f" (not checked: {u})" for u in self.unchecked)
        if self.disagreements:
            return "; ".join(self.disagreements) + lost
        if not self.oracle_checked:
            if self.unchecked and not self.lossy:
                return "not checked: " + "; ".join(self.unchecked)
            return "not checked: " + (self.reason or "no traced first packet") + lost
        return (f"model and kernel agree: {self.oracle_checked} first packet(s) on "
                f"{', '.join(self.oracle_nodes)} took a path the model predicts{lost}")

    def to_json(self) -> dict:
        return {
            "trace": {"available": self.traced, "reason": self.reason},
            "chains": self.chains, "hooks": self.hooks, "hook_claim": self.hook_claim,
            "oracle": {"agree": None if not self.oracle_checked and not self.disagreements else self.oracle_ok,
                       "checked": self.oracle_checked, "skipped": self.oracle_skipped, "lossy": self.lossy,
                       "nodes": self.oracle_nodes,
                       "disagreements": self.disagreements, "text": self.oracle_text()},
            "counters": self.counters, "ipvs_decisions": self.ipvs_decisions,
            "drops": self.drops,
        }
