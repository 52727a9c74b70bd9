"""The bounded YAML reader: how every file kpemu accepts (and standard input) becomes Python values.

`read_yaml` is kpemu's only YAML reader, and it bounds hostile input before and while parsing:
only regular files (never a device, FIFO or directory), at most `MAX_FILE_BYTES`, strict UTF-8
without NUL bytes; then one pass over the parser's events (libyaml's when present) rejects
nesting deeper than `MAX_DEPTH`, more than `MAX_VALUES` values counting each alias as what it
stands for (an alias bomb is refused after reading its few hundred bytes, never expanded), more
than `MAX_ALIASES` aliases, and duplicate mapping keys (YAML would silently keep the last one),
naming both lines. Only then are Python values built, with integers longer than `MAX_INT_DIGITS`
digits and `!!binary` refused. Multi-document files (Kubernetes manifests) are read with
`read_yaml(path, documents=True)`, under the same bounds. The same pass can record the line of every
key and list item (`lines=`), so a field path found wrong later can name its line (`kpemu.model.parse.line_of`).
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from kpemu.errors import InputError, Problem
from kpemu.model.parse import Lines, field_path

# Bounds on parsing, not on lab size (kpemu.model.limits says what this machine can build): a 48-node,
# 1,440-pod, 40-service lab is 128 KB and about 24,000 values in block style; these admit twice that,
# while a hostile file is still read and refused within a second (reading costs ~15 us a value).
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32  # kpemu's schemas nest at most 6 deep
MAX_VALUES = 50_000  # values after alias expansion
MAX_ALIASES = 1_000
MAX_INT_DIGITS = 19  # every integer kpemu reads fits in 64 bits

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Bad(Exception):
    """One problem found while reading: the field path (may be empty) and the message."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path, self.message = path, message


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


@functools.cache
def _read_once(stream: BinaryIO, limit: int) -> bytes:
    """A stream read once: a reader that looks at standard input twice (a scenario or a topology?) sees
    the same text both times."""
    return stream.read(limit + 1)


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; InputError naming the file otherwise.

    The file is checked with stat() before it is opened (opening a device can have effects),
    opened non-blocking, and checked again on the open descriptor; at most `limit`+1 bytes are read
    whatever the file claims its size is.
    """
    file = str(path)
    if file == "-":  # standard input (`kpemu validate -`), under the same bound
        data = _read_once(sys.stdin.buffer, limit)
        if len(data) > limit:
            raise InputError([Problem(file, "", _too_big(len(data), limit))])
        return data
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _Bad("", f"is {_kind(st.st_mode)}; expected a regular YAML file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _Bad("", f"is {_kind(st.st_mode)}; expected a regular YAML file")
            if st.st_size > limit:
                raise _Bad("", _too_big(st.st_size, limit))
            chunks, size = [], 0
            while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as e:
        raise InputError([Problem(file, "", f"cannot read the file: {e.strerror}")]) from None
    except _Bad as e:
        raise InputError([Problem(file, e.path, e.message)]) from None
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputError([Problem(file, "", _too_big(len(data), limit))])
    return data


def _too_big(size: int, limit: int) -> str:
    return (f"is {size:,} bytes, over kpemu's limit of {limit:,} bytes for a topology or scenario file "
            "(a 48-node, 1,440-pod lab is 128 KB)")


def decode_text(data: bytes, file: str) -> str:
    """`data` as UTF-8 text without NUL bytes; InputError with the line of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError([Problem(file, f"line {line}", f"not UTF-8 text (byte 0x{data[e.start]:02x}); kpemu "
                                                        "reads YAML as UTF-8: save the file as UTF-8")]) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError([Problem(file, f"line {line}", "a NUL byte: this is a binary file, not YAML text")])
    return text


@dataclass
class _Frame:
    """A collection being read: its field path, its anchor, and what is known of its keys."""

    path: tuple[int | str, ...]
    anchor: str | None
    mapping: bool
    size: int = 1
    index: int = 0  # items so far (a mapping counts keys and values)
    key: Any = None
    keys: dict[Any, int] = field(default_factory=dict)  # scalar key -> line


def _line(event: Any) -> int:
    return int(event.start_mark.line) + 1



