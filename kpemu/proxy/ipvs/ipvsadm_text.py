"""IPVS virtual / real servers as data, and the text `ipvsadm -Sn` prints for them.

Format facts (ipvsadm 1.26 source, ipvsadm.c `print_service_entry` / libipvs `ipvs_cmp_*`, and the
format strings of the installed ipvsadm v1.31 binary):

- service line: `-A -t|-u|--sctp-service ADDR:PORT -s SCHED`, then ` -p TIMEOUT` if persistent
  (` -M MASK` only when the netmask is not 255.255.255.255), ` --pe NAME`, ` -b FLAGS`
  (scheduler flags, e.g. `mh-port`), ` ops`.
- real server line: `-a -t ADDR:PORT -r RADDR:RPORT -m -w WEIGHT` (`-m` masquerading, `-g`
  direct routing, `-i` tunnel).
- no header in rule format; services sorted by (fwmark, af, protocol number, address, port),
  real servers by (address, port). Addresses compare as `int(ntohl(a) - ntohl(b))`, i.e. a
  32-bit wrap-around difference: 192.168.x sorts *before* 10.x. `_addr_cmp` reproduces it.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

PROTO_NUMBER = {"TCP": 6, "UDP": 17, "SCTP": 132}
_SWITCH = {"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service"}
FLAG_PERSISTENT = 0x1
FLAG_SCHED2 = 0x10  # kube-proxy's FlagSourceHash; ipvsadm names it sh-port / mh-port


@dataclass(frozen=True)
class RealServer:
    """One IPVS destination (kube-proxy: weight 1, masquerading)."""

    address: str
    port: int
    weight: int = 1


@dataclass(frozen=True)
class VirtualServer:
    """One IPVS service as kube-proxy creates it (netmask always /32)."""

    protocol: str  # TCP | UDP | SCTP
    address: str
    port: int
    scheduler: str = "rr"
    flags: int = 0  # FLAG_PERSISTENT, FLAG_SCHED2
    timeout: int = 0  # persistence timeout (seconds) when FLAG_PERSISTENT
    real_servers: tuple[RealServer, ...] = ()
    kind: str = "clusterIP"  # clusterIP | nodePort | externalIP | loadBalancer (for humans)

    @property
    def name(self) -> str:
        """`-t 10.96.0.1:443` as ipvsadm prints it in rule format."""
        return f"{_SWITCH[self.protocol]} {_hostport(self.address, self.port)}"


def _hostport(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _addr_cmp(a: str, b: str) -> int:
    return _int32(int(ipaddress.IPv4Address(a)) - int(ipaddress.IPv4Address(b)))


def _svc_cmp(x: VirtualServer, y: VirtualServer) -> int:
    return (
        (PROTO_NUMBER[x.protocol] - PROTO_NUMBER[y.protocol])
        or _addr_cmp(x.address, y.address)
        or (x.port - y.port)
    )


def _rs_cmp(x: RealServer, y: RealServer) -> int:
    return _addr_cmp(x.address, y.address) or (x.port - y.port)


def _total(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def sort_services(services: list[VirtualServer] | tuple[VirtualServer, ...]) -> list[VirtualServer]:
    """Services in ipvsadm's listing order (IPv4 only).

    The wrap-around comparison is not transitive when addresses span more than 2^31 (e.g.
    10.x, 127.x and 192.168.x together); then the real order depends on the kernel's hash order
    and glibc's qsort. kpemu pre-sorts by a total order so its answer is at least deterministic.
    """
    pre = sorted(services, key=lambda v: (PROTO_NUMBER[v.protocol], _total(v.address), v.port))
    return sorted(pre, key=functools.cmp_to_key(_svc_cmp))


def sort_real_servers(rs: list[RealServer] | tuple[RealServer, ...]) -> list[RealServer]:
    """Real servers in ipvsadm's listing order (same caveat as `sort_services`)."""
    pre = sorted(rs, key=lambda r: (_total(r.address), r.port))
    return sorted(pre, key=functools.cmp_to_key(_rs_cmp))


def _sched_flags(vs: VirtualServer) -> str:
    if not vs.flags & FLAG_SCHED2:
        return ""
    prefix = "mh" if vs.scheduler == "mh" else "sh"
    return f" -b {prefix}-port"


def service_line(vs: VirtualServer) -> str:
    """The `-A ...` line for one virtual server."""
    line = f"-A {vs.name} -s {vs.scheduler}"
    if vs.flags & FLAG_PERSISTENT:
        line += f" -p {vs.timeout}"
    return line + _sched_flags(vs)


def ipvsadm_save(services: list[VirtualServer] | tuple[VirtualServer, ...]) -> str:
    """Exactly what `ipvsadm -Sn` prints for these virtual servers ("" when there are none)."""
    lines: list[str] = []
    for vs in sort_services(services):
        lines.append(service_line(vs))
        lines.extend(
            f"-a {vs.name} -r {_hostport(rs.address, rs.port)} -m -w {rs.weight}"
            for rs in sort_real_servers(vs.real_servers)
        )
    return "".join(line + "\n" for line in lines)


def parse_ipvsadm_save(text: str) -> list[VirtualServer]:
    """Virtual servers from `ipvsadm -Sn` output (the options kube-proxy uses)."""
    by_name: dict[str, VirtualServer] = {}
    order: list[str] = []
    for line in text.splitlines():
        tok = line.split()
        if not tok:
            continue
        proto = {"-t": "TCP", "-u": "UDP", "--sctp-service": "SCTP"}[tok[1]]
        name = f"{tok[1]} {tok[2]}"
        addr, _, port = tok[2].rpartition(":")
        opts = dict(zip(tok[3::2], tok[4::2], strict=False))
        if tok[0] == "-A":
            flags = FLAG_PERSISTENT if "-p" in opts else 0
            if "-b" in opts and opts["-b"].endswith("-port"):
                flags |= FLAG_SCHED2
            by_name[name] = VirtualServer(proto, addr, int(port), opts["-s"], flags, int(opts.get("-p", 0)))
            order.append(name)
        elif tok[0] == "-a":
            raddr, _, rport = opts["-r"].rpartition(":")
            vs = by_name[name]
            rs = RealServer(raddr, int(rport), int(tok[tok.index("-w") + 1]))
            by_name[name] = VirtualServer(
                vs.protocol, vs.address, vs.port, vs.scheduler, vs.flags, vs.timeout, (*vs.real_servers, rs)
            )
    return [by_name[n] for n in order]


def canonical_ipvsadm(text: str) -> str:
    """Real `ipvsadm -Sn` output re-rendered through `ipvsadm_save` (order made deterministic)."""
    return ipvsadm_save(parse_ipvsadm_save(text))
