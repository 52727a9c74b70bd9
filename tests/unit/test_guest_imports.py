"""The guest half imports nothing heavy: each import costs seconds under software emulation."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "pyroute2", "rich", "scapy", "yaml", "argparse")


def test_agent_and_executor_import_only_light_modules() -> None:
    code = ("import sys; import kpemu.jobs.agent, kpemu.jobs.execute, kpemu.kernel.lab; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=__file__.rsplit("/tests/", 1)[0]).stdout.strip()
    assert out == "[]"
