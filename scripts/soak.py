#!/usr/bin/env python3
"""`make soak NAME=<scenario> N=<runs>`: run one scenario N times, each as a user would.

Every run is `kpemu run scenarios/NAME.yaml` in a fresh process (a cold guest each time unless a warm
one is up, or natively where the kernel can). Prints passes/N, the median and worst time and every
failure's reason (the last lines the run printed), and exits 1 when any run failed. A run whose guest
hung and which passed in the fresh guest kpemu then boots counts as passed, and is counted apart (the
hangs are the emulator's reliability, not the lab's). Bounded: each run has a time limit, and the loop
stops at N.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_LIMIT = float(os.environ.get("KPEMU_SOAK_RUN_LIMIT", "600"))


def main(argv: list[str]) -> int:
    name, n = argv[0], int(argv[1]) if len(argv) > 1 else 10
    scenario = ROOT / "scenarios" / f"{name}.yaml"
    if not scenario.is_file():
        print(f"soak: no scenario {scenario}", file=sys.stderr)
        return 2
    kpemu = [sys.executable, "-m", "kpemu.cli", "run", str(scenario), "--out", str(ROOT / "runs" / f"soak-{name}")]
    times: list[float] = []
    failures: list[tuple[int, str]] = []
    hangs: list[int] = []
    for i in range(1, n + 1):
        t0 = time.monotonic()
        try:
            res = subprocess.run(kpemu, cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT, check=False)
            rc, tail = res.returncode, (res.stdout + res.stderr).strip().splitlines()[-6:]
            hung = "guest hung" in " ".join((res.stdout + res.stderr).split())
        except subprocess.TimeoutExpired:
            rc, tail, hung = -1, [f"did not finish within {RUN_LIMIT:.0f}s"], False
        took = time.monotonic() - t0
        times.append(took)
        hangs += [i] if hung else []
        verdict = ("PASS" if rc == 0 else f"FAIL (exit {rc})") + (" after its guest hung" if hung else "")
        print(f"soak {name} {i}/{n}: {verdict} in {took:.1f}s", flush=True)
        if rc != 0:
            failures.append((i, "\n    ".join(tail)))
    print(f"soak {name}: {n - len(failures)}/{n} passed; median {statistics.median(times):.1f}s, "
          f"worst {max(times):.1f}s; guest hung in {len(hangs)} run(s){': ' if hangs else ''}"
          f"{', '.join(map(str, hangs))}")
    for i, why in failures:
        print(f"  run {i}:\n    {why}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
