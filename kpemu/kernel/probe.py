"""Capability probe: what this kernel and this machine can do, found by trying, not by guessing.

Every kernel feature is tried inside one throwaway network namespace (`kp-probe-<pid>-<rand>`),
which is always deleted; the root namespace is never touched. Tools are looked up on PATH.
`requirements()` and `can_run()` are pure: which features a CNI and a kube-proxy mode need, and
whether a set of capabilities has them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from kpemu import cni as cni_registry
from kpemu.cni import catalog as cni_catalog
from kpemu.kernel import netns as nsmod
from kpemu.kernel.labstate import record_probe, sweep_probes
from kpemu.kernel.owner import PROBE_OWNER, mark
from kpemu.plan.types import CONNTRACK_MAX
from kpemu.proxy.modes import MODES
from kpemu.statedir import PROBE_PREFIX

PROXY_MODES = tuple(MODES)

IPSET_TYPES = ("hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net", "bitmap:port", "hash:ip")
TOOLS = ("ip", "iptables", "ipset", "ipvsadm", "tcpdump", "conntrack", "ethtool", "nft",
         "xtables-monitor", "qemu-system-x86_64", "vng")
# iptables matches kube-proxy, flannel and calico use, each with a rule that exercises it.
MATCHES: dict[str, list[str]] = {
    "recent": ["-m", "recent", "--name", "KPPROBE", "--rcheck", "--seconds", "10800", "--reap"],
    "statistic": ["-m", "statistic", "--mode", "random", "--probability", "0.5"],
    "addrtype": ["-m", "addrtype", "--dst-type", "LOCAL"],
    "comment": ["-m", "comment", "--comment", "kpemu probe"],
    "set": ["-m", "set", "--match-set", "kp-probe-set", "dst,dst"],
    "ipvs": ["-m", "ipvs", "--vdir", "ORIGINAL"],
    "physdev": ["-m", "physdev", "--physdev-is-in"],
}

# The nftables expressions kube-proxy's nftables mode uses, in one transaction (feature "nftables").
NFT_PROBE = """add table ip kp-probe
add map ip kp-probe m { type ipv4_addr . inet_proto . inet_service : verdict ; }
add set ip kp-probe a { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add chain ip kp-probe e
add rule ip kp-probe e update @a { ip saddr }
add rule ip kp-probe e meta l4proto tcp dnat to 10.0.0.1:80
add chain ip kp-probe pre { type nat hook prerouting priority -100 ; }
add rule ip kp-probe pre ip daddr . meta l4proto . th dport vmap @m
add rule ip kp-probe pre fib daddr type local numgen random mod 1 vmap { 0 : goto e }
add chain ip kp-probe post { type nat hook postrouting priority 100 ; }
add rule ip kp-probe post mark and 0x4000 == 0 return
add rule ip kp-probe post masquerade fully-random
add chain ip kp-probe in { type filter hook input priority 0 ; }
add rule ip kp-probe in ct state new reject
"""

# Features every lab needs, then per proxy mode (per CNI: the CNI registry's).
_BASE = ["veth", "bridge", "iptables", "conntrack", "match:comment", "match:addrtype",
         "tool:ip", "tool:iptables", "tool:tcpdump", "tool:conntrack"]
_MODE = {name: list(m.features) for name, m in MODES.items()}  # from the proxy-mode registry
# What a guest kernel must provide for every CNI x mode (the modules behind the kernel features).
GUEST_FEATURES = ("ip_vs", "ipip", "dummy")


@dataclass(frozen=True)
class Feature:
    """One probed capability: `ok`, how it was probed, and what went wrong when it is missing."""

    name: str
    ok: bool
    how: str
    detail: str = ""


@dataclass
class Capabilities:
    """The result of `probe()`: features by name, plus facts about the machine."""

    features: dict[str, Feature] = field(default_factory=dict)
    kernel: str = ""
    seconds: float = 0.0
    root: bool = True

    def has(self, name: str) -> bool:
        """True when feature `name` was probed and works."""
        f = self.features.get(name)
        return bool(f and f.ok)

    def missing(self, names: Sequence[str]) -> list[str]:
        """The names among `names` that are not available."""
        return [n for n in names if not self.has(n)]

    def to_json(self) -> dict:
        """A JSON-ready dict (for `kpemu doctor --json`)."""
        return {"kernel": self.kernel, "seconds": round(self.seconds, 3), "root": self.root,
                "features": {n: asdict(f) for n, f in self.features.items()}}


def requirements(cni: str, proxy_mode: str) -> list[str]:
    """The features a lab with this CNI and kube-proxy mode needs (pure)."""
    if cni not in cni_catalog.names():
        raise ValueError(f"unknown cni {cni!r}; expected one of {', '.join(cni_catalog.names())}")
    if proxy_mode not in _MODE:
        raise ValueError(f"unknown proxy mode {proxy_mode!r}; expected one of {', '.join(PROXY_MODES)}")
    out: list[str] = []
    for f in [*_BASE, *cni_registry.cni(cni).features, *_MODE[proxy_mode]]:
        if f not in out:
            out.append(f)
    return out


def can_run(caps: Capabilities, cni: str, mode: str) -> tuple[bool, list[str]]:
    """Whether `caps` has every feature `requirements(cni, mode)` lists, and which are missing (pure)."""
    missing = caps.missing(requirements(cni, mode))
    return (not missing, missing)


# ---------------------------------------------------------------- probing


def _run(argv: list[str], ns: str | None = None, timeout: float = 5.0, stdin: str | None = None) -> tuple[bool, str]:
    """Run argv (inside netns `ns` when given, `stdin` as its input); (ok, last line of output when it failed)."""
    if ns is not None:
        argv = ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, input=stdin)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    if r.returncode == 0:
        return True, ""
    lines = (r.stderr or r.stdout).strip().splitlines()
    return False, lines[-1] if lines else f"exit {r.returncode}"


class _Prober:
    """Tries every feature inside namespace `ns`; collects `Feature`s."""

    def __init__(self, ns: str):
        self.ns = ns
        self.found: dict[str, Feature] = {}

    def add(self, name: str, ok: bool, how: str, detail: str = "") -> bool:
        self.found[name] = Feature(name, ok, how, "" if ok else detail)
        return ok

    def link(self, name: str, how: str, **kwargs: object) -> bool:
        from pyroute2 import IPRoute

        try:
            with IPRoute(netns=self.ns) as ipr:
                ipr.link("add", **kwargs)
            return self.add(name, True, how)
        except Exception as e:  # NetlinkError: EOPNOTSUPP when the module is absent
            return self.add(name, False, how, str(e))

    def links(self) -> None:
        from pyroute2 import IPRoute

        self.link("veth", "ip link add type veth", ifname="kpp-v0", kind="veth", peer="kpp-v1")
        self.link("bridge", "ip link add type bridge", ifname="kpp-br", kind="bridge")
        self.link("vxlan", "ip link add type vxlan", ifname="kpp-vx", kind="vxlan", vxlan_id=1,
                  vxlan_port=8472)
        self.link("dummy", "ip link add type dummy", ifname="kpp-dm", kind="dummy")
        with IPRoute(netns=self.ns) as ipr:
            tunl0 = bool(ipr.link_lookup(ifname="tunl0"))
        if tunl0:
            self.add("ipip", True, "fallback tunl0 present in a new namespace")
        else:
            self.link("ipip", "tunl0 absent; ip link add type ipip", ifname="kpp-ip", kind="ipip",
                      ipip_local="10.255.0.1", ipip_remote="10.255.0.2")

    def ipvs(self) -> None:
        how = "IPVS genetlink: add and delete a virtual server"
        try:
            from pyroute2 import IPVS, IPVSService

            svc = IPVSService(addr="10.255.255.1", port=80, protocol=socket.IPPROTO_TCP,
                              sched_name="rr")
            with IPVS(netns=self.ns) as ipvs:
                ipvs.service("add", service=svc)
                ipvs.service("del", service=svc)
            self.add("ip_vs", True, how)
        except Exception as e:  # family "IPVS" not found when ip_vs is absent
            self.add("ip_vs", False, how, str(e) or type(e).__name__)

    def ipsets(self) -> None:
        if not shutil.which("ipset"):
            for t in IPSET_TYPES:
                self.add(f"ipset:{t}", False, "ipset create", "ipset tool not found")
            return
        for i, t in enumerate(IPSET_TYPES):
            extra = ["range", "30000-32767"] if t.startswith("bitmap:port") else []
            ok, err = _run(["ipset", "create", f"kp-probe-{i}", t, *extra], self.ns)
            self.add(f"ipset:{t}", ok, f"ipset create {t}", err)
        _run(["ipset", "create", "kp-probe-set", "hash:ip,port"], self.ns)

    def netfilter(self) -> None:
        for name, exe in (("iptables-nft", "iptables-nft"), ("iptables-legacy", "iptables-legacy")):
            if shutil.which(exe):
                ok, err = _run([exe, "-w", "-t", "filter", "-N", "KP-PROBE"], self.ns)
            else:
                ok, err = False, f"{exe} not found"
            self.add(name, ok, f"{exe} -N KP-PROBE", err)
        ok, err = _run(["iptables", "-w", "-N", "KP-PROBE-D"], self.ns)
        backend = _run(["sh", "-c", "iptables -V | grep -q nf_tables"])[0]
        self.add("iptables", ok, f"iptables ({'nf_tables' if backend else 'legacy'}) -N", err)
        ok, err = _run(["iptables", "-w", "-t", "nat", "-A", "POSTROUTING", "-j", "MASQUERADE",
                        "--random-fully"], self.ns)
        self.add("random-fully", ok, "iptables -j MASQUERADE --random-fully", err)
        for m, args in MATCHES.items():
            ok, err = _run(["iptables", "-w", "-A", "KP-PROBE-D", *args, "-j", "RETURN"], self.ns)
            self.add(f"match:{m}", ok, f"iptables -m {m}", err)
        self.nfacct()
        ok, err = _run(["iptables", "-w", "-t", "raw", "-A", "PREROUTING", "-p", "tcp",
                        "--dport", "9", "-j", "TRACE"], self.ns)
        self.add("TRACE", ok, "iptables -t raw -j TRACE", err)
        if shutil.which("nft"):
            ok, err = _run(["nft", "-f", "-"], self.ns, stdin=NFT_PROBE)
        else:
            ok, err = False, "nft not found (Debian package nftables)"
        self.add("nftables", ok, "nft -f of a kube-proxy-like table (vmap, numgen, fib, dnat, masquerade)", err)
        if shutil.which("conntrack"):
            ok, err = _run(["conntrack", "-L"], self.ns)
        else:
            ok, err = False, "conntrack tool not found"
        self.add("conntrack", ok, "conntrack -L", err)
        ok, err = _run(["cat", "/proc/sys/net/bridge/bridge-nf-call-iptables"], self.ns)
        self.add("br_netfilter", ok, "/proc/sys/net/bridge/bridge-nf-call-iptables in the netns",
                 "br_netfilter not loaded" if not ok else "")

    def sctp(self) -> None:
        """SCTP sockets (module sctp): a one-to-one SCTP socket opened inside the probe namespace."""
        try:
            with nsmod.inside(self.ns), socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP):
                pass
            self.add("sctp", True, "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) in a namespace")
        except OSError as e:
            self.add("sctp", False, "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) in a namespace",
                     f"{e.strerror or e} (this kernel has no SCTP: module sctp)")

    def nfacct(self) -> None:
        """kube-proxy's nfacct counters (iptables mode 1.30+): nfnetlink_acct creates them, xt_nfacct
        matches them; a kernel with the first and not the second fails kube-proxy's iptables-restore."""
        if shutil.which("nfacct"):
            ok, err = _run(["nfacct", "add", "kp-probe"], self.ns)
        else:
            ok, err = False, "nfacct tool not found"
        self.add("nfacct", ok, "nfacct add (nfnetlink_acct)", err)
        ok, err = (_run(["iptables", "-w", "-A", "KP-PROBE-D", "-m", "nfacct", "--nfacct-name", "kp-probe",
                         "-j", "RETURN"], self.ns) if ok else (False, "no nfacct counter to match"))
        self.add("match:nfacct", ok, "iptables -m nfacct (xt_nfacct)", err)


def probe(in_guest: bool = False, find_tool: Callable[[str], str | None] = shutil.which,
          kvm: Callable[[], tuple[bool, str]] | None = None) -> Capabilities:
    """Probe this kernel and machine; returns every feature with ok/missing and how it was probed.

    Kernel features need root (a namespace is created); without root they are reported missing
    with that reason. The runtimes say what depends on them: `in_guest` (this is kpemu's guest),
    `find_tool` (where a tool is found) and `kvm` (whether QEMU runs a guest with KVM; None skips
    the trial).
    """
    t0 = time.monotonic()
    caps = Capabilities(kernel=os.uname().release, root=os.geteuid() == 0)
    for tool in TOOLS:
        path = find_tool(tool)
        caps.features[f"tool:{tool}"] = Feature(f"tool:{tool}", path is not None, f"which {tool}",
                                                "" if path else "not on PATH")
    caps.features["conntrack:max"] = _conntrack_max(in_guest)
    if kvm is not None:
        ok, how = kvm()
        caps.features["kvm"] = Feature("kvm", ok, "start qemu with accel=kvm", "" if ok else how)
    if not caps.root:
        for name in _kernel_feature_names():
            caps.features[name] = Feature(name, False, "not probed", "needs root (network namespace)")
        caps.seconds = time.monotonic() - t0
        return caps

    ns = f"{PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(2)}"
    sweep_probes(nsmod.delete_netns)  # what a killed probe left
    record = record_probe(ns)  # recorded before it exists, so `destroy --all` finds it after any kill
    try:
        nsmod.create_netns(ns)
        mark(ns, PROBE_OWNER)
        p = _Prober(ns)
        p.links()
        p.ipvs()
        p.ipsets()
        p.netfilter()
        p.sctp()
        caps.features.update(p.found)
    finally:
        nsmod.delete_netns(ns)
        record.unlink(missing_ok=True)
    caps.seconds = time.monotonic() - t0
    return caps


def _conntrack_max(in_guest: bool) -> Feature:
    """Whether a lab's conntrack limit may be set: nf_conntrack_max is one kernel-wide value, writable only
    in the initial network namespace, so only inside kpemu's guest (disposable; `in_guest`, as the
    runtime says), never on the host."""
    how = "nf_conntrack_max writable from the initial namespace of a kpemu guest"
    from kpemu.kernel.faults import PROC_SYS, in_kpemu_guest

    if not in_kpemu_guest(in_guest):  # the very check the fault itself makes before it sets the value
        return Feature("conntrack:max", False, how, "nf_conntrack_max is kernel-wide (writable only in the initial "
                                                    "network namespace) and kpemu never changes the host's")
    path = PROC_SYS / CONNTRACK_MAX
    ok = os.access(path, os.W_OK)
    return Feature("conntrack:max", ok, how, "" if ok else f"{path} is not writable (nf_conntrack loaded?)")


def _kernel_feature_names() -> list[str]:
    names = ["veth", "bridge", "vxlan", "dummy", "ipip", "ip_vs"]
    names += [f"ipset:{t}" for t in IPSET_TYPES]
    names += ["iptables-nft", "iptables-legacy", "iptables", "random-fully"]
    names += [f"match:{m}" for m in MATCHES] + ["TRACE", "nftables", "conntrack", "br_netfilter", "sctp"]
    return names