def _check_events(text: str, lines: Lines | None = None) -> None:
    """One pass over the YAML events: nesting depth, alias expansion, duplicate keys (raises _Bad);
    `lines` gets the line of each document, key and list item."""
    loader = _Loader(text)
    stack: list[_Frame] = []
    anchors: dict[str, int] = {}  # anchor -> values it stands for
    aliases = 0
    doc = -1
    try:
        while (event := loader.get_event()) is not None:
            if isinstance(event, yaml.DocumentStartEvent):
                anchors.clear()
                doc += 1
            if not isinstance(event, yaml.NodeEvent | yaml.CollectionEndEvent):
                continue
            parent = stack[-1] if stack else None
            is_key = parent is not None and parent.mapping and parent.index % 2 == 0
            here = () if parent is None else (
                parent.path + ((parent.key,) if parent.mapping else (parent.index,)))
            if lines is not None and not isinstance(event, yaml.CollectionEndEvent) and not is_key:
                lines.setdefault((doc, *here), _line(event))  # a value: where its key or list item is
            if isinstance(event, yaml.CollectionEndEvent):
                done = stack.pop()
                if done.anchor:
                    anchors[done.anchor] = done.size
                if stack:
                    _add(stack[-1], done.size, done.path, aliases)
                continue
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise _Bad(field_path(here), f"more than {MAX_ALIASES} YAML aliases (line {_line(event)}); "
                                                 "write the values out")
                size = anchors.get(event.anchor, 1)
            elif isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise _Bad(field_path(here), f"nested more than {MAX_DEPTH} levels deep (line {_line(event)}); "
                                                 "no kpemu field nests that deep")
                stack.append(_Frame(here, event.anchor, isinstance(event, yaml.MappingStartEvent)))
                if is_key:
                    assert parent is not None
                    parent.key = "?"  # a complex key: not kpemu's kind of YAML, left to the schema
                continue
            else:  # a scalar
                size = 1
                if is_key:
                    assert parent is not None
                    key = event.value
                    if key in parent.keys and key != "<<":
                        raise _Bad(field_path((*parent.path, key)),
                                   f"key {key!r} is given twice (line {parent.keys[key]} and line {_line(event)}); "
                                   "YAML would keep only the last: remove one")
                    parent.keys[key] = _line(event)
                    parent.key = key
                    if lines is not None:
                        lines[(doc, *parent.path, key)] = _line(event)
                if isinstance(event, yaml.ScalarEvent) and event.anchor:
                    anchors[event.anchor] = 1
            if parent is not None:
                _add(parent, size, here, aliases)
            elif size > MAX_VALUES:
                raise _Bad("", _too_many(aliases))
    except yaml.YAMLError as e:
        if "nesting depth" in str(getattr(e, "problem", "")):  # libyaml's own limit, met before ours
            raise _Bad("", f"nested more than {MAX_DEPTH} levels deep; no kpemu field nests that deep") from None
        return  # other syntax errors are reported with their line by the loader itself
    finally:
        loader.dispose()


def _add(frame: _Frame, size: int, where: tuple[int | str, ...], aliases: int) -> None:
    frame.size += size
    frame.index += 1
    if frame.size > MAX_VALUES:
        raise _Bad(field_path(where), _too_many(aliases))


def _too_many(aliases: int) -> str:
    if aliases:
        return (f"more than {MAX_VALUES:,} values once its YAML aliases are expanded (an alias bomb?); kpemu refuses "
                "to expand them: write the values out")
    return f"more than {MAX_VALUES:,} values; a 48-node, 1,440-pod lab has about 24,000"


class _Constructor(_Loader):  # type: ignore[misc, valid-type]
    """The safe loader, refusing integers beyond 64 bits and binary values."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = str(node.value).lstrip("+-").replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            raise _Bad("", f"an integer of {len(digits):,} digits (line {node.start_mark.line + 1}); "
                           f"expected at most {MAX_INT_DIGITS} digits")
        return int(super().construct_yaml_int(node))

    def construct_yaml_binary(self, node: yaml.ScalarNode) -> bytes:
        raise _Bad("", f"a !!binary value (line {node.start_mark.line + 1}); expected text")


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)
_Constructor.add_constructor("tag:yaml.org,2002:binary", _Constructor.construct_yaml_binary)


def _parse(text: str, file: str, many: bool, lines: Lines | None = None) -> Any:
    try:
        _check_events(text, lines)
        loader = _Constructor(text)
        try:
            if not many:
                return loader.get_single_data()
            docs = []
            while loader.check_data():
                docs.append(loader.get_data())
            return docs
        finally:
            loader.dispose()
    except _Bad as e:
        raise InputError([Problem(file, e.path, e.message)]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise InputError([Problem(file, where, f"not valid YAML: {problem}")]) from None
    except RecursionError:  # not reachable after _check_events; kept so no input can raise a traceback
        raise InputError([Problem(file, "", f"nested too deeply; expected at most {MAX_DEPTH} levels")]) from None


def read_text(path: Path) -> str:
    """A bounded, regular, UTF-8 file's text (see `read_bytes` and `decode_text`)."""
    return decode_text(read_bytes(path), str(path))


def read_stdin_yaml(documents: bool = False, lines: Lines | None = None) -> Any:
    """YAML piped on standard input (`kpemu import -`), under the same bounds as a file's."""
    return _parse(decode_text(read_bytes(Path("-")), "-"), "-", many=documents, lines=lines)


def read_yaml(path: Path, documents: bool = False, lines: Lines | None = None) -> Any:
    """Parse one YAML document from a file (`documents`: a list of every `---`-separated document, as
    Kubernetes manifests come), with every bound above; syntax errors name their line. `lines`, when
    given, is filled with the line of every document, key and list item (see `line_of`)."""
    return _parse(read_text(path), str(path), many=documents, lines=lines)

