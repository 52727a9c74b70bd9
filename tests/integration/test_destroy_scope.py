"""`destroy` touches only its own lab: a name prefix is not ownership, a stale state file cannot
remove another lab's namespaces, and `destroy --all` leaves namespaces kpemu did not mark."""

from __future__ import annotations

import json

import pytest

from kpemu.cli import main
from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.kernel.owner import owner_of
from kpemu.statedir import state_path
from tests.helpers import TOPOLOGIES, needs_root
from tests.integration.fabric_util import deployed_lab

pytestmark = [needs_root, pytest.mark.root]
LAB = "hardening-flannel"  # members web-0.. are kp-hardening-flannel-web-0..


def test_a_prefix_is_not_ownership(capsys: pytest.CaptureFixture[str]) -> None:
    with deployed_lab(TOPOLOGIES / "flannel-vxlan.yaml", LAB) as (_, state):
        assert all(owner_of(ns) == f"lab={LAB}" for ns in state.namespaces)
        assert main(["destroy", f"{LAB}-web"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"lab {LAB}-web: no state file and no namespace marked as its own; removed nothing\n"
                              f"left alone (not {LAB}-web's): kp-{LAB}-web-0 (marked lab={LAB}), ")
        assert set(nsmod.list_netns(f"kp-{LAB}-")) == set(state.namespaces)


def test_a_stale_state_file_cannot_remove_another_lab() -> None:
    with deployed_lab(TOPOLOGIES / "flannel-vxlan.yaml", LAB) as (_, state):
        stale = f"kp-{LAB}-web-0"
        state_path(f"{LAB}-web").write_text(json.dumps({
            "lab": f"{LAB}-web", "source": "", "namespaces": [stale], "members": {"0": stale}}))
        removal = lab.destroy(f"{LAB}-web")
        assert (removal.namespaces, removal.left) == ([], {stale: f"marked lab={LAB}"})
        assert not state_path(f"{LAB}-web").exists()
        assert set(nsmod.list_netns(f"kp-{LAB}-")) == set(state.namespaces)


def test_without_its_state_file_a_lab_is_found_by_its_marks() -> None:
    with deployed_lab(TOPOLOGIES / "flannel-vxlan.yaml", LAB) as (_, state):
        state_path(LAB).unlink()
        removal = lab.destroy(LAB)
        assert not removal.recorded
        assert sorted(removal.namespaces) == sorted(state.namespaces)
        assert not nsmod.list_netns(f"kp-{LAB}-")


def test_destroy_all_leaves_unmarked_namespaces_alone() -> None:
    foreign = "kp-hardening-foreign"  # what some other tool calls kp-...
    nsmod.create_netns(foreign)
    try:
        removal = lab.destroy_all()
        assert removal.left.get(foreign) == "not marked by kpemu"
        assert nsmod.netns_exists(foreign)
    finally:
        nsmod.delete_netns(foreign)


def test_destroy_all_removes_a_killed_probe() -> None:
    """A probe killed after recording its namespace (marked or not yet) leaves nothing after --all."""
    from kpemu.kernel.owner import PROBE_OWNER, mark
    from kpemu.statedir import PROBE_DIR

    marked, unmarked = "kp-probe-999999-aaaa", "kp-probe-999999-bbbb"
    PROBE_DIR.mkdir(parents=True, exist_ok=True)
    for ns in (marked, unmarked):
        (PROBE_DIR / ns).write_text("999999\n")
        nsmod.create_netns(ns)
    mark(marked, PROBE_OWNER)
    removal = lab.destroy_all()
    assert {marked, unmarked} <= set(removal.namespaces)
    assert not nsmod.netns_exists(marked) and not nsmod.netns_exists(unmarked)
    assert not (PROBE_DIR / marked).exists() and not (PROBE_DIR / unmarked).exists()
