"""`kpemu setup --check` covers every runtime kpemu would use, and exits 3 when a needed part is missing."""

from __future__ import annotations

from kpemu import examples
from kpemu.readiness import Facts, exit_code, rows

ALL = Facts((), True, "needed: this kernel lacks ip_vs", True, True, True, "6.1.0-57-amd64 (cache)", None)


def _lines(f: Facts) -> list[str]:
    return [r.line() for r in rows(f, "make setup", "pip install virtme-ng")]


def test_everything_present() -> None:
    assert _lines(ALL) == [
        "ok      host    Debian packages: every one is installed",
        "ok      guest   virtme-ng (Python package): needed: this kernel lacks ip_vs",
        "ok      guest   vng command: needed: this kernel lacks ip_vs",
        "ok      guest   qemu-system-x86_64: needed: this kernel lacks ip_vs",
        "ok      guest   guest kernel: 6.1.0-57-amd64 (cache)",
        "ok      docker  docker engine (container members): usable",
    ]
    assert exit_code(rows(ALL, "", "")) == 0


def test_a_missing_guest_kernel_fails_the_check_where_the_guest_is_needed() -> None:
    f = Facts((), True, "needed: this kernel lacks ip_vs", False, False, True, None, None)
    assert _lines(f)[1:5] == [
        "MISSING guest   virtme-ng (Python package): needed: this kernel lacks ip_vs\n"
        "          fix: pip install virtme-ng",
        "MISSING guest   vng command: needed: this kernel lacks ip_vs\n          fix: pip install virtme-ng",
        "ok      guest   qemu-system-x86_64: needed: this kernel lacks ip_vs",
        "MISSING guest   guest kernel: none in the cache or /boot; needed: this kernel lacks ip_vs\n"
        "          fix: kpemu vm setup (as root)",
    ]
    assert exit_code(rows(f, "", "")) == 3


def test_guest_parts_absent_where_this_kernel_needs_no_guest_pass() -> None:
    f = Facts((), False, "not needed: this kernel has what every scenario needs", False, False, False, None, None)
    assert _lines(f)[4] == ("absent  guest   guest kernel: none in the cache or /boot; not needed: this kernel has "
                            "what every scenario needs\n          fix: kpemu vm setup (as root)")
    assert exit_code(rows(f, "", "")) == 0
    unknown = Facts((), None, "not probed", True, True, True, None, None)  # no root: the need is unknown
    assert exit_code(rows(unknown, "", "")) == 3


def test_missing_packages_and_docker_fail_the_check() -> None:
    f = Facts(("tcpdump", "ipset"), False, "", True, True, True, "k", "dockerd is not installed")
    lines = _lines(f)
    assert lines[0] == "MISSING host    Debian packages: missing tcpdump ipset\n          fix: make setup"
    assert lines[5] == "MISSING docker  docker engine (container members): dockerd is not installed\n" \
                       "          fix: make setup"
    assert exit_code(rows(f, "", "")) == 3


def test_a_checkout_s_examples_lie_outside_the_package() -> None:
    """In a checkout the examples link to the repository's scenarios/, which --update-goldens may rewrite;
    a wheel's lie inside the package (refused: tests/integration/test_wheel.py)."""
    assert not examples.inside_package(examples.resolve("example:nodeport-iptables"))
    assert examples.inside_package(examples.ROOT / "__init__.py")
