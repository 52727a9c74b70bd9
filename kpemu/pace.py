"""Timeouts that stretch with the machine: KPEMU_SLOWDOWN (set to 10 in a software-emulated guest)."""

from __future__ import annotations

import os


def scaled(seconds: float) -> float:
    """`seconds` times KPEMU_SLOWDOWN (default 1): for waits on processes becoming ready, not on traffic."""
    try:
        factor = float(os.environ.get("KPEMU_SLOWDOWN", "1"))
    except ValueError:
        factor = 1.0
    return seconds * max(factor, 1.0)
