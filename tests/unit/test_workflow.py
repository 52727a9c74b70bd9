"""The CI workflow cannot run here: validate it against GitHub's schema and check its make targets."""

from __future__ import annotations

import argparse
import re
import subprocess

import pytest
import yaml

from tests.helpers import ROOT

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
    assert "setup" in used, used
    assert used <= targets, f"workflow runs make targets the Makefile lacks: {sorted(used - targets)}"


def test_workflow_passes_actionlint() -> None:
    lint = ROOT / ".venv" / "bin" / "actionlint"
    assert lint.is_file(), "make setup builds actionlint (with the machine's Go) into .venv/bin"
    r = subprocess.run([str(lint), str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_native_and_guest_jobs_come_from_kpemu_matrix() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    listing = "\n".join(s.get("run", "") for s in jobs["matrix"]["steps"])
    assert "kpemu matrix -o json --by kernel --kernels host " in listing
    assert "kpemu matrix -o json --by kernel --kernels 6.1,6.12 " in listing
    for name in ("native", "guest"):
        assert jobs[name]["needs"] == "matrix"
        assert jobs[name]["strategy"]["matrix"] == f"${{{{ fromJSON(needs.matrix.outputs.{name}) }}}}"
        runs = "\n".join(s.get("run", "") for s in jobs[name]["steps"])
        assert "kpemu run $FILES" in runs and "--proxy-mode nftables" in runs
    guest = "\n".join(s.get("run", "") for s in jobs["guest"]["steps"])
    assert 'vm setup --kernel "$KPEMU_KERNEL"' in guest and '--kernel "$KPEMU_KERNEL" --out' in guest
    assert jobs["guest"]["env"]["KPEMU_KERNEL"] == "${{ matrix.kernel }}"


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


def test_every_job_summarises_and_the_guest_job_caches_its_kernel() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    for name, job in jobs.items():
        runs = [s.get("run", "") for s in job["steps"]]
        assert any(re.search(r'kpemu (?:runs summary|matrix)\b.*>> "\$GITHUB_STEP_SUMMARY"', r) for r in runs), name
    caches = [s for s in jobs["guest"]["steps"] if str(s.get("uses", "")).startswith("actions/cache")]
    assert caches and caches[0]["with"]["path"] == "/var/cache/kpemu/kernels"
    guest_runs = "\n".join(s.get("run", "") for s in jobs["guest"]["steps"])
    assert "kpemu vm up" in guest_runs and "kpemu vm down" in guest_runs  # the warm guest, as users use it
    assert "/run/kpemu/vm/guest-" in guest_runs  # its logs go up with the runs


def test_every_kpemu_command_the_workflow_runs_exists() -> None:
    from kpemu.cli import build_parser

    parser = build_parser()
    calls = [m.group(1).split() for run in _run_lines()
             for m in re.finditer(r"\.venv/bin/kpemu ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)", run)]
    assert len(calls) >= 5
    for words in calls:  # e.g. ["vm", "up"], ["runs", "summary"], ["doctor"], ["run"]: kpemu's parser knows each
        p = parser
        for w in words:
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs:
                break
            assert w in subs[0].choices, (words, sorted(subs[0].choices))
            p = subs[0].choices[w]


@pytest.mark.parametrize(("os_release", "distro", "browser"), [
    ('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n', "ubuntu", None),
    ('ID=linuxmint\nID_LIKE="ubuntu debian"\n', "ubuntu", None),
    ('ID=debian\nVERSION_ID="12"\n', "debian", "chromium"),
    ("ID=fedora\n", "debian", "chromium"),
])
def test_setup_chooses_package_names_per_distribution(os_release: str, distro: str, browser: str | None) -> None:
    from kpemu import system

    assert system.distribution(os_release) == distro
    pkgs = system.packages(distro)
    assert ("chromium" in pkgs) is (browser is not None)  # on Ubuntu `chromium` is a snap stub apt cannot install
    assert {"iproute2", "nftables", "nfacct", "qemu-system-x86", "busybox-static", "tshark"} <= set(pkgs)


def test_setup_sh_takes_its_package_list_from_system_py() -> None:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "mapfile -t DEBS < <(python3 kpemu/system.py)" in text
    out = subprocess.run(["python3", str(ROOT / "kpemu" / "system.py"), "ubuntu"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "chromium" not in out and "iproute2" in out
