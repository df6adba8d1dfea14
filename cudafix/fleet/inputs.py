"""Snapshot documents for `cudafix fleet`, however they were gathered.

A directory: every *.json regular file in it (not recursive), one node's document per file.  A
stream (stdin, a file): one or more JSON documents one after the other, with or without
separators — what `cat node*.json`, `srun ... cudafix snapshot` with one output file per node, or a
Kubernetes Job's logs give.  pdsh's output (every line "host: ...", the lines of several hosts
interleaved as they arrive) is demultiplexed: each host's document is reassembled from its own
lines only, and the host is the node's name — a node cannot write into another's document.  Each
document is a `cudafix snapshot` (schema cudafix.snapshot/1) or a `cudafix status --json` document
(its "snapshot" member).

Reading yields documents one at a time (iter_path, iter_stream): `cudafix fleet` keeps one parsed
document in memory at once, not the fleet's.
"""

from __future__ import annotations

import codecs
import collections
import dataclasses
import json
import os
import re
import stat
from typing import Callable, Iterator, List, Optional, Tuple, Union

MAX_DOC_BYTES = 64 << 20  # one snapshot is ~30 KB; this bounds a corrupt or hostile input
# pdsh writes "%s: %s" (host, line); an empty line may have lost its trailing space.
_PDSH_LINE = re.compile(r"([A-Za-z0-9_.-]+):(?: (.*)|)\Z", re.S)
_PARSE_ERRORS = (ValueError, RecursionError)  # RecursionError: nesting deeper than the decoder's stack


@dataclasses.dataclass
class Document:
    """One node's snapshot as parsed JSON, and where it came from."""

    source: str  # file path, or "<stdin>#3", or "<stdin>:node3" (pdsh)
    data: dict
    name: Optional[str] = None  # the transport's name for the node (pdsh's host prefix): it wins


class EngineError(RuntimeError):
    """A cluster engine (Slurm, Ray) could not be used at all: one line for the user."""


@dataclasses.dataclass
class InputError:
    source: str
    message: str


Item = Union[Document, InputError]


def _snapshot_member(data: object) -> Optional[dict]:
    if not isinstance(data, dict):
        return None
    if data.get("schema") == "cudafix.status/1" and isinstance(data.get("snapshot"), dict):
        return data["snapshot"]
    if isinstance(data.get("schema"), str) and data["schema"].startswith("cudafix.snapshot/"):
        return data
    return None


def _not_snapshot(name: str, data: object) -> InputError:
    schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
    return InputError(name, "not a cudafix snapshot (schema %s)" % _short(repr(schema)))


