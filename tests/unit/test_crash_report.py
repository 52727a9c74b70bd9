"""A dead guest's console in an error message: the oops that killed it (its fault, RIP, call trace), not
only the register dump and panic line at the end."""

from __future__ import annotations

from pathlib import Path

from kpemu.runtimes.qemu import crash_report

BOOT = [f"[    {i}.000000] booting line {i}" for i in range(40)]
OOPS = [
    "[   56.256801] BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "[   56.256812] #PF: supervisor read access in kernel mode",
    "[   56.256900] RIP: 0010:ipip_tunnel_xmit+0x21/0x90 [ipip]",
    "[   56.256950] Call Trace:",
    "[   56.256960]  <IRQ>",
]
REGS = [f"[   56.2570{i:02d}] R{i}: 0000000000000000" for i in range(30)]
END = ["[   56.257276] Kernel panic - not syncing: Fatal exception in interrupt",
       "[   56.258259] Kernel Offset: 0x4c00000 from 0xffffffff81000000"]


def test_the_oops_that_killed_the_guest_leads_the_report(tmp_path: Path) -> None:
    console = tmp_path / "guest-console.log"
    console.write_text("\n".join(BOOT + OOPS + REGS + END) + "\n")
    assert crash_report(console, lines=8).splitlines() == [*OOPS, *REGS[:3], "...", *END]


def test_a_console_without_an_oops_is_its_last_lines(tmp_path: Path) -> None:
    console = tmp_path / "guest-console.log"
    console.write_text("\n".join(BOOT) + "\n")
    assert crash_report(console, lines=3).splitlines() == BOOT[-3:]
    assert crash_report(tmp_path / "absent.log") == "(no console output)"
