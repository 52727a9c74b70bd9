"""A lab deployed with --serve answers what one pokes it with until it is destroyed: curl from the
external client through a NodePort (HTTP), the marker protocol with nc, a pcap streamed by kpemu
capture; destroy stops its servers and leaves no process of the lab."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kpemu.kernel.netns import list_netns
from tests.helpers import TOPOLOGIES, kpemu, needs_root, start_kpemu

pytestmark = [needs_root, pytest.mark.root]
LAB = "t-usable"


def _servers() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kpemu.traffic.serve_lab" in cmd and f"/{LAB}.d/".encode() in cmd:
                out.append(int(p.name))
    return out


def test_a_served_lab_answers_curl_and_nc_and_streams_a_pcap(tmp_path: Path) -> None:
    deployed = kpemu("deploy", str(TOPOLOGIES / "flannel-vxlan.yaml"), "--name", LAB, "--runtime", "host",
                     "--serve", timeout=300)
    try:
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        assert deployed.stdout.rstrip().endswith("its pods serve until kpemu destroy")
        assert len(_servers()) == 1
        pcap = tmp_path / "node1.pcap"
        capture = start_kpemu("capture", LAB, "node1", "eth0", "-c", "4", "-w", str(pcap), "--", "tcp", "port", "30080",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.0)  # tcpdump listening
        answers = [kpemu("exec", LAB, "client", "--", "curl", "-s", "-m", "5", "http://192.168.1.100:30080/",
                         timeout=60) for _ in range(3)]
        assert all(a.returncode == 0 for a in answers), [a.stderr for a in answers]
        assert {a.stdout.strip() for a in answers} <= {f"kpemu:http:reply:{p}" for p in ("web-0", "web-1", "web-2")}
        nc = kpemu("exec", LAB, "client-0", "--", "sh", "-c", "echo kpemu:poke:001 | nc -w 3 10.244.1.5 80",
                   timeout=60)
        assert nc.stdout.strip() == "kpemu:poke:001:reply:web-1", nc.stdout + nc.stderr
        capture.wait(timeout=30)
        assert capture.returncode == 0, capture.stderr.read() if capture.stderr else ""
        read = subprocess.run(["tcpdump", "-nn", "-r", str(pcap)], capture_output=True, text=True, check=True)
        assert len(read.stdout.splitlines()) == 4 and "192.168.1.100.30080" in read.stdout
    finally:
        gone = kpemu("destroy", LAB, timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert not list_netns(f"kp-{LAB}-") and not _servers()


def test_run_keep_leaves_the_lab_up_and_serving_until_destroy(tmp_path: Path) -> None:
    import yaml

    scenario = {"name": LAB, "topology": str(TOPOLOGIES / "flannel-vxlan.yaml"),
                "flows": [{"name": "np", "from": "client", "to": {"node": "node1", "nodePort": 30080}}],
                "expect": [{"flow": "np", "reply": True}]}
    path = tmp_path / "keep.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = kpemu("run", str(path), "--runtime", "host", "--out", str(tmp_path / "out"), "--keep", "--no-trace",
                timeout=300)
    try:
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert f"lab {LAB} kept, its pods serving" in run.stdout
        assert run.stdout.rstrip().splitlines()[-1] == "PASS: 1/1 scenarios passed, exit code 0"
        assert list_netns(f"kp-{LAB}-") and len(_servers()) == 1
        after = kpemu("exec", LAB, "client", "--", "curl", "-s", "-m", "5", "http://192.168.1.100:30080/",
                      timeout=60)
        assert after.stdout.startswith("kpemu:http:reply:web-"), after.stdout + after.stderr
    finally:
        gone = kpemu("destroy", LAB, timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert not list_netns(f"kp-{LAB}-") and not _servers()
