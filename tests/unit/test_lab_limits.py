"""How large a lab the machine can build: limits derived from its descriptors, memory and the kernel's
namespace limit (kpemu.model.limits), each refusal naming the limit, the machine's numbers and the fix;
and RLIMIT_NOFILE raised as far as a lab needs (kpemu.kernel.netns.raise_nofile)."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from kpemu.cli import main
from kpemu.kernel.netns import raise_nofile
from kpemu.model import limits, validate
from kpemu.model.limits import Machine, Need, limit_problems
from kpemu.sizing import descriptors_needed
from scripts.benches.fabric import large_topology
from tests.helpers import without_places

GB = 1 << 30
ROOMY = Machine(nofile_hard=20_000, nr_open=1 << 20, privileged=True, mem_available=24 * GB, netns_max=96_363,
                netns_named=10)


def test_a_48_node_lab_fits_a_24_gb_machine() -> None:
    need = validate.lab_need(large_topology(48, 30, 40))
    assert need == Need(namespaces=1 + 48 + 1440 + 1, descriptors=256 + 1440 + 4 * 2 * 1490)
    assert limit_problems(need, ROOMY) == []


def test_memory_limit_names_the_machine_numbers() -> None:
    small = Machine(20_000, 1 << 20, True, mem_available=1 * GB, netns_max=96_363, netns_named=0)
    assert limit_problems(Need(2000, 1000), small) == [
        "2,000 network namespaces need about 781.2 MB of kernel memory, more than this machine can give a lab "
        "(at most 1,310 namespaces: 400 KB each is an estimate; half of the 1.0 GB MemAvailable); free memory or "
        "split the lab into smaller ones"]


def test_kernel_namespace_limit_counts_the_namespaces_that_exist() -> None:
    tight = Machine(20_000, 1 << 20, True, mem_available=24 * GB, netns_max=1000, netns_named=900)
    assert limit_problems(Need(100, 1000), tight) == [
        "100 network namespaces are more than the kernel allows now (at most 36: user.max_net_namespaces is "
        "1,000, 900 named ones exist and 64 are left to the machine); raise it (sysctl -w "
        "user.max_net_namespaces=N), remove unused namespaces, or split the lab"]


def test_descriptor_limit_is_the_hard_limit_unless_privileged() -> None:
    user = Machine(nofile_hard=4096, nr_open=1 << 20, privileged=False, mem_available=24 * GB, netns_max=96_363,
                   netns_named=0)
    assert limit_problems(Need(100, 5000), user) == [
        "a run of this lab holds about 5,000 open descriptors at once (one socket per pod port, 4 per capture "
        "point, 256 for kpemu), more than this process may open (at most 4,096: the hard RLIMIT_NOFILE); raise "
        "the hard limit (ulimit -Hn, or limits.conf) or run as root, or split the lab"]
    assert limit_problems(Need(100, 5000), Machine(4096, 1 << 20, True, 24 * GB, 96_363, 0)) == []
    assert limit_problems(Need(100, 2_000_000), Machine(4096, 1 << 20, True, 24 * GB, 96_363, 0)) == [
        "a run of this lab holds about 2,000,000 open descriptors at once (one socket per pod port, 4 per capture "
        "point, 256 for kpemu), more than this process may open (at most 1,048,576: fs.nr_open); raise fs.nr_open "
        "(sysctl -w fs.nr_open=N), or split the lab"]


def test_descriptors_needed() -> None:
    assert descriptors_needed(sockets=1440, captures=10) == 256 + 1440 + 40


def test_machine_here_reads_this_machine() -> None:
    here = Machine.here()
    assert here.nofile_hard >= resource.getrlimit(resource.RLIMIT_NOFILE)[0] or here.nofile_hard == 1 << 30
    assert here.mem_available > 0 and here.netns_max > 0 and here.netns_named >= 0


def test_raise_nofile_raises_the_soft_limit_and_never_lowers_it() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert raise_nofile(100) == 256
        want = min(1000, hard)
        assert raise_nofile(want) == want
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (want, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _write(tmp_path: Path, nodes: int, pods: int) -> Path:
    import yaml

    topo = large_topology(nodes, pods, 1, name="limits")
    p = tmp_path / "big.yaml"
    p.write_text(yaml.safe_dump(topo.model_dump(mode="json", by_alias=True, exclude_defaults=True), sort_keys=False))
    return p


def test_validate_refuses_a_lab_this_machine_cannot_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, 20, 10)
    monkeypatch.setattr(limits.Machine, "here", classmethod(lambda cls: Machine(
        20_000, 1 << 20, True, mem_available=100 << 20, netns_max=96_363, netns_named=0)))
    assert main(["validate", str(path)]) == 2
    err = without_places(capsys.readouterr().err, path)
    assert (f"{path}: pods: 20 nodes, 200 pods, 1 externals are too large a lab for this machine: 222 network "
            "namespaces need about 86.7 MB of kernel memory, more than this machine can give a lab (at most 128 "
            "namespaces: 400 KB each is an estimate; half of the 100.0 MB MemAvailable)") in err
    assert "Traceback" not in err


def test_validate_admits_labs_above_the_old_caps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_write(tmp_path, 48, 30))]) == 0
