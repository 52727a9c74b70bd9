"""kube-proxy's nfacct counters in a node namespace (iptables mode, 1.30+).

kube-proxy creates `ct_state_invalid_dropped_pkts` and `localhost_nps_accepted_pkts` at startup
(`nfacct.New()` + `Ensure(name)` over netlink) and writes `-m nfacct --nfacct-name` only for the
counters it could create. nfacct objects belong to a network namespace, so every node namespace
needs its own, before iptables-restore: a rule naming a missing counter is refused ("RULE_APPEND
failed (No such file or directory)"). kpemu creates them with the `nfacct` tool (Debian package
nfacct), which speaks the same nfnetlink_acct protocol.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from kpemu.errors import ApplyError, EnvironmentProblem
from kpemu.kernel import netns as nsmod
from kpemu.kernel.netns import run_in
from kpemu.proxy.naming import NFACCT_COUNTERS
from kpemu.statedir import PROBE_PREFIX

if TYPE_CHECKING:  # the executor imports this module (also in the guest): no model at import time
    from kpemu.model.topology import Topology

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


def can_create(probe_ns: str) -> bool:
    """Whether this kernel lets kube-proxy create its counters (tried in `probe_ns`)."""
    return all(_add(probe_ns, name) is None for name in NFACCT_COUNTERS)


@functools.cache
def supported_here() -> bool:
    """`can_create` in a throwaway namespace of this kernel (asked once per process)."""
    name = f"{PROBE_PREFIX}nfacct-{os.getpid()}"
    nsmod.create_netns(name)
    try:
        return can_create(name)
    finally:
        nsmod.delete_netns(name)


def with_nfacct(topo: Topology, supported: Callable[[], bool]) -> Topology:
    """nfacct: None means kube-proxy's own behaviour: use the counters if the kernel can create them
    (`supported()`, asked only when it matters); the topology with nfacct decided."""
    from kpemu.proxy.modes import mode_of
    from kpemu.proxy.versions import flavour_for

    kp = topo.kubeProxy
    if kp.nfacct is not None or not mode_of(topo).nfacct or not flavour_for(kp).nfacct_capable:
        return topo
    return topo.model_copy(update={"kubeProxy": kp.model_copy(update={"nfacct": supported()})})


def resolve_nfacct(topo: Topology, probe_ns: str) -> Topology:
    """`with_nfacct`, trying the counters in `probe_ns` (a lab namespace: every node shares the kernel)."""
    return with_nfacct(topo, lambda: can_create(probe_ns))
