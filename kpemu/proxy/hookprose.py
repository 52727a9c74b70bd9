"""Shared words for a mode's hook explanation (kpemu.analyse.hooks asks each mode's `explain_hooks` why a
traced packet's hooks match the claim or not). Pure."""

from __future__ import annotations

from collections.abc import Callable

# (access, hooks observed, whether the claim held) -> why, in the words of one kube-proxy mode
Explainer = Callable[[str, list[str], bool], str]


def tail_after_claim(hooks: list[str], masq: str = "KUBE-POSTROUTING") -> str:
    tail = hooks[2:]
    return (f" The claim stops there, but the packet then crosses {' -> '.join(tail)}, where {masq} "
            "decides on masquerading." if tail else "")


def locally_generated(hooks: list[str]) -> str | None:
    if hooks[:1] != ["PREROUTING"]:
        return "The packet was generated on the node itself, so it starts in OUTPUT, not PREROUTING."
    return None
