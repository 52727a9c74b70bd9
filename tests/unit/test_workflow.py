"""The CI workflow cannot run here: validate it against GitHub's schema and check its make targets."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "scenarios.yml"


def test_workflow_is_valid_against_github_schema() -> None:
    r = subprocess.run([str(ROOT / ".venv/bin/check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                        str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.M))


def _run_lines() -> list[str]:
    wf = yaml.safe_load(WORKFLOW.read_text())
    return [step["run"] for job in wf["jobs"].values() for step in job["steps"] if "run" in step]


def test_every_make_target_exists() -> None:
    targets = _make_targets()
    make_cmd = re.compile(r"(?:^|&&|;|\bsudo)\s*make\s+(?:-\S+\s+)*([A-Za-z0-9_.-]+)", flags=re.M)
    used = {t for run in _run_lines() for t in make_cmd.findall(run)}
    assert {"setup", "scenarios"} <= used, used
    assert used <= targets, f"workflow runs make targets the Makefile lacks: {sorted(used - targets)}"


def test_jobs_native_and_guest_with_artifacts() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    jobs = wf["jobs"]
    assert len(jobs) >= 2
    text = WORKFLOW.read_text()
    assert "modprobe" in text and all(m in text for m in ("ip_vs", "ipip", "dummy", "vxlan", "br_netfilter"))
    assert "KPEMU_RUNTIME: vm" in text or "--runtime vm" in text
    assert any("matrix" in (j.get("strategy") or {}) for j in jobs.values())
    uploads = [s for j in jobs.values() for s in j["steps"]
               if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert len(uploads) >= 2 and all(s["with"]["path"] == "runs/" for s in uploads)
