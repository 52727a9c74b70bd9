"""The second guest kernel series: Debian bookworm's 6.12 downloaded beside 6.1 (`kpemu vm setup --kernel
6.12`), the headline run on it (`kpemu run --kernel 6.12`) and passing, its report and hops.json naming the
kernel, while a run without --kernel stays on 6.1; a warm 6.1 guest makes `--kernel 6.12` stop with exit 3
(one guest at a time), not wait for it. Long: a 107 MB download once, and a cold guest boot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import kpemu, needs_root

pytestmark = [pytest.mark.vm, pytest.mark.long, needs_root]


@pytest.fixture
def no_warm_guest() -> Iterator[bool]:
    """No warm guest while the test runs; one that was up (the session's) is booted again after it."""
    from kpemu.runtimes import guest

    was_up = guest.warm_status() is not None
    if was_up:
        guest.down()
    try:
        yield was_up
    finally:
        if was_up:
            guest.up()


def test_the_headline_on_the_6_12_guest_and_6_1_stays_the_default(no_warm_guest: bool, tmp_path: Path) -> None:
    res = kpemu("vm", "setup", "--kernel", "6.12", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    status = json.loads(kpemu("vm", "status", "-o", "json").stdout)
    assert status["kernel"]["version"].startswith("6.1.") and status["series"] is None
    picked = json.loads(kpemu("vm", "status", "--kernel", "6.12", "-o", "json").stdout)
    assert picked["kernel"]["version"].startswith("6.12.") and picked["series"] == "6.12"

    res = kpemu("run", "scenarios/nodeport-ipvs.yaml", "--kernel", "6.12", "--out", str(tmp_path / "np"), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    hops = json.loads((tmp_path / "np" / "hops.json").read_text())
    assert hops["runtime"] == "vm" and hops["kernel"].startswith("6.12.")
    assert f"- kernel: {hops['kernel']}" in (tmp_path / "np" / "report.md").read_text()


def test_a_warm_guest_of_another_series_is_named_not_waited_for(no_warm_guest: bool, tmp_path: Path) -> None:
    from kpemu.runtimes import guest

    guest.up()
    try:
        res = kpemu("run", "scenarios/nodeport-ipvs.yaml", "--kernel", "6.12", "--out", str(tmp_path / "np"),
                    timeout=120)
        assert res.returncode == 3, res.stdout + res.stderr
        assert "and kernel 6.12 is asked for, and one guest runs at a time" in res.stderr
        assert "kpemu vm down" in res.stderr
    finally:
        guest.down()
