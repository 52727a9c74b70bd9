"""`setup`: the system parts `make setup` installs (Debian packages, a guest kernel), for any installation."""

from __future__ import annotations

import argparse
import os

from kpemu.cli.base import add_command
from kpemu.errors import EnvironmentProblem


def cmd_setup(args: argparse.Namespace) -> int:
    from kpemu import system
    from kpemu.errors import InputError

    try:
        parts = system.parts_asked(args.with_, args.all)
    except ValueError as e:
        raise InputError(f"kpemu setup --with: {e}") from None
    if args.check:
        from kpemu import readiness

        found = readiness.rows(readiness.facts(parts), system.setup_hint(),
                               system.python_hint("virtme-ng>=1.30,<2"))
        for row in found:
            print(row.line())
        code = readiness.exit_code(found)
        print("every part kpemu would use here is installed" if code == 0 else
              "kpemu would use a part that is MISSING here (exit 3)")
        return code
    missing = system.missing_packages(parts)
    if missing:
        if os.geteuid() != 0:
            raise EnvironmentProblem(f"installing {' '.join(missing)} needs root", system.setup_hint())
        if not system.have_apt():
            raise EnvironmentProblem(f"no apt-get here: install the equivalents of {' '.join(missing)} "
                                     "with this system's package manager")
        print(f"setup: installing Debian packages ({', '.join(parts)}): {' '.join(missing)}")
        system.install_packages(missing)
    else:
        print(f"setup: every Debian package of {', '.join(parts)} is installed")
    left = [p for p in system.OPTIONAL if p not in parts]
    if left:
        print(f"setup: not asked for: {', '.join(left)} (sudo kpemu setup --with {','.join(left)}, or --all)")
    if "guest" in parts:
        try:
            import virtme_ng  # noqa: F401
        except ImportError:
            print(f"setup: the guest runtime also needs virtme-ng: {system.python_hint('virtme-ng>=1.30,<2')}")
        from kpemu.runtimes import setup_guest_kernel

        res = setup_guest_kernel(if_needed=True)
        print(f"setup: guest kernel {res.action}" + (f" ({res.reason})" if res.reason else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    from kpemu.system import OPTIONAL

    s = add_command(sub, "setup", "install what kpemu needs from the system: its core Debian packages, and the "
                                  "optional parts asked for (root)",
                    ["sudo kpemu setup", "sudo kpemu setup --with guest,docker", "sudo kpemu setup --all",
                     "kpemu setup --check --with guest"])
    s.add_argument("--with", dest="with_", metavar="PART[,PART]", default=None,
                   help=f"optional parts too: {', '.join(OPTIONAL)} (guest: QEMU and, when this kernel lacks "
                        "IPVS/IPIP/dummy, a guest kernel)")
    s.add_argument("--all", action="store_true", help="every part (what make setup installs)")
    s.add_argument("--check", action="store_true", help="only check: the core and the parts asked for, and the "
                   "guest where this kernel needs it (exit 3 when one is missing)")
    s.set_defaults(func=cmd_setup)