def _short(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "..."


_DECODER = json.JSONDecoder()  # stateless: one for every document, as json.loads keeps one


def _documents(text: str, source: str) -> Iterator[Tuple[Item, int, int]]:
    """Every JSON document in ``text`` (concatenated, whitespace or commas between), with its span."""
    dec = _DECODER
    i, n, k = 0, len(text), 0
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            return
        k += 1
        name = "%s#%d" % (source, k)
        start = i
        try:
            data, i = dec.raw_decode(text, i)
        except _PARSE_ERRORS as exc:
            yield InputError(name, "not JSON: %s" % _short(str(exc) or type(exc).__name__, 120)), start, n
            return  # the rest of the stream cannot be re-synchronised reliably
        snap = _snapshot_member(data)
        yield (_not_snapshot(name, data) if snap is None else Document(name, snap)), start, i


def _pdsh(text: str) -> bool:
    first = text.lstrip("\r\n").split("\n", 1)[0]
    return not first.lstrip().startswith("{") and _PDSH_LINE.match(first.rstrip("\r")) is not None


def _demultiplex(text: str, source: str) -> Iterator[Item]:
    """pdsh output: each host's lines, in their order, form that host's stream (one document)."""
    lines: "collections.OrderedDict[str, List[str]]" = collections.OrderedDict()
    stray = 0
    for line in text.split("\n"):
        m = _PDSH_LINE.match(line.rstrip("\r"))
        if m:
            lines.setdefault(m.group(1), []).append(m.group(2) or "")
        elif line.strip():
            stray += 1
    if stray:  # pdsh prefixes every line a node writes: anything else is not a node's (pdsh's own errors)
        yield InputError(source, "%d line%s without a host prefix (pdsh's own messages?): not used"
                         % (stray, "" if stray == 1 else "s"))
    for host, own in lines.items():
        name = "%s:%s" % (source, host)
        got = list(_documents("\n".join(own), name))
        docs = [d for d, _, _ in got if isinstance(d, Document)]
        errs = [e for e, _, _ in got if isinstance(e, InputError)]
        if errs:
            yield InputError(name, errs[0].message)
        elif len(docs) > 1:
            yield InputError(name, "%d documents from one host: cannot tell which is the node's" % len(docs))
        elif docs:
            yield Document(name, docs[0].data, name=host)


def iter_stream(text: str, source: str) -> Iterator[Item]:
    """The documents of one stream, one at a time (and an InputError for each bad one)."""
    if _pdsh(text):
        yield from _demultiplex(text, source)
        return
    for item, _, _ in _documents(text, source):
        yield item


def parse_stream(text: str, source: str) -> Tuple[List[Document], List[InputError]]:
    """Every document in ``text``: (documents, errors)."""
    return split(iter_stream(text, source))


def read_file(path: str, regular_only: bool) -> Union[bytes, InputError]:
    """The file's bytes.  In a directory only regular files are opened: a FIFO or a device named
    *.json there would block or never end (stat first; O_NONBLOCK + fstat closes the race)."""
    try:
        if regular_only and not stat.S_ISREG(os.stat(path).st_mode):
            return InputError(path, "not a regular file: not opened")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | (os.O_NONBLOCK if regular_only else 0))
    except OSError as exc:
        return InputError(path, "cannot read: %s" % (exc.strerror or exc))
    try:
        st = os.fstat(fd)
        if regular_only and not stat.S_ISREG(st.st_mode):
            return InputError(path, "not a regular file: not read")
        chunks: List[bytes] = []
        size = 0
        want = (st.st_size if regular_only else 0) + 1  # a regular file: one read, then EOF seen
        while size <= MAX_DOC_BYTES:
            chunk = os.read(fd, min(max(want - size, 1 << 16), MAX_DOC_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if regular_only and size < want:
                break  # the whole file (its size as of fstat) is in: no second read for EOF
    except OSError as exc:
        return InputError(path, "cannot read: %s" % (exc.strerror or exc))
    finally:
        os.close(fd)
    if size > MAX_DOC_BYTES:
        return InputError(path, "larger than %d MiB: not a snapshot" % (MAX_DOC_BYTES >> 20))
    return b"".join(chunks)


def node_file(path: str) -> Item:
    """One node's file of a directory: exactly one document (a file is one node's output)."""
    raw = read_file(path, regular_only=True)
    return raw if isinstance(raw, InputError) else node_document(path, raw)


def node_document(path: str, raw: bytes) -> Item:
    """The one document of a node's file, from its bytes."""
    text = raw.decode("utf-8", "replace")
    got = list(_documents(text, path))
    if not got:
        return InputError(path, "empty: no snapshot")
    if len(got) > 1:
        return InputError(path, "%d documents in one node's file: cannot tell which is the node's" % len(got))
    item = got[0][0]
    if isinstance(item, InputError):
        item.source = path
        return item
    item.source = path
    return item


def directory_files(path: str) -> List[str]:
    return [os.path.join(path, name) for name in sorted(os.listdir(path)) if name.endswith(".json")]


def iter_path(path: str) -> Iterator[Item]:
    """A directory of *.json node files, or a file (a stream of one or more documents)."""
    if os.path.isdir(path):
        try:
            names = directory_files(path)
        except OSError as exc:
            yield InputError(path, "cannot read: %s" % (exc.strerror or exc))
            return
        for p in names:
            yield node_file(p)
        return
    try:  # named by the user: a pipe (`--from <(pdsh ...)`) is fine
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        yield InputError(path, "cannot read: %s" % (exc.strerror or exc))
        return
    try:
        first: Optional[Item] = None
        n = 0
        for item in iter_reader(lambda size: os.read(fd, size), path):
            n += 1
            if n == 1:
                first = item  # held back: a file of one document is named by the file
                continue
            if first is not None:
                yield first
                first = None
            yield item
        if first is not None:
            if n == 1 and isinstance(first, Document):
                first.source = path
            yield first
    except OSError as exc:
        yield InputError(path, "cannot read: %s" % (exc.strerror or exc))
    finally:
        os.close(fd)


CHUNK = 1 << 20


def iter_reader(read: Callable[[int], bytes], source: str) -> Iterator[Item]:
    """The documents of a stream as they arrive (``read(n)``: at most n bytes, b"" at its end):
    memory holds the document being read and one chunk, not the stream -- `--from -` with 100,000
    nodes stays flat.  pdsh's output is the exception: its hosts' lines interleave, so it is read
    whole and demultiplexed (_demultiplex)."""
    utf8 = codecs.getincrementaldecoder("utf-8")("replace")
    state = {"buf": "", "eof": False}

    def fill(at: int, size: int) -> str:  # drop what was parsed, read ``size`` more
        chunk = read(size)
        state["eof"] = not chunk
        state["buf"] = state["buf"][at:] + utf8.decode(chunk, final=not chunk)
        return state["buf"]

    buf = fill(0, CHUNK)
    while not state["eof"] and "\n" not in buf.lstrip("\r\n"):
        buf = fill(0, CHUNK)
    if _pdsh(buf):
        while not state["eof"]:
            buf = fill(0, CHUNK)
        yield from _demultiplex(buf, source)
        return
    dec = _DECODER
    i = k = 0
    while True:
        n = len(buf)
        while i < n and buf[i] in " \t\r\n,":
            i += 1
        if i >= n:
            if state["eof"]:
                return
            buf, i = fill(i, CHUNK), 0
            continue
        try:
            data, end = dec.raw_decode(buf, i)
        except _PARSE_ERRORS as exc:
            if not state["eof"] and n - i <= MAX_DOC_BYTES:  # the document goes on in the next chunk
                buf, i = fill(i, max(CHUNK, n - i)), 0  # twice what is held: a long document costs a few tries
                continue
            k += 1
            yield InputError("%s#%d" % (source, k), "not JSON: %s" % _short(str(exc) or type(exc).__name__, 120)
                             if n - i <= MAX_DOC_BYTES else "a document larger than %d MiB" % (MAX_DOC_BYTES >> 20))
            return  # the rest of the stream cannot be re-synchronised reliably
        if end == n and not state["eof"]:  # a number at the chunk's end may go on: read on, parse again
            buf, i = fill(i, CHUNK), 0
            continue
        k += 1
        name = "%s#%d" % (source, k)
        snap = _snapshot_member(data)
        yield _not_snapshot(name, data) if snap is None else Document(name, snap)
        i = end


def split(items: Iterator[Item]) -> Tuple[List[Document], List[InputError]]:
    docs: List[Document] = []
    errors: List[InputError] = []
    for item in items:
        if isinstance(item, Document):
            docs.append(item)
        else:
            errors.append(item)
    return docs, errors


def read_path(path: str) -> Tuple[List[Document], List[InputError]]:
    return split(iter_path(path))
