"""A CNI's kernel need, named on this kernel: the calico step that configures tunl0 fails, in a
namespace of a kernel without the ipip module, as the environment problem calico's registry entry
words, carried to the executor by the job (skipped where ipip is loaded: tunl0 then exists)."""

from __future__ import annotations

import pytest

from kpemu.errors import EnvironmentProblem
from kpemu.inputs.topology import load_topology
from kpemu.jobs.build import deploy_job
from kpemu.jobs.execute import run_step
from kpemu.labplan import lab_plan
from kpemu.plan.batch import batch_step
from tests.helpers import TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root]


def test_a_kernel_without_ipip_is_named_from_the_cni_registry(scratch: str) -> None:
    topo = load_topology(TOPOLOGIES / "calico-ipip.yaml")
    job = deploy_job(lab_plan(topo, (6, 1)))
    step = batch_step(f"links and addresses in {scratch}", scratch, ["link set tunl0 mtu 1480", "link set tunl0 up"])
    try:
        run_step(step, job)
    except EnvironmentProblem as e:
        assert (e.reason, e.fix) == ("this kernel has no IPIP tunnel (module ipip), which cni: calico-ipip needs",
                                     "run with --runtime vm (a guest kernel with ipip), or `modprobe ipip`")
    else:
        pytest.skip("this kernel has tunl0 in every namespace (module ipip is loaded)")
