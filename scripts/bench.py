#!/usr/bin/env python3
"""`make bench`: run every benchmark in scripts/benches/, print a table, write runs/bench.json.

Each module in scripts/benches/ defines BENCHES, a list of functions taking no argument and
returning a list of records {"name", "value", "unit"}. Records from a run replace records of the
same name in runs/bench.json, so benches can also be run one module at a time:
    .venv/bin/python scripts/bench.py fabric
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "runs" / "bench.json"
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem for p in (ROOT / "scripts" / "benches").glob("*.py") if p.stem != "__init__")
    records: list[dict[str, object]] = []
    console = Console()
    for name in names:
        module = importlib.import_module(f"scripts.benches.{name}")
        for bench in module.BENCHES:
            started = time.perf_counter()
            with console.status(f"bench {name}.{bench.__name__} ..."):
                got = bench()
            console.log(f"{name}.{bench.__name__}: {time.perf_counter() - started:.1f}s")
            records += got
    previous = json.loads(OUT.read_text()) if OUT.exists() else []
    fresh = {r["name"] for r in records}
    merged = [r for r in previous if r["name"] not in fresh] + records
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(merged, indent=2) + "\n")
    table = Table("benchmark", "value", "unit", title=f"kpemu bench ({OUT.relative_to(ROOT)})")
    for r in records:
        v = r["value"]
        table.add_row(str(r["name"]), f"{v:.4g}" if isinstance(v, float) else str(v), str(r["unit"]))
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
