"""Past runs, from the hops.json each run directory holds (reads files, touches nothing else)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from kpemu.errors import InputError


def list_runs(base: Path) -> list[dict[str, Any]]:
    """Every run under `base` (runs/NAME/hops.json, and runs/NAME/MODE/hops.json of --compare-modes), newest first."""
    out = []
    for hops in sorted(base.glob("**/hops.json")):
        try:
            data = json.loads(hops.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "flows" not in data:
            continue
        run = hops.parent
        mtime = hops.stat().st_mtime
        out.append({"name": str(run.relative_to(base)), "scenario": data.get("scenario"),
                    "date": dt.datetime.fromtimestamp(mtime, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
                    "result": "PASS" if data.get("ok") else "FAIL", "seconds": data.get("seconds"),
                    "runtime": data.get("runtime"), "mode": data.get("mode"), "path": str(run), "_mtime": mtime})
    out.sort(key=lambda r: -r.pop("_mtime"))
    return out


def find_run(base: Path, name: str) -> Path:
    """The run directory NAME names: its path under `base`, a unique last component, or a directory given as is."""
    runs = list_runs(base)
    exact = [r for r in runs if r["name"] == name]
    tail = [r for r in runs if Path(r["name"]).name == name or r["scenario"] == name]
    hits = exact or tail
    if len(hits) == 1:
        return Path(hits[0]["path"])
    if not hits and (Path(name) / "hops.json").is_file():
        return Path(name)
    if hits:
        raise InputError(f"kpemu runs open: {name!r} names {len(hits)} runs: "
                         f"{', '.join(r['name'] for r in hits)}; give one of these")
    known = ", ".join(r["name"] for r in runs) or "none"
    raise InputError(f"kpemu runs open: no run {name!r} under {base} (runs there: {known}; see kpemu runs)")
