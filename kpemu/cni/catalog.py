"""The CNI registry's names (pure, imports nothing): the topology's `cni:` values and the package
that holds each CNI's spec (kpemu.cni.cni loads it)."""

from __future__ import annotations

# the topology's `cni:` value -> the package that holds the CNI (a test may register a Cni spec itself:
# typed `object` because the spec's module must not be imported here, not even for typing)
CNIS: dict[str, object] = {
    "flannel-vxlan": "kpemu.cni.flannel_vxlan",
    "calico-ipip": "kpemu.cni.calico_ipip",
}
DEFAULT = "flannel-vxlan"


def names() -> tuple[str, ...]:
    """Every CNI name a topology may give, in registry order."""
    return tuple(CNIS)


def expected() -> str:
    """What a `cni:` value must be (the error for one kpemu does not model)."""
    return f"expected {' or '.join(CNIS)}, the CNIs kpemu models"
