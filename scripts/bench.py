#!/usr/bin/env python3
"""`make bench`: run every benchmark in scripts/benches/, print a table, write runs/bench.json.

Each module in scripts/benches/ defines BENCHES, a list of functions taking no argument and
returning a list of records {"name", "value", "unit"}. Records from a run replace records of the
same name in runs/bench.json, so benches can also be run one module at a time:
    .venv/bin/python scripts/bench.py fabric
A bench that fails (or a module that does not import) is recorded as FAILED with its error, and the
others still run: `make bench` always runs to the end, exits 0, and lists the failures last.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "runs" / "bench.json"
sys.path.insert(0, str(ROOT))


Record = dict[str, object]


def _failed(name: str, error: BaseException) -> Record:
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
    return {"name": name, "value": "FAILED", "unit": f"{type(error).__name__}: {error}"[:300] + at}


def _run(name: str, bench: Callable[[], list[Record]], console: Console) -> list[Record]:
    """One bench's records, or one FAILED record with its error: nothing a bench does stops the others."""
    started = time.perf_counter()
    try:
        with console.status(f"bench {name}.{bench.__name__} ..."):
            got = bench()
    except (Exception, SystemExit) as e:  # every failure is recorded; Ctrl-C still stops make bench
        got = [_failed(f"{name}.{bench.__name__}", e)]
    console.log(f"{name}.{bench.__name__}: {time.perf_counter() - started:.1f}s")
    return got


def main(argv: list[str]) -> int:
    """Run the named bench modules (all by default), print the table, merge into runs/bench.json; 0."""
    names = argv or sorted(p.stem for p in (ROOT / "scripts" / "benches").glob("*.py") if p.stem != "__init__")
    records: list[Record] = []
    console = Console()
    for name in names:
        try:
            module = importlib.import_module(f"scripts.benches.{name}")
        except Exception as e:  # a module that does not import is a failed bench
            records.append(_failed(name, e))
            continue
        for bench in module.BENCHES:
            records += _run(name, bench, console)
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
    failed = [r for r in records if r["value"] == "FAILED"]
    for r in failed:
        console.print(f"[red]FAILED[/red] {r['name']}: {r['unit']}")
    console.print(f"{len(records) - len(failed)} records, {len(failed)} failed benches")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
