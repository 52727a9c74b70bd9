"""A refused `kpemu run` changes nothing: not the output folder another run holds, not the folder
of a run refused because its lab is already deployed, and no namespace is created."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpemu.cli import main
from kpemu.inputs.scenario import load_scenario
from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.runtimes.host import deploy_lab
from kpemu.statedir import state_path
from tests.helpers import ROOT, SCENARIOS, needs_root

pytestmark = [needs_root, pytest.mark.root]
SCENARIO = SCENARIOS / "nodeport-iptables.yaml"
HOLD = "import sys, time; from pathlib import Path; from kpemu.outlock import out_dir_lock\n" \
       "with out_dir_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n"


@pytest.fixture
def earlier_run(tmp_path: Path) -> Path:
    """An output folder with what an earlier run left in it."""
    out = tmp_path / "out"
    (out / "pcaps").mkdir(parents=True)
    (out / "pcaps" / "client_eth0.pcap").write_bytes(b"\xd4\xc3\xb2\xa1 earlier")
    (out / "report.md").write_text("earlier report\n")
    return out


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture
def held(earlier_run: Path) -> Iterator[Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(earlier_run)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield earlier_run
    finally:
        proc.kill()
        proc.wait()


def test_folder_held_by_another_run(held: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _files(held)
    assert main(["run", str(SCENARIO), "--runtime", "host", "--out", str(held)]) == 3
    assert f"output folder {held} is in use by another kpemu run" in capsys.readouterr().err
    assert _files(held) == before
    assert not nsmod.list_netns("kp-nodeport-iptables-")


def test_lab_already_deployed(earlier_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo = load_scenario(SCENARIO).topology
    state = deploy_lab(topo)
    try:
        before = _files(earlier_run)
        assert main(["run", str(SCENARIO), "--runtime", "host", "--out", str(earlier_run)]) == 3
        assert " ".join(capsys.readouterr().err.split()) == (
            "kpemu: lab 'nodeport-iptables' is deployed (kpemu deploy) fix: kpemu destroy nodeport-iptables, or "
            "build this one under another lab name: --name nodeport-iptables-2")
        assert _files(earlier_run) == before
        assert set(nsmod.list_netns("kp-nodeport-iptables-")) == set(state.namespaces)
    finally:
        lab.destroy(topo.name)


@pytest.mark.skipif(Path("/sys/module/ipip").exists(), reason="this kernel has ipip: calico deploys here")
def test_a_deploy_the_kernel_refuses_exits_3_with_the_reason(tmp_path: Path) -> None:
    """A traced run whose deploy fails (calico needs ipip): the drop tracer stops cleanly after the
    deploy removed the lab's scratch folder, the reason and the fix are printed, no traceback, nothing left."""
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "run", str(SCENARIOS / "nodeport-ipvs-remote.yaml"),
                          "--runtime", "host", "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    assert "kpemu: this kernel has no IPIP tunnel (module ipip), which cni: calico-ipip needs\n" in res.stderr
    assert "Traceback" not in res.stderr
    assert not nsmod.list_netns("kp-nodeport-ipvs-remote-")
    assert not state_path("nodeport-ipvs-remote").exists()
