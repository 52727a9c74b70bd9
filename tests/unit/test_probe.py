"""The capability probe's pure parts (requirements, can_run, choose_runtime, vng command) and,
as root, the real probe on this kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpemu.cni.catalog import names as cni_names
from kpemu.errors import EnvironmentProblem, InputError
from kpemu.kernel.probe import PROXY_MODES, Capabilities, Feature, can_run, probe, requirements
from kpemu.runtimes import Needs, choose
from tests.helpers import needs_root


def caps_without(*names: str) -> Capabilities:
    everything = {f for c in cni_names() for m in PROXY_MODES for f in requirements(c, m)}
    return Capabilities(features={n: Feature(n, n not in names, "test") for n in everything}, kernel="test")


def test_requirements_per_cni_and_mode() -> None:
    assert "ip_vs" in requirements("calico-ipip", "ipvs")
    assert "dummy" in requirements("flannel-vxlan", "ipvs")
    assert "ipip" in requirements("calico-ipip", "iptables")
    assert "vxlan" in requirements("flannel-vxlan", "iptables")
    assert "ip_vs" not in requirements("flannel-vxlan", "iptables")
    assert "ipip" not in requirements("flannel-vxlan", "ipvs")
    for c in cni_names():
        for m in PROXY_MODES:
            reqs = requirements(c, m)
            assert len(reqs) == len(set(reqs))
            assert {"veth", "iptables", "conntrack"} <= set(reqs)


def test_requirements_reject_unknown() -> None:
    with pytest.raises(ValueError, match="cni"):
        requirements("cilium", "ipvs")
    with pytest.raises(ValueError, match="proxy mode"):
        requirements("calico-ipip", "nftables-maybe")


def test_can_run_names_what_is_missing() -> None:
    all_but_ipvs = caps_without("ip_vs", "dummy")
    assert can_run(all_but_ipvs, "calico-ipip", "iptables") == (True, [])
    assert can_run(all_but_ipvs, "calico-ipip", "ipvs") == (False, ["ip_vs", "dummy"])


def test_choose_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KPEMU_IN_GUEST", raising=False)
    monkeypatch.delenv("KPEMU_RUNTIME", raising=False)
    no_ipvs = caps_without("ip_vs")

    def chosen(requested: str | None, cni: str, mode: str, host_as_asked: bool = True) -> tuple[str, str]:
        runtime, why = choose(requested, [Needs(cni, mode)], no_ipvs, host_as_asked)[0]
        return runtime.name, why

    runtime, why = chosen("auto", "calico-ipip", "ipvs")
    assert runtime == "vm" and "ip_vs" in why
    runtime, why = chosen(None, "calico-ipip", "iptables")
    assert runtime == "host" and "has everything" in why
    assert chosen("vm", "calico-ipip", "iptables")[0] == "vm"
    assert chosen("host", "calico-ipip", "ipvs") == ("host", "--runtime host: this kernel, as asked")
    with pytest.raises(EnvironmentProblem, match="ip_vs"):
        chosen("host", "calico-ipip", "ipvs", host_as_asked=False)
    with pytest.raises(InputError):
        choose("docker", [], no_ipvs)
    monkeypatch.setenv("KPEMU_RUNTIME", "vm")
    assert chosen(None, "flannel-vxlan", "iptables")[0] == "vm"
    monkeypatch.setenv("KPEMU_IN_GUEST", "1")
    assert chosen("vm", "calico-ipip", "ipvs") == ("host", "already inside the guest kernel")


def test_vng_command_has_no_network_and_bounded_resources() -> None:
    from kpemu.runtimes.kernels import GuestKernel
    from kpemu.runtimes.qemu import vng_command

    k = GuestKernel("6.1.0-x", Path("/c/k/boot/vmlinuz-6.1.0-x"), Path("/c/k/lib/modules/6.1.0-x"), "cache")
    cmd = vng_command(k, Path("/out/s.sh"), [Path("/out")], kvm=False, qemu="/usr/bin/qemu", vng="vng")
    assert "--network" not in cmd and "-n" not in cmd
    assert cmd[cmd.index("--run") + 1] == "/c/k/boot/vmlinuz-6.1.0-x"
    assert "--disable-kvm" in cmd and cmd[cmd.index("--cpus") + 1] == "2" and cmd[cmd.index("--memory") + 1] == "2G"
    assert cmd[cmd.index("--rodir") + 1] == "/c/k" and cmd[cmd.index("--rwdir") + 1] == "/out"
    assert "--disable-kvm" not in vng_command(k, Path("/s"), [], kvm=True, qemu="q", vng="vng")


@needs_root
def test_probe_this_kernel_cleanly() -> None:
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    caps = probe()
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert not {n for n in after - before if n.startswith("kp-probe-")}, "probe left a namespace behind"
    assert caps.has("veth") and caps.has("tool:ip")  # every kernel kpemu supports
    for f in caps.features.values():
        assert f.ok or f.detail, f"{f.name}: missing without a reason"
    # The probe agrees with the kernel: ipip is reported iff the kernel has the ipip driver, which then
    # shows in /sys/module (built in, or loaded by the probe's tunl0 / `ip link add type ipip`).
    assert caps.has("ipip") == Path("/sys/module/ipip").exists()
    # xt_nfacct, once used, is listed among the kernel's iptables matches.
    assert caps.has("match:nfacct") == ("nfacct" in Path("/proc/net/ip_tables_matches").read_text().split())
