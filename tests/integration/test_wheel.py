"""The wheel, installed into a clean virtualenv outside the checkout, is a working kpemu: the shipped
examples are there (with the schema their first line names), `kpemu examples` and `kpemu validate
example:nodeport-ipvs` work, and the metadata carries the licence, README and URLs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{argv}: {res.stdout[-2000:]}{res.stderr[-2000:]}"
    return res


@pytest.mark.long
def test_wheel_installs_a_working_kpemu_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
          str(ROOT)], tmp_path)
    wheel = next(dist.glob("kpemu-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta and any(n.endswith("licenses/LICENSE") for n in names)
    assert "Description-Content-Type: text/markdown" in meta and "containerlab-style testbed" in meta
    assert "Project-URL: " in meta and "virtme-ng<2,>=1.30; extra == \"vm\"" in meta
    shipped = {n for n in names if n.startswith("kpemu/examples/") and n.endswith((".yaml", ".json"))}
    assert {f"kpemu/examples/scenarios/{p.name}" for p in (ROOT / "scenarios").glob("*.yaml")} <= shipped
    assert {"kpemu/examples/schemas/scenario.schema.json", "kpemu/examples/schemas/topology.schema.json"} <= shipped

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], tmp_path)
    kpemu = str(venv / "bin" / "kpemu")
    work = tmp_path / "elsewhere"
    work.mkdir()
    assert _run([kpemu, "--version"], work).stdout.strip() == f"kpemu {wheel.name.split('-')[1]}"
    listed = _run([kpemu, "examples"], work).stdout
    assert "example:nodeport-ipvs" in listed and "example:calico-ipip" in listed
    assert "example:faults/mtu-mismatch" in listed  # the fault scenarios come with the wheel too
    assert _run([kpemu, "validate", "example:faults/mtu-mismatch"], work).stdout.splitlines()[-1] == \
        "1 of 1 file(s) valid"
    out = _run([kpemu, "validate", "example:nodeport-ipvs"], work).stdout
    assert out.splitlines() == ["example:nodeport-ipvs: ok (scenario)", "1 of 1 file(s) valid"]
    # the first line's relative $schema resolves inside the installed package
    path = _run([kpemu, "examples", "-o", "json"], work).stdout
    scenario = Path(next(line.split('"')[3] for line in path.splitlines() if '"path"' in line))
    ref = scenario.read_text().splitlines()[0].split("$schema=")[1]
    assert (scenario.parent / ref).is_file()
    assert str(ROOT) not in scenario.as_posix()
    # --update-goldens never rewrites the installed package: it says where to copy the examples first
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    before = sorted((p, p.stat().st_mtime_ns) for p in scenario.parent.rglob("*") if p.is_file())
    refused = subprocess.run([kpemu, "run", "example:nodeport-iptables", "--update-goldens"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert " ".join(refused.stderr.split()) == (
        f"--update-goldens would rewrite files inside the installed kpemu package ({scenario.parent}/"
        "nodeport-iptables.yaml); copy the examples first: kpemu examples copy ./kpemu-examples, then run "
        "./kpemu-examples/scenarios/nodeport-iptables.yaml with --update-goldens")
    assert sorted((p, p.stat().st_mtime_ns) for p in scenario.parent.rglob("*") if p.is_file()) == before
    _run([kpemu, "examples", "copy", "./kpemu-examples"], work)
    copied = _run([kpemu, "validate", "./kpemu-examples/scenarios/nodeport-iptables.yaml",
                   "./kpemu-examples/scenarios/faults/mtu-mismatch.yaml"], work).stdout
    assert copied.splitlines()[-1] == "2 of 2 file(s) valid"
    assert (work / "kpemu-examples" / "scenarios" / "nodeport-iptables" / "golden").is_dir()
