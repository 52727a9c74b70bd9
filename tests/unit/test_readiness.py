"""`kpemu setup --check` covers every runtime kpemu would use, and exits 3 when a needed part is missing:
the core always, an optional part when asked for, the guest also where this kernel needs it."""

from __future__ import annotations

import pytest

from kpemu import examples, system
from kpemu.readiness import Facts, exit_code, rows

NONE_MISSING = {p: () for p in system.PARTS}
ALL = Facts(NONE_MISSING, True, "needed: this kernel lacks ip_vs", True, True, True, "6.1.0-57-amd64 (cache)", None)


def _lines(f: Facts, hint: str = "sudo kpemu setup") -> list[str]:
    return [r.line() for r in rows(f, hint, "pip install virtme-ng")]


def test_everything_present() -> None:
    assert _lines(ALL) == [
        "ok      host    core packages (namespaces, rules, captures): installed",
        "ok      host    drops packages (drop reasons per packet): installed",
        "ok      host    guest packages (the guest runtime): installed",
        "ok      host    wireshark packages (tshark): installed",
        "ok      host    browser packages (report.html in a browser (tests)): installed",
        "ok      host    docker packages (container members): installed",
        "ok      guest   virtme-ng (Python package): needed: this kernel lacks ip_vs",
        "ok      guest   vng command: needed: this kernel lacks ip_vs",
        "ok      guest   qemu-system-x86_64: needed: this kernel lacks ip_vs",
        "ok      guest   guest kernel: 6.1.0-57-amd64 (cache)",
        "ok      docker  docker engine (container members): usable",
    ]
    assert exit_code(rows(ALL, "", "")) == 0


def test_a_missing_guest_kernel_fails_the_check_where_the_guest_is_needed() -> None:
    f = Facts(NONE_MISSING, True, "needed: this kernel lacks ip_vs", False, False, True, None, None)
    assert _lines(f)[6:10] == [
        "MISSING guest   virtme-ng (Python package): needed: this kernel lacks ip_vs\n"
        "          fix: pip install virtme-ng",
        "MISSING guest   vng command: needed: this kernel lacks ip_vs\n          fix: pip install virtme-ng",
        "ok      guest   qemu-system-x86_64: needed: this kernel lacks ip_vs",
        "MISSING guest   guest kernel: none in the cache or /boot; needed: this kernel lacks ip_vs\n"
        "          fix: kpemu vm setup (as root)",
    ]
    assert exit_code(rows(f, "", "")) == 3


def test_guest_parts_absent_where_this_kernel_needs_no_guest_pass_unless_asked_for() -> None:
    f = Facts(NONE_MISSING, False, "not needed: this kernel has what every scenario needs", False, False, False,
              None, None)
    assert _lines(f)[9] == ("absent  guest   guest kernel: none in the cache or /boot; not needed: this kernel has "
                            "what every scenario needs\n          fix: kpemu vm setup (as root)")
    assert exit_code(rows(f, "", "")) == 0
    asked = Facts(NONE_MISSING, False, "not needed", False, False, False, None, None, ("core", "guest"))
    assert exit_code(rows(asked, "", "")) == 3
    unknown = Facts(NONE_MISSING, None, "not probed", True, True, True, None, None)  # no root: the need is unknown
    assert exit_code(rows(unknown, "", "")) == 3


def test_missing_core_packages_fail_and_optional_ones_only_when_asked() -> None:
    missing = {**NONE_MISSING, "core": ("tcpdump", "ipset"), "wireshark": ("tshark",)}
    f = Facts(missing, False, "", True, True, True, "k", "dockerd is not installed")
    lines = _lines(f)
    assert lines[0] == ("MISSING host    core packages (namespaces, rules, captures): missing tcpdump ipset\n"
                        "          fix: sudo kpemu setup")
    assert lines[3] == ("absent  host    wireshark packages (tshark): missing tshark\n"
                        "          fix: sudo kpemu setup --with wireshark")
    assert lines[10] == ("absent  docker  docker engine (container members): dockerd is not installed\n"
                         "          fix: sudo kpemu setup --with docker")
    assert exit_code(rows(f, "", "")) == 3
    optional_only = Facts({**missing, "core": ()}, False, "", True, True, True, "k", "dockerd is not installed")
    assert exit_code(rows(optional_only, "", "")) == 0
    asked = Facts({**missing, "core": ()}, False, "", True, True, True, "k", "no", ("core", "docker"))
    assert exit_code(rows(asked, "", "")) == 3
    assert _lines(asked, "make setup")[3].endswith("fix: make setup")  # a checkout's setup installs every part


def test_parts_asked() -> None:
    assert system.parts_asked(None, False) == ("core",)
    assert system.parts_asked("guest, docker,guest", False) == ("core", "guest", "docker")
    assert system.parts_asked("x", True) == tuple(system.PARTS)
    with pytest.raises(ValueError, match="no part 'qemu'; the parts are drops, guest, wireshark, browser, docker"):
        system.parts_asked("qemu", False)
    assert set(system.packages("debian", ("core",))).isdisjoint({"qemu-system-x86", "tshark", "chromium"})


def test_a_checkout_s_examples_lie_outside_the_package() -> None:
    """In a checkout the examples link to the repository's scenarios/, which --update-goldens may rewrite;
    a wheel's lie inside the package (refused: tests/integration/test_wheel.py)."""
    assert not examples.inside_package(examples.resolve("example:nodeport-iptables"))
    assert examples.inside_package(examples.ROOT / "__init__.py")
