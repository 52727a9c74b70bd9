"""The kernel matrix: `kpemu matrix` lists every shipped scenario x mode variant x kernel x release (the
workflow's jobs come from it), guest kernels are chosen by series (`--kernel 6.12`, $KPEMU_KERNEL) from
a cache laid out as `kpemu vm setup` leaves it, and a series that contradicts the runtime is refused."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kpemu import matrix
from kpemu.errors import InputError
from kpemu.runtimes import kernels
from tests.helpers import ROOT, cli


def test_one_scenario_in_each_of_its_variants_and_kernels() -> None:
    got = matrix.entries(ROOT, [ROOT / "scenarios" / "lb-no-nodeports.yaml", ROOT / "scenarios" / "nft-137.yaml"])
    assert [(e.id, e.mode, e.release) for e in got] == [
        ("lb-no-nodeports-as-written-host", "iptables", "1.33"),
        ("lb-no-nodeports-as-written-6.1", "iptables", "1.33"),
        ("lb-no-nodeports-as-written-6.12", "iptables", "1.33"),
        ("lb-no-nodeports-nftables-host", "nftables", "1.33"),
        ("lb-no-nodeports-nftables-6.1", "nftables", "1.33"),
        ("lb-no-nodeports-nftables-6.12", "nftables", "1.33"),
        ("nft-137-as-written-host", "nftables", "1.37"),
        ("nft-137-as-written-6.1", "nftables", "1.37"),
        ("nft-137-as-written-6.12", "nftables", "1.37")]


def test_every_shipped_scenario_runs_on_the_host_and_container_members_only_there() -> None:
    found = matrix.entries(ROOT, matrix.shipped(ROOT))
    files = {f.relative_to(ROOT).as_posix() for f in matrix.shipped(ROOT)}
    assert {e.file for e in found if e.kernel == "host" and e.variant == "as-written"} == files
    assert {e.scenario for e in found if e.variant == "nftables" and e.kernel == "host"} == set(matrix.NFTABLES_TOO)
    docker = {e.scenario for e in found if e.kernel == "host"} - {e.scenario for e in found if e.kernel == "6.12"}
    assert docker == {"nodeport-iptables-docker", "nodeport-ipvs-docker"}
    assert len({e.id for e in found}) == len(found)


def test_the_workflows_jobs_one_per_kernel_and_variant() -> None:
    res = cli("matrix", "-o", "json", "--by", "kernel", "--kernels", "host,6.12")
    assert res.returncode == 0, res.stderr
    jobs = json.loads(res.stdout)["include"]
    assert [j["id"] for j in jobs] == ["as-written-host", "as-written-6.12", "nftables-host", "nftables-6.12"]
    nft = jobs[2]
    top = sorted(n for n in matrix.NFTABLES_TOO if "/" not in n)
    faults = sorted(n for n in matrix.NFTABLES_TOO if "/" in n)
    assert nft["files"].split() == [f"scenarios/{n}.yaml" for n in [*top, *faults]]  # scenarios/, then its faults/
    assert nft["scenarios"] == str(len(matrix.NFTABLES_TOO)) and nft["modes"] == "nftables"
    assert all(isinstance(v, str) for j in jobs for v in j.values())  # what a GitHub matrix takes
    files = cli("matrix", "--variant", "nftables", "--kernels", "host", "--files").stdout.split()
    assert files == nft["files"].split()


def test_an_unknown_kernel_or_series_is_refused() -> None:
    with pytest.raises(InputError, match=re.escape("expected a comma-separated list of host, 6.1, 6.12")):
        matrix.kernels_of("host,5.10x")
    before = os.environ.get(kernels.KERNEL_ENV)
    res = cli("run", "scenarios/nodeport-ipvs.yaml", "--runtime", "host", "--kernel", "6.12")
    assert res.returncode == 2
    assert "--kernel 6.12 picks a guest kernel, and --runtime host runs on this one" in res.stderr
    assert os.environ.get(kernels.KERNEL_ENV) == before  # the caller's later guests are not moved to 6.12
    res = cli("vm", "status", "--kernel", "six")
    assert res.returncode == 2 and "expected MAJOR.MINOR, such as 6.1 or 6.12" in (res.stderr + res.stdout)


def _kernel(cache: Path, package: str, version: str, modules: tuple[str, ...] = kernels.REQUIRED_MODULES) -> None:
    """A kernel as `kpemu vm setup` unpacks one: boot/vmlinuz-VER and lib/modules/VER with its modules.dep."""
    (cache / package / "boot").mkdir(parents=True)
    (cache / package / "boot" / f"vmlinuz-{version}").write_bytes(b"")
    mods = cache / package / "lib" / "modules" / version
    mods.mkdir(parents=True)
    (mods / "modules.dep").write_text("".join(f"kernel/net/{m}.ko.xz:\n" for m in modules))


def test_a_guest_kernel_is_found_by_series_and_the_default_series_stays_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPEMU_CACHE", str(tmp_path))
    monkeypatch.delenv(kernels.KERNEL_ENV, raising=False)
    _kernel(tmp_path, "linux-image-6.1.0-57-amd64", "6.1.0-57-amd64")
    _kernel(tmp_path, "linux-image-6.12.118+deb12-amd64", "6.12.118+deb12-amd64")
    _kernel(tmp_path, "linux-image-6.13.1-amd64", "6.13.1-amd64", ("vxlan",))  # lacks IPVS, IPIP, dummy
    assert [kernels.series_of(v) for v in ("6.1.0-57-amd64", "6.12.118+deb12-amd64")] == ["6.1", "6.12"]
    assert kernels.find_kernel().version == "6.1.0-57-amd64"  # type: ignore[union-attr]
    assert kernels.find_kernel("6.12").version == "6.12.118+deb12-amd64"  # type: ignore[union-attr]
    monkeypatch.setenv(kernels.KERNEL_ENV, "6.12")
    assert kernels.find_kernel().version == "6.12.118+deb12-amd64"  # type: ignore[union-attr]
    assert kernels.find_kernel("6.13") is None
    with pytest.raises(kernels.EnvironmentProblem, match=r"run `kpemu vm setup --kernel 6.13`"):
        kernels.require_kernel("6.13")
