"""Hostile input: each case is a file (or a scenario naming one) and what `kpemu validate` must say.

Every case exits 2 with one message naming the file and the field (or line), without a traceback,
and scenario cases are also refused by `kpemu run` before anything is created (no namespace, no
state file, no output folder). How long the slowest case takes is measured by
`scripts/bench.py hostile`, not asserted here.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kpemu.cli import main
from kpemu.inputs.yaml_reader import MAX_FILE_BYTES
from tests.helpers import TOPOLOGIES, without_places

GOOD = yaml.safe_load((TOPOLOGIES / "flannel-vxlan.yaml").read_text())
GOOD_TEXT = (TOPOLOGIES / "flannel-vxlan.yaml").read_text()


@dataclass(frozen=True)
class Case:
    """A hostile input: `make(dir)` writes it and returns the path given to kpemu; `expected` are the
    fragments the error must contain ("{file}" stands for that path, "{topo}" for the topology file)."""

    name: str
    make: Callable[[Path], Path]
    expected: tuple[str, ...]
    scenario: bool = False


def _write(name: str, content: str | bytes) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        return p
    return make


def _topology(change: Callable[[dict], None]) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        data = yaml.safe_load(GOOD_TEXT)
        change(data)
        p = d / "topo.yaml"
        p.write_text(yaml.safe_dump(data, sort_keys=False))
        return p
    return make


def _scenario(topology: str | Callable[[Path], str], extra: str = "") -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        topo = topology(d) if callable(topology) else topology
        p = d / "scn.yaml"
        p.write_text(f"name: hostile\ntopology: {topo}\n{extra}flows:\n"
                     "  - {name: f, from: client, to: {node: node1, nodePort: 30080}}\n")
        return p
    return make


def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _sized(name: str, size: int) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        with p.open("wb") as f:
            f.write(b"# padding\n")
            f.truncate(size)  # sparse: the size is what kpemu must refuse before reading
        return p
    return make


def _fifo(d: Path) -> Path:
    p = d / "fifo.yaml"
    os.mkfifo(p)
    return p


def _dir(d: Path) -> Path:
    p = d / "dir.yaml"
    p.mkdir()
    return p


def _link_to(target: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / "link.yaml"
        p.symlink_to(target)
        return p
    return make


def _many_pods(n: int) -> Callable[[Path], Path]:
    """The shipped topology with `n` more pods, one compact line each."""
    return _write("pods.yaml", GOOD_TEXT.replace("pods:\n", "pods:\n" + "".join(
        f"  - {{name: p{i}, node: node1, ip: 10.244.0.200}}\n" for i in range(n)), 1))


DUP_TOP = GOOD_TEXT.replace("nodes:", "mtu: 1500\nnodes:", 1) + "mtu: 9000\n"
DUP_NESTED = "name: dup\nkubeProxy:\n  mode: iptables\n  mode: ipvs\nnodes: []\n"
LONG = "a" * 250

CASES = [
    # the bytes of the file
    Case("binary file", _write("bin.yaml", bytes(range(256)) * 40), ("{file}: line 2: not UTF-8 text (byte 0x80)",)),
    Case("non-UTF-8 file", _write("latin1.yaml", "name: caf\xe9\n".encode("latin-1")),
         ("{file}: line 1: not UTF-8 text (byte 0xe9)",)),
    Case("non-UTF-8 value", _write("value.yaml", GOOD_TEXT.encode() + b"# \xff\xfe\n"), ("{file}: line", "not UTF-8")),
    Case("NUL byte", _write("nul.yaml", "name: a\n\x00\n"), ("{file}: line 2: a NUL byte",)),
    Case("20 MB file", _sized("big.yaml", 20 * 1024 * 1024), ("{file}: is 20,971,520 bytes", f"{MAX_FILE_BYTES:,}")),
    Case("one byte over the limit", _sized("over.yaml", MAX_FILE_BYTES + 1), ("{file}: is", "over kpemu's limit")),
    Case("empty file", _write("empty.yaml", ""), ("{file}: expected a mapping",)),
    Case("a bare string", _write("str.yaml", "hello\n"), ("{file}: expected a mapping",)),
    Case("not YAML", _write("syntax.yaml", "name: [a\n"), ("{file}: line", "not valid YAML")),
    # what the file is
    Case("directory", _dir, ("{file}: is a directory with no Kubernetes manifests in it; expected a regular YAML "
                             "file or a directory of manifests",)),
    Case("/dev/zero", lambda d: Path("/dev/zero"), ("/dev/zero: is a character device",)),
    Case("symlink to /dev/zero", _link_to("/dev/zero"), ("{file}: is a character device",)),
    Case("FIFO", _fifo, ("{file}: is a FIFO",)),
    Case("missing file", lambda d: d / "nope.yaml", ("{file}: cannot read the file: No such file",)),
    # YAML structure
    Case("alias bomb", _write("bomb.yaml", _bomb()),
         ("{file}:", "more than 50,000 values once its YAML aliases are expanded")),
    Case("60,000 values", _write("values.yaml", "x: [" + ",".join(["1"] * 60_000) + "]\n"),
         ("{file}: x[49999]: more than 50,000 values; a 48-node, 1,440-pod lab has about 24,000",)),
    Case("1,001 aliases", _write("aliases.yaml", "a: &a x\nb: [" + ", ".join(["*a"] * 1001) + "]\n"),
         ("{file}: b[1000]: more than 1000 YAML aliases",)),
    Case("10,000-deep flow nesting", _write("deep.yaml", "a: " + "[" * 10000 + "]" * 10000 + "\n"),
         ("{file}:", "nested more than 32 levels deep")),
    Case("100-deep block nesting",
         _write("deepblock.yaml", "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "x\n"),
         ("{file}: k0.k1.k2", "nested more than 32 levels deep")),
    Case("duplicate top-level key", _write("dup.yaml", DUP_TOP),
         ("{file}: mtu: key 'mtu' is given twice (line", "YAML would keep only the last")),
    Case("duplicate nested key", _write("dup2.yaml", DUP_NESTED),
         ("{file}: kubeProxy.mode: key 'mode' is given twice (line 3 and line 4)",)),
    Case("duplicate key in a list item", _write("dup3.yaml", "nodes:\n  - name: a\n    ip: 1.1.1.1\n    ip: 1.1.1.2\n"),
         ("{file}: nodes[0].ip: key 'ip' is given twice (line 3 and line 4)",)),
    Case("5,000-digit integer", _write("int.yaml", GOOD_TEXT + "mtu: " + "9" * 5000 + "\n"),
         ("{file}:", "an integer of 5,000 digits")),
    Case("20-digit integer", _topology(lambda t: t.update(mtu=10**19)), ("{file}:", "an integer of 20 digits")),
    Case("!!binary value", _write("b64.yaml", GOOD_TEXT.replace("name: flannel", "name: !!binary aGk=", 1)),
         ("{file}:", "a !!binary value")),
    Case("100,000-character name", _topology(lambda t: t.update(name="a" * 100_000)),
         ("{file}: name: expected a Kubernetes name", "...)")),
    # what the kernel accepts
    Case("pod name too long for a namespace name", _topology(lambda t: t["pods"][0].update(name=LONG)),
         ("{file}: pods[0].name: name is 250 characters", "over the kernel's 255")),
    Case("external name too long for a namespace name", _topology(lambda t: t["externals"][0].update(name=LONG)),
         ("{file}: externals[0].name: name is 250 characters",)),
    # lab size: the file's bounds (what this machine can build is tests/unit/test_lab_limits.py)
    Case("30,000 pods", _many_pods(29996), ("{file}: is", f"over kpemu's limit of {MAX_FILE_BYTES:,} bytes")),
    # scenarios and the topology file they name
    Case("scenario topology: /etc/passwd", _scenario("/etc/passwd"),
         ("{file}: topology: '/etc/passwd': /etc/passwd is not a topology",), scenario=True),
    Case("scenario topology: a directory", _scenario(lambda d: str(_dir(d))),
         ("{file}: topology:", "is a directory"), scenario=True),
    Case("scenario topology: /dev/zero", _scenario("/dev/zero"),
         ("{file}: topology: '/dev/zero': /dev/zero: is a character device",), scenario=True),
    Case("scenario topology: a FIFO", _scenario(lambda d: str(_fifo(d))), ("{file}: topology:", "is a FIFO"),
         scenario=True),
    Case("scenario topology: 20 MB", _scenario(lambda d: str(_sized("big.yaml", 20 << 20)(d))),
         ("{file}: topology:", "is 20,971,520 bytes"), scenario=True),
    Case("scenario topology: an alias bomb", _scenario(lambda d: str(_write("bomb.yaml", _bomb())(d))),
         ("{file}: topology:", "alias bomb"), scenario=True),
    Case("scenario topology: binary", _scenario(lambda d: str(_write("bin.yaml", bytes(range(256)))(d))),
         ("{file}: topology:", "not UTF-8"), scenario=True),
    Case("scenario topology: missing", _scenario("nope.yaml"), ("{file}: topology: 'nope.yaml': no such file",),
         scenario=True),
    Case("scenario topology: duplicate key", _scenario(lambda d: str(_write("dup.yaml", DUP_TOP)(d))),
         ("{file}: topology:", "key 'mtu' is given twice"), scenario=True),
    Case("scenario with a duplicate key", _scenario(str(TOPOLOGIES / "flannel-vxlan.yaml"), "settle: 1\nsettle: 2\n"),
         ("{file}: settle: key 'settle' is given twice (line 3 and line 4)",), scenario=True),
    Case("scenario alias bomb",
         _scenario(str(TOPOLOGIES / "flannel-vxlan.yaml"), "x:\n" + textwrap.indent(_bomb(), "  ")),
         ("{file}: x.a", "alias bomb"), scenario=True),
]


def _expect(case: Case, path: Path, err: str) -> None:
    err = without_places(err, path)
    for frag in case.expected:
        assert frag.format(file=path) in err, f"{case.name}: {frag.format(file=path)!r} not in:\n{err}"
    assert "Traceback" not in err


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_validate_refuses(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = case.make(tmp_path)
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "0 of 1 file(s) valid\n"
    _expect(case, path, err)


def _created() -> list[str]:
    """What a run of the scenario lab `hostile` would have created (other labs may come and go meanwhile)."""
    from kpemu.statedir import STATE_DIR

    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    state = os.listdir(STATE_DIR) if STATE_DIR.is_dir() else []
    return [n for n in netns if n.startswith("kp-hostile-")] + [f for f in state if f.startswith("hostile.")]


@pytest.mark.parametrize("case", [c for c in CASES if c.scenario], ids=[c.name for c in CASES if c.scenario])
def test_run_refuses_before_creating_anything(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = case.make(tmp_path)
    assert main(["run", str(path), "--runtime", "host", "--out", str(tmp_path / "out")]) == 2
    _expect(case, path, capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
    assert _created() == []


def test_multi_document_files_are_bounded_the_same_way(tmp_path: Path) -> None:
    from kpemu.errors import InputError
    from kpemu.inputs.yaml_reader import read_yaml

    ok = tmp_path / "ok.yaml"
    ok.write_text("kind: Service\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: &m {name: b}\nx: *m\n")
    assert read_yaml(ok, documents=True) == [{"kind": "Service", "metadata": {"name": "a"}},
                                       {"kind": "Pod", "metadata": {"name": "b"}, "x": {"name": "b"}}]
    dup = tmp_path / "dup.yaml"
    dup.write_text("kind: Service\n---\nkind: Pod\nmetadata:\n  name: a\n  name: b\n")
    with pytest.raises(InputError, match=r"metadata.name: key 'name' is given twice \(line 5 and line 6\)"):
        read_yaml(dup, documents=True)
