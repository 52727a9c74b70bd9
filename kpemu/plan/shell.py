"""A plan as the iproute2 shell script people write by hand: one `ip` / `bridge` / `sysctl` process per
object (the lab's own steps batch them, kpemu.plan.batch). The baseline in `make bench`, and handy for
reading what a lab consists of.
"""

from __future__ import annotations

import shlex

from kpemu.plan.batch import fabric_steps
from kpemu.plan.types import Plan


def plan_to_shell(plan: Plan) -> str:
    """Commands that build the plan's fabric (not its iptables rules), one process per object."""
    out = ["set -e"]
    for step in fabric_steps(plan):
        if step.kind == "run":
            tool, ns = step.argv[0], f" -n {step.ns}" if step.ns else ""
            out += [f"{tool}{ns} {line}" for line in (step.input or "").splitlines()]
        elif step.kind == "sysctl":
            out += [f"ip netns exec {step.ns} sysctl -qw {shlex.quote(key.replace('/', '.'))}={value}"
                    + (" || true" if optional else "") for key, value, optional in step.sysctls]
        elif step.kind == "txcsum-off":
            out += [f"ip netns exec {step.ns} ethtool -K {dev} tx off >/dev/null" for dev in step.devices]
    return "\n".join(out) + "\n"


def plan_teardown_shell(plan: Plan) -> str:
    """Commands that remove the plan's namespaces (and with them everything inside)."""
    return "\n".join(f"ip netns del {ns.name}" for ns in plan.namespaces) + "\n"
