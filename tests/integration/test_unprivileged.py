"""kpemu run by an unprivileged user: deploy/run/destroy refuse with one line (exit 3) before probing
anything; validate, rules and graph work.

The CLI runs as user nobody (65534) through setpriv, keeping only CAP_DAC_READ_SEARCH so that it can
read the interpreter wherever it is installed; it has neither CAP_NET_ADMIN nor CAP_SYS_ADMIN.
Nothing is created, so no lock is needed; root is needed only to switch user.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.helpers import KPEMU, ROOT, SCENARIOS, TOPOLOGIES, needs_root

pytestmark = [needs_root, pytest.mark.root,
              pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")]

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
          "--ambient-caps=+dac_read_search"]
REFUSAL = "kpemu: kpemu deploy/run/destroy need root or CAP_NET_ADMIN + CAP_SYS_ADMIN; run with sudo\n"
TOPO = str(TOPOLOGIES / "flannel-vxlan.yaml")
SCENARIO = str(SCENARIOS / "nodeport-iptables.yaml")


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": "/nonexistent",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*NOBODY, *KPEMU, *args], capture_output=True, text=True,
                          env=env, cwd="/", timeout=60)


@pytest.mark.parametrize("args", [["deploy", TOPO], ["run", SCENARIO], ["run", SCENARIO, "--runtime", "vm"],
                                  ["destroy", "--all"], ["destroy", "flannel"]], ids=" ".join)
def test_lab_commands_refuse_with_one_line(args: list[str]) -> None:
    res = as_nobody(*args)
    assert (res.returncode, res.stdout, res.stderr) == (3, "", REFUSAL)


def test_bad_input_is_still_exit_2_without_root() -> None:
    res = as_nobody("deploy", "/dev/zero")
    assert (res.returncode, res.stderr) == (2, "/dev/zero: is a character device; expected a regular YAML file\n")


@pytest.mark.parametrize("args", [["validate", TOPO, SCENARIO], ["rules", TOPO, "--node", "node1"],
                                  ["graph", TOPO]], ids=" ".join)
def test_file_commands_work(args: list[str]) -> None:
    res = as_nobody(*args)
    assert res.returncode == 0, res.stderr
    assert res.stdout and "Traceback" not in res.stderr


def test_inspect_and_exec_of_a_deployed_lab_refuse_with_one_line() -> None:
    from tests.integration.fabric_util import deployed_lab

    with deployed_lab(TOPOLOGIES / "flannel-vxlan.yaml", "hardening-nobody"):
        for args in (["inspect", "hardening-nobody"], ["exec", "hardening-nobody", "node1", "--", "true"]):
            res = as_nobody(*args)
            assert (res.returncode, res.stderr) == (
                3, "kpemu: kpemu inspect/exec need root or CAP_NET_ADMIN + CAP_SYS_ADMIN; run with sudo\n")
