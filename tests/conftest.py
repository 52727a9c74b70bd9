"""Shared test helpers: repository paths and the root/skip markers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"
SCENARIOS = ROOT / "scenarios"
KPEMU = ROOT / ".venv" / "bin" / "kpemu"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
