"""What CI reads from a run of scenarios (pure): the last line's tally, a JUnit XML file (`kpemu run
--junit FILE`, one testcase per check) and GitHub Actions error annotations for what failed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario as CI sees it: its checks, or the error that stopped it, and its exit code."""

    name: str
    file: str
    exit_code: int
    seconds: float = 0.0
    checks: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def tally(results: Sequence[ScenarioResult], skipped: Sequence[str], exit_code: int) -> str:
    """The run's last line: PASS only when the exit code is 0, with N/M scenarios passed."""
    passed = sum(1 for r in results if r.exit_code == 0 and r.error is None)
    line = f"{'PASS' if exit_code == 0 else 'FAIL'}: {passed}/{len(results)} scenarios passed"
    failed = [r.name for r in results if r.exit_code != 0 or r.error is not None]
    if failed:
        line += f" (failed: {', '.join(failed)})"
    if skipped:
        line += f", {len(skipped)} skipped ({', '.join(skipped)})"
    return line + f", exit code {exit_code}"


def _failure_text(c: dict[str, Any]) -> str:
    return c.get("diff") or f"expected: {c.get('expected')}\nseen:     {c.get('seen')}"


def junit_xml(results: Sequence[ScenarioResult]) -> str:
    """JUnit XML: a testsuite per scenario, a testcase per check (an error testcase when it did not run)."""
    root = ET.Element("testsuites", name="kpemu")
    for r in results:
        fails = sum(1 for c in r.checks if not c.get("ok"))
        suite = ET.SubElement(root, "testsuite", name=r.name, file=r.file, tests=str(max(len(r.checks), 1)),
                              failures=str(fails), errors="1" if r.error else "0", time=f"{r.seconds:.3f}")
        if r.error is not None:
            case = ET.SubElement(suite, "testcase", classname=r.name, name="run", file=r.file)
            ET.SubElement(case, "error", message=r.error.splitlines()[0] if r.error else "error").text = r.error
            continue
        for c in r.checks:
            case = ET.SubElement(suite, "testcase", classname=r.name, name=f"{c.get('flow')}: {c.get('what')}",
                                 file=r.file)
            if not c.get("ok"):
                ET.SubElement(case, "failure", message=f"expected {c.get('expected')}, seen {c.get('seen')}"
                              ).text = _failure_text(c)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github_annotations(results: Sequence[ScenarioResult]) -> list[str]:
    """`::error file=…,title=…::message` workflow commands, one per failed check or stopped scenario."""
    out = []
    for r in results:
        if r.error is not None:
            out.append(f"::error file={_escape_property(r.file)},title={_escape_property(f'kpemu {r.name}')}::"
                       f"{_escape_data(r.error)}")
        for c in r.checks:
            if not c.get("ok"):
                title = f"kpemu {r.name} / {c.get('flow')}: {c.get('what')}"
                out.append(f"::error file={_escape_property(r.file)},title={_escape_property(title)}::"
                           f"{_escape_data(_failure_text(c))}")
    return out
