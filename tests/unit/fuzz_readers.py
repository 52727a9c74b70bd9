"""A deterministic mutation fuzzer for kpemu's offline readers (used by test_fuzz_readers and by
`scripts/bench.py readers`).

Each target is a real dump or a real set of Kubernetes objects and the command line that reads it
(`trace --iptables-save/--nft/--ipvs`, `check-node`, `import`); each case is the seed mutated once
or a few times (truncated, duplicated and swapped lines, a line repeated a thousand times, flipped
digits, a changed character, garbage and non-UTF-8 bytes, huge and non-finite numbers, anonymised
addresses, jump loops, very long lines; for objects also a field of the wrong shape). The contract
every case must keep: the CLI answers 0, 1 or 2 within CPU_BOUND CPU-seconds, never a traceback,
and a refusal (2) names the file it refuses.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import io
import os
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from kpemu.cli import build_parser
from kpemu.errors import InputError, KpemuError
from tests.helpers import DATA, ROOT


@dataclass(frozen=True)
class Target:
    """A seed file and the command reading it; `{f}` in `argv` stands for the mutated file."""

    name: str
    seed: Path
    argv: tuple[str, ...]
    loop: Callable[[list[str], random.Random], list[str]]  # adds a jump loop to the seed's lines


@dataclass(frozen=True)
class CaseResult:
    """How one case ended: exit code, stderr, the traceback (when one escaped) and the time taken."""

    target: str
    mutation: str
    code: int | None
    stderr: str
    traceback: str | None
    seconds: float


def _ipt_loop(lines: list[str], rng: random.Random) -> list[str]:
    chains = [m[1] for line in lines if (m := re.match(r":(KUBE-\S+)", line))]
    if not chains:
        return lines
    a, b = rng.choice(chains), rng.choice(chains)
    rules = [i for i, line in enumerate(lines) if line.startswith("-A ") or re.match(r"\[\d+:\d+\] -A ", line)]
    if not rules:
        return lines
    at = max(rules)
    return [*lines[:at + 1], f"-A {a} -j {b}", f"-A {b} -j {a}", *lines[at + 1:]]


def _nft_loop(lines: list[str], rng: random.Random) -> list[str]:
    chains = [(i, m[1]) for i, line in enumerate(lines) if (m := re.match(r"\s*chain (\S+) \{", line))]
    if not chains:
        return lines
    (i, a), (_, b) = rng.choice(chains), rng.choice(chains)
    return [*lines[:i + 1], f"\t\tjump {b}", *lines[i + 1:]] if a != b else [*lines[:i + 1], f"\t\tjump {a}",
                                                                            *lines[i + 1:]]


def _no_loop(lines: list[str], rng: random.Random) -> list[str]:
    return lines


_TRACE = ("trace", "--node", "N", "--src", "10.242.72.50")
TARGETS = (
    Target("trace-iptables", DATA / "seed-001.iptables-save",
           (*_TRACE, "--node-ip", "192.168.49.2", "--dst", "192.168.49.2:30180", "--iptables-save", "{f}"), _ipt_loop),
    Target("check-node-iptables", DATA / "seed-001.iptables-save",
           ("check-node", "topologies/seed-001.yaml", "--node", "minikube", "--iptables-save", "{f}"), _ipt_loop),
    Target("trace-ipvs", DATA / "seed-000-node1.ipvs",
           (*_TRACE, "--node-ip", "10.246.198.17", "--dst", "10.246.198.17:30080", "--ipvs", "{f}", "--ipset",
            str(DATA / "seed-000-node1.ipset")), _no_loop),
    Target("trace-ipset", DATA / "seed-000-node1.ipset",
           (*_TRACE, "--node-ip", "10.246.198.17", "--dst", "10.246.198.17:30080", "--ipvs",
            str(DATA / "seed-000-node1.ipvs"), "--ipset", "{f}"), _no_loop),
    Target("trace-nft", DATA / "nft-dump" / "node1.nft",
           (*_TRACE, "--node-ip", "192.168.1.100", "--dst", "192.168.1.100:30080", "--nft", "{f}"), _nft_loop),
    Target("check-node-nft", DATA / "nft-dump" / "node1-handles.nft",
           ("check-node", str(DATA / "nft-dump" / "cluster.yaml"), "--node", "node1", "--nft", "{f}"), _nft_loop),
    Target("trace-iptables-c", DATA / "pasted" / "kubeadm-1461.iptables-save-c",
           (*_TRACE, "--node-ip", "192.168.49.2", "--dst", "192.168.49.2:6444", "--iptables-save", "{f}"), _ipt_loop),
    Target("trace-iptables-S", DATA / "pasted" / "seed-001.iptables-S",
           (*_TRACE, "--node-ip", "192.168.49.2", "--dst", "192.168.49.2:30180", "--iptables-save", "{f}"), _no_loop),
    Target("trace-fragment", DATA / "pasted" / "debug-service.fragment",
           (*_TRACE, "--node-ip", "192.168.1.5", "--dst", "10.0.1.175:80", "--iptables-save", "{f}"), _no_loop),
    Target("trace-ipvsadm-Ln", DATA / "pasted" / "opsnull-251.ipvsadm-Ln",
           (*_TRACE, "--node-ip", "10.253.102.0", "--dst", "10.254.0.1:443", "--ipvs", "{f}", "--ipset",
            str(DATA / "pasted" / "sealos-2108.ipset-list")), _no_loop),
    Target("trace-ipset-list", DATA / "pasted" / "sealos-2108.ipset-list",
           (*_TRACE, "--node-ip", "10.253.102.0", "--dst", "10.254.0.1:443", "--ipvs",
            str(DATA / "pasted" / "opsnull-251.ipvsadm-Ln"), "--ipset", "{f}"), _no_loop),
    Target("trace-nft-json", DATA / "nft-dump" / "beside-docker.json",
           (*_TRACE, "--node-ip", "192.168.1.100", "--dst", "192.168.1.100:30080", "--nft", "{f}"), _no_loop),
    Target("import", DATA / "nft-dump" / "objects.yaml", ("import", "{f}"), _no_loop),
    Target("import-cluster", DATA / "k8s" / "seed-001.yaml", ("import", "{f}"), _no_loop),
)

_HUGE = ("9" * 5000, "4294967296", "65536", "-1", "inf", "nan", "1e309", "0x1ffffffff", "0", "x")
_GARBAGE = (b"\xff\xfe", b"\x80", b"\x00", b"{", b"}", b'"', b"\\", b"!", b"-j", b" -m", b"/", b":", b",", b" . ")


def _lines_mutation(text: str, rng: random.Random, target: Target) -> tuple[str, str]:
    lines = text.splitlines()
    n = len(lines)
    kind = rng.randrange(9)
    i, j = rng.randrange(n), rng.randrange(n)
    if kind == 0:
        return "truncate-lines", "\n".join(lines[:i])
    if kind == 1:
        return "truncate-bytes", text[:rng.randrange(len(text))]
    if kind == 2:
        return "duplicate-line", "\n".join([*lines[:i], lines[i], *lines[i:]])
    if kind == 3:
        lines[i], lines[j] = lines[j], lines[i]
        return "swap-lines", "\n".join(lines)
    if kind == 4:
        return "delete-line", "\n".join(lines[:i] + lines[i + 1:])
    if kind == 5:
        return "repeat-line-1000", "\n".join([*lines[:i], *[lines[i]] * 1000, *lines[i + 1:]])
    if kind == 6:
        return "jump-loop", "\n".join(target.loop(lines, rng))
    if kind == 7:
        return "long-line", "\n".join([*lines[:i], " ".join([lines[i]] * rng.choice((50, 500))), *lines[i + 1:]])
    return "anonymised-address", re.sub(r"\d+\.\d+\.\d+\.\d+", "x.x.x.x", text, count=rng.randrange(1, 4))


def _char_mutation(text: str, rng: random.Random) -> tuple[str, str]:
    digits = [m.start() for m in re.finditer(r"\d", text)]
    kind = rng.randrange(4)
    if kind == 0 and digits:
        at = rng.choice(digits)
        return "flip-digit", text[:at] + rng.choice("0123456789") + text[at + 1:]
    if kind == 1:
        runs = list(re.finditer(r"\d+", text))
        if runs:
            m = rng.choice(runs)
            return "huge-number", text[:m.start()] + rng.choice(_HUGE) + text[m.end():]
    if kind == 2:
        at = rng.randrange(len(text))
        return "change-char", text[:at] + chr(rng.randrange(32, 127)) + text[at + 1:]
    at = rng.randrange(len(text))
    return "delete-char", text[:at] + text[at + 1:]


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@functools.lru_cache(maxsize=8)
def _documents(text: str) -> list[object]:
    return list(yaml.load_all(text, Loader=_LOADER))


def _shape_mutation(text: str, rng: random.Random) -> tuple[str, str] | None:
    """A field of a Kubernetes object replaced by a value of another shape (a list, a string, ...)."""
    docs = copy.deepcopy(_documents(text))
    spots: list[tuple[object, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                spots.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for k, v in enumerate(node):
                spots.append((node, k))
                walk(v)

    for d in docs:
        walk(d)
    if not spots:
        return None
    parent, key = rng.choice(spots)
    parent[key] = rng.choice(([], {}, "x", 7, None, True, -1, 99999999999, [1, 2], {"a": "b"}, "::1", "1.2.3"))
    return "wrong-shape", yaml.dump_all(docs, Dumper=_DUMPER, sort_keys=False)


# A case this long is mutated no further: one more step may repeat its longest line a thousand times.
MAX_CHAINED_CHARS = 100_000


def mutate(seed_text: str, rng: random.Random, target: Target) -> tuple[str, bytes]:
    """One mutated copy of the seed: (what was done, the file's bytes)."""
    if target.name.startswith("import") and rng.random() < 0.4:
        got = _shape_mutation(seed_text, rng)
        if got:
            return got[0], got[1].encode()
    text, what = seed_text, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if what and len(text) > MAX_CHAINED_CHARS:  # a long line repeated a thousand times: gigabytes
            break
        name, text = (_lines_mutation(text, rng, target) if rng.random() < 0.5 else _char_mutation(text, rng)) \
            if text else ("empty", text)
        what.append(name)
    data = text.encode()
    if rng.random() < 0.1:
        at = rng.randrange(len(data) + 1)
        junk = rng.choice(_GARBAGE)
        data = data[:at] + junk + data[at:]
        what.append(f"garbage-{junk!r}")
    return "+".join(what), data


def case_path(target: Target, folder: Path) -> Path:
    """Where a case of `target` is written (the same file for every case of the target)."""
    return folder / f"{target.name}{target.seed.suffix}"


@functools.cache
def _arguments(target: Target, folder: Path) -> argparse.Namespace:
    """The target's command line parsed once (as kpemu.cli.main parses it); each case rewrites the file."""
    argv = [str(case_path(target, folder)) if a == "{f}" else a for a in target.argv]
    return build_parser().parse_args(argv)


CPU_BOUND = 20.0  # CPU-seconds one case may take (a hang); CPU time, so a busy machine does not trip it


class Hang(BaseException):
    """A case ran past CPU_BOUND."""


def _hang(signum: int, frame: object) -> None:
    raise Hang(f"hang: more than {CPU_BOUND:g} CPU-seconds on one input")


def run_case(target: Target, mutation: str, data: bytes, folder: Path) -> CaseResult:
    """Run the target's command on `data` in-process, with kpemu.cli.main's error handling; a
    traceback is caught and kept, not raised; a case past CPU_BOUND is stopped and kept as a hang."""
    case_path(target, folder).write_bytes(data)
    args = _arguments(target, folder)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    started = time.perf_counter()
    code: int | None = None
    trace = None
    previous = signal.signal(signal.SIGVTALRM, _hang)
    signal.setitimer(signal.ITIMER_VIRTUAL, CPU_BOUND)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = int(args.func(args))
            except KpemuError as e:  # what kpemu.cli.main prints and exits with
                print(f"kpemu: {e}" if not isinstance(e, InputError) else str(e), file=sys.stderr)
                code = e.exit_code
    except Hang as e:
        trace = str(e)
    except BaseException as e:
        trace = "".join(traceback.format_exception(e))
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
        os.chdir(cwd)
    return CaseResult(target.name, mutation, code, err.getvalue(), trace, time.perf_counter() - started)


def violation(r: CaseResult, path: str) -> str | None:
    """What breaks the readers' contract in a result (None when it is kept)."""
    if r.traceback is not None and r.traceback.startswith("hang: "):
        return r.traceback
    if r.traceback is not None:
        return f"traceback: {r.traceback.strip().splitlines()[-1]}"
    if r.code not in (0, 1, 2):
        return f"exit {r.code}"
    if r.code == 2 and path not in r.stderr:
        return f"a refusal that does not name the file: {r.stderr.strip()[:200]!r}"
    return None


def cases(target: Target, per_target: int, seed: int = 20) -> Iterator[tuple[str, bytes]]:
    """`per_target` mutated cases of `target`, the same ones every time (a fixed seed per target), made
    one at a time so a soak's thousands of cases are never all in memory."""
    rng = random.Random(f"{seed}:{target.name}")
    text = target.seed.read_text()
    for _ in range(per_target):
        yield mutate(text, rng, target)
