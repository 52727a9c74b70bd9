"""Save a run's hops.json as the report fixture of its scenario (tests/data/reports/<scenario>.json.gz),
each flow trimmed to its first three connections: `python scripts/report_fixture.py runs/<name>`.
tests/integration/test_report_html.py renders every shipped scenario's report from these."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(run: str) -> None:
    data = json.loads((Path(run) / "hops.json").read_text())
    for f in data["flows"]:
        f["connections"] = f["connections"][:3]
    out = ROOT / "tests" / "data" / "reports" / f"{data['scenario']}.json.gz"
    out.write_bytes(gzip.compress(json.dumps(data).encode(), mtime=0))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1])
