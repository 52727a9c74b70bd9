"""The real kube-proxy in a lab (`kpemu run --kube-proxy`): kube-proxy v1.37.2, built from source by
kpemu, programs every node of nft-nodeport (nftables) and nodeport-local (iptables) through a relay in
each node's namespace; the scenarios pass on what it programmed, the report names it, and its rules
equal the model's for the same objects; a binary built elsewhere runs as given; a run killed at any
moment leaves nothing `kpemu destroy --all` does not remove. Long: the first run builds kube-proxy,
kube-apiserver and etcd into the cache when they are not there (minutes)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kpemu.kernel.netns import list_netns
from tests.helpers import kpemu, needs_root, start_kpemu

pytestmark = [needs_root, pytest.mark.root, pytest.mark.long]
RELEASE = "1.37.2"
LAB_PROGRAMS = ("etcd", "kube-apiserver", "kube-proxy")


@pytest.fixture(scope="module")
def built() -> Path:
    """kube-proxy v1.37.2 and the control plane in the cache (built now when they are not)."""
    res = kpemu("upstream", "build", RELEASE, timeout=3600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    status = kpemu("upstream", "status", "-o", "json")
    found = [b for b in json.loads(status.stdout)["built"] if b["program"] == "kube-proxy"
             and b["release"] == f"v{RELEASE}"]
    return Path(found[0]["path"])


def _run(scenario: str, out: Path, which: str) -> dict:
    res = kpemu("run", f"scenarios/{scenario}.yaml", "--runtime", "host", "--kube-proxy", which, "--out", str(out),
                timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads((out / "hops.json").read_text())


@pytest.mark.parametrize("scenario", ["nft-nodeport", "nodeport-local"])
def test_the_real_kube_proxy_programs_the_lab_and_agrees_with_the_model(built: Path, scenario: str,
                                                                        tmp_path: Path) -> None:
    hops = _run(scenario, tmp_path, f"upstream:{RELEASE}")
    real = hops["kubeProxy"]
    assert real["version"] == f"Kubernetes v{RELEASE}" and real["build"]["release"] == f"v{RELEASE}"
    assert set(real["syncSeconds"]) == {"node1", "node2"} and real["resynced"] == []
    assert real["modelVsReal"] == [], (tmp_path / "model-vs-real.txt").read_text()[:3000]
    report = (tmp_path / "report.md").read_text()
    assert f"- kube-proxy: the real one, Kubernetes v{RELEASE} (built by kpemu from v{RELEASE}" in report
    assert "kpemu's model generates the same rules for these objects" in report
    assert '"SyncProxyRules complete" ipFamily="IPv4"' in (tmp_path / "kube-proxy" / "node1.log").read_text()
    assert hops["ok"] is True


def test_a_kube_proxy_built_elsewhere_runs_as_given(built: Path, tmp_path: Path) -> None:
    own = tmp_path / "bin" / "kube-proxy"
    own.parent.mkdir()
    shutil.copy2(built, own)
    real = _run("nft-nodeport", tmp_path / "out", str(own))["kubeProxy"]
    assert real["binary"] == str(own) and real["build"] == {} and real["version"] == f"Kubernetes v{RELEASE}"
    assert "built outside kpemu" in (tmp_path / "out" / "report.md").read_text()


def _lab_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if any(f"/{p} " in line + " " for p in LAB_PROGRAMS)
            and "/var/cache/kpemu/upstream/bin/" in line]


def test_a_run_killed_at_any_moment_is_removed_whole_by_destroy_all(built: Path, tmp_path: Path) -> None:
    rng = random.Random(23)
    caught = []  # the lab's programs running at each kill
    # kill once etcd is up, once the API server is, once both kube-proxies are: each a moment later
    for attempt, running in enumerate((1, 2, 4)):
        proc = start_kpemu("run", "scenarios/nft-nodeport.yaml", "--runtime", "host", "--kube-proxy",
                           f"upstream:{RELEASE}", "--out", str(tmp_path / str(attempt)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while len(_lab_processes()) < running and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.0))
        caught.append(len(_lab_processes()))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        res = kpemu("destroy", "--all")
        assert res.returncode == 0, res.stdout + res.stderr
        assert _lab_processes() == []
        assert [n for n in list_netns("kp-") if n.startswith("kp-nft-nodeport-")] == []
        assert not Path("/run/kpemu/labs/nft-nodeport.d").exists()
    assert max(caught) >= 3, caught  # at least one kill found etcd, kube-apiserver and kube-proxies up
