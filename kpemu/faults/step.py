"""A fault ready to apply, as plain data (pure): what it changes in one lab namespace, and its story.
kpemu.kernel.faults applies it (from its JSON) without knowing which fault it is."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FaultStep:
    """One fault, ready to apply: commands run in `netns`, rules deleted there, and its story."""

    kind: str
    member: str
    netns: str
    commands: tuple[tuple[str, ...], ...] = ()  # argv run inside the namespace, in order
    delete_rules: tuple[str, tuple[str, ...], str] | None = None  # (table, chains, -j target): rules removed
    change: str = ""  # what was changed, in words
    symptom: str = ""  # what it breaks, and how the report shows it
    after: str | None = None  # the flow after which it is applied (None: before the first flow)
    elsewhere: tuple[tuple[str, tuple[str, ...], str | None], ...] = ()  # (netns, argv, stdin) run afterwards
    rules_changed: tuple[str, ...] = ()  # nodes whose kube-proxy rules it re-synced
    # (netns, plan of kpemu.proxy.ctplan.cleanup): kube-proxy's UDP conntrack cleanup, after `elsewhere`
    conntrack: tuple[tuple[str, dict], ...] = ()
    # (sysctl path, value) of a kernel-wide setting: set only in a disposable guest, restored after the run
    kernel_wide: tuple[str, str] | None = None

    def to_json(self) -> dict:
        return asdict(self)


def sysctl(key: str, value: str) -> tuple[str, ...]:
    """The argv that sets one sysctl of the namespace it runs in."""
    return ("sysctl", "-q", "-w", f"{key}={value}")
