"""`setup`: the system parts `make setup` installs (Debian packages, a guest kernel), for any installation."""

from __future__ import annotations

import argparse
import os

from kpemu.cli.base import add_command
from kpemu.errors import EnvironmentProblem


def cmd_setup(args: argparse.Namespace) -> int:
    from kpemu import system

    if args.check:
        from kpemu import readiness

        found = readiness.rows(readiness.facts(), system.setup_hint(), system.python_hint("virtme-ng>=1.30,<2"))
        for row in found:
            print(row.line())
        code = readiness.exit_code(found)
        print("every part kpemu would use here is installed" if code == 0 else
              "kpemu would use a part that is MISSING here (exit 3)")
        return code
    missing = system.missing_packages()
    if missing:
        if os.geteuid() != 0:
            raise EnvironmentProblem(f"installing {' '.join(missing)} needs root", system.setup_hint())
        if not system.have_apt():
            raise EnvironmentProblem(f"no apt-get here: install the equivalents of {' '.join(missing)} "
                                     "with this system's package manager")
        print(f"setup: installing Debian packages: {' '.join(missing)}")
        system.install_packages(missing)
    else:
        print("setup: every Debian package is installed")
    try:
        import virtme_ng  # noqa: F401
    except ImportError:
        print(f"setup: the vm runtime also needs virtme-ng: {system.python_hint('virtme-ng>=1.30,<2')}")
    if args.vm:
        from kpemu.runtimes import setup_guest_kernel

        res = setup_guest_kernel(if_needed=True)
        print(f"setup: guest kernel {res.action}" + (f" ({res.reason})" if res.reason else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    s = add_command(sub, "setup", "install what kpemu needs from the system: Debian packages and, when this "
                                  "kernel lacks something, a guest kernel (root)",
                    ["sudo kpemu setup", "kpemu setup --check", "sudo kpemu setup --no-vm"])
    s.add_argument("--check", action="store_true", help="only check every runtime kpemu would use: host packages, "
                   "the guest (virtme-ng, QEMU, a guest kernel), docker (exit 3 when a part it would use is missing)")
    s.add_argument("--vm", action=argparse.BooleanOptionalAction, default=True,
                   help="provide a guest kernel when this kernel lacks what a scenario needs (default on)")
    s.set_defaults(func=cmd_setup)
