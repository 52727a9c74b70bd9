"""A fault ready to apply, as plain data (pure): what it changes in one lab namespace, and its story;
and the same step once applied, with what was done. The fault registry (kpemu.faults) plans it, the
job carries it across to the executor (kpemu.jobs.schema), kpemu.kernel.faults applies it without
knowing which fault it is, and what was collected carries it back as an `AppliedFault`. Standard
library only: the executor imports it in the guest."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class FaultStep:
    """One fault, ready to apply: commands run in `netns`, rules deleted there, and its story."""

    kind: str
    member: str
    netns: str
    commands: tuple[tuple[str, ...], ...] = ()  # argv run inside the namespace, in order
    delete_rules: tuple[str, tuple[str, ...], str] | None = None  # (table, chains, -j target): rules removed
    # (family, table, chain, statement): the nft rules of that chain whose statements include it, removed
    delete_nft: tuple[str, str, str, str] | None = None
    change: str = ""  # what was changed, in words
    symptom: str = ""  # what it breaks, and how the report shows it
    after: str | None = None  # the flow after which it is applied (None: before the first flow)
    elsewhere: tuple[tuple[str, tuple[str, ...], str | None], ...] = ()  # (netns, argv, stdin) run afterwards
    rules_changed: tuple[str, ...] = ()  # nodes whose kube-proxy rules it re-synced
    # (netns, plan of kpemu.proxy.ctplan.cleanup): kube-proxy's UDP conntrack cleanup, after `elsewhere`
    conntrack: tuple[tuple[str, dict], ...] = ()
    # (sysctl path, value) of a kernel-wide setting: set only in a disposable guest, restored after the run
    kernel_wide: tuple[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The step as JSON (tuples as lists), as the job and collected.json carry it."""
        return _lists(asdict(self))


@dataclass(frozen=True)
class AppliedFault(FaultStep):
    """A fault step as it was applied: the step, and `done`, what was run, command by command (the run's
    record; the report's "faults applied" section and hops.json's `faults`)."""

    done: tuple[str, ...] = ()


def _lists(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def sysctl(key: str, value: str) -> tuple[str, ...]:
    """The argv that sets one sysctl of the namespace it runs in."""
    return ("sysctl", "-q", "-w", f"{key}={value}")
