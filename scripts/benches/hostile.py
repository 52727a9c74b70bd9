"""Hostile input: how long `kpemu validate` takes to refuse each case of the unit test table
(in-process, the interpreter's start excluded), and the slowest case; the issue asks under a second."""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

from kpemu.cli import main
from tests.unit.test_hostile_input import CASES


def bench_hostile_input() -> list[dict[str, object]]:
    times: dict[str, float] = {}
    for case in CASES:
        with tempfile.TemporaryDirectory() as d:
            path = case.make(Path(d))
            with contextlib.redirect_stderr(io.StringIO()):
                t0 = time.perf_counter()
                rc = main(["validate", str(path)])
                times[case.name] = time.perf_counter() - t0
            assert rc == 2, f"{case.name}: exit {rc}"
    slowest = max(times, key=times.__getitem__)
    return [{"name": "hostile.cases", "value": len(times), "unit": "cases"},
            {"name": "hostile.slowest_refusal", "value": times[slowest], "unit": "s", "case": slowest},
            {"name": "hostile.total_refusals", "value": sum(times.values()), "unit": "s"}]


BENCHES = [bench_hostile_input]
