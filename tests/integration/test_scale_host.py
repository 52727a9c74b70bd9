"""A lab above the old fixed caps (16 nodes, 128 pods): 20 nodes x 200 pods deploys and destroys leaving
no namespace, no state file and no descriptor behind (the 48 x 1,440 lab is measured by `make bench`)."""

from __future__ import annotations

import os

from kpemu.kernel import lab
from kpemu.kernel import netns as nsmod
from kpemu.runtimes.host import deploy_lab
from kpemu.statedir import state_path
from scripts.benches.fabric import large_topology
from tests.helpers import needs_root


@needs_root
def test_a_20_node_200_pod_lab_deploys_and_destroys_leaving_nothing() -> None:
    topo = large_topology(20, 10, 5, name="scale20")
    fds = len(os.listdir("/proc/self/fd"))
    try:
        state = deploy_lab(topo)
        assert state.complete and len(state.namespaces) == 1 + 20 + 200 + 1
        assert set(state.namespaces) <= set(nsmod.list_netns("kp-scale20-"))
    finally:
        lab.destroy(topo.name)
    assert nsmod.list_netns("kp-scale20-") == []
    assert not state_path(topo.name).exists()
    assert len(os.listdir("/proc/self/fd")) <= fds
