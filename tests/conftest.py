"""Session hooks of the whole suite; what the tests share (paths, the kpemu runner, needs_root) is tests/helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every test cleans up after itself: no lab namespace may survive the session."""
    if os.geteuid() != 0 or os.environ.get("KPEMU_IN_GUEST"):
        return
    leftovers = sorted(n for n in os.listdir("/run/netns") if n.startswith("kp-")) if Path("/run/netns").exists() \
        else []
    if leftovers:
        print(f"\nkpemu: lab namespaces left behind by the tests: {' '.join(leftovers)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
