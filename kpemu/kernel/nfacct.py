"""kube-proxy's nfacct counters in a node namespace (iptables mode, 1.30+).

kube-proxy creates `ct_state_invalid_dropped_pkts` and `localhost_nps_accepted_pkts` at startup
(`nfacct.New()` + `Ensure(name)` over netlink) and writes `-m nfacct --nfacct-name` only for the
counters it could create. nfacct objects belong to a network namespace, so every node namespace
needs its own, before iptables-restore: a rule naming a missing counter is refused ("RULE_APPEND
failed (No such file or directory)"). kpemu creates them with the `nfacct` tool (Debian package
nfacct), which speaks the same nfnetlink_acct protocol.
"""

from __future__ import annotations

import shutil

from kpemu.errors import ApplyError, EnvironmentProblem
from kpemu.kernel.netns import run_in
from kpemu.model.topology import Topology
from kpemu.proxy.versions import NFACCT_COUNTERS, flavour_for

KERNEL_FIX = ("set kubeProxy.nfacct: false (kube-proxy then writes the rules without -m nfacct), or use a "
              "kernel with CONFIG_NETFILTER_NETLINK_ACCT and CONFIG_NETFILTER_XT_MATCH_NFACCT")
XT_NFACCT_HINT = ("the nfacct counters exist but iptables refused `-m nfacct`: this kernel has nfnetlink_acct "
                  "without the xt_nfacct match, which fails kube-proxy's own iptables-restore the same way "
                  "(kubernetes issue #142068); " + KERNEL_FIX)


def _tool() -> str:
    path = shutil.which("nfacct")
    if path is None:
        raise EnvironmentProblem("the nfacct tool is missing (kpemu creates kube-proxy's nfacct counters with it)",
                                 "run `make setup` (installs the Debian package nfacct), or set kubeProxy.nfacct")
    return path


def _add(ns: str, name: str) -> str | None:
    """Create counter `name` in `ns` (an existing one is kept, as kube-proxy's Ensure does); the error text or None."""
    res = run_in(ns, [_tool(), "add", name], timeout=10)
    if res.returncode == 0 or "busy" in res.stderr.lower():  # EBUSY: it exists already
        return None
    return res.stderr.strip() or f"nfacct add {name} exited {res.returncode}"


def ensure_counters(ns: str) -> None:
    """kube-proxy's counters in netns `ns`; ApplyError naming the kernel feature when it cannot."""
    for name in NFACCT_COUNTERS:
        err = _add(ns, name)
        if err is not None:
            raise ApplyError(f"{ns}: cannot create the nfacct counter {name} ({err}): the kernel lacks "
                             f"nfnetlink_acct here; {KERNEL_FIX}")


def resolve_nfacct(topo: Topology, probe_ns: str) -> Topology:
    """nfacct: None means kube-proxy's own behaviour: use the counters if they can be created. Try once,
    in a lab namespace (every node shares the kernel); the topology with nfacct set either way."""
    kp = topo.kubeProxy
    if kp.nfacct is not None or kp.mode != "iptables" or not flavour_for(kp).nfacct_capable:
        return topo
    ok = all(_add(probe_ns, name) is None for name in NFACCT_COUNTERS)
    return topo.model_copy(update={"kubeProxy": kp.model_copy(update={"nfacct": ok})})


def uses_counters(topo: Topology) -> bool:
    """Whether the node's kube-proxy rules name nfacct counters (so they must exist first)."""
    return topo.kubeProxy.mode == "iptables" and flavour_for(topo.kubeProxy).nfacct
