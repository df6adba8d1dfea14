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
_STREAM_POSITION = re.compile(r"#[0-9]+\Z")  # "<stdin>#3": a document of several (one alone is named by its file)


@dataclasses.dataclass
class Document:
    """One node's snapshot as parsed JSON, and where it came from."""

    source: str  # file path, or "<stdin>#3", or "<stdin>:node3" (pdsh)
    data: dict
    name: Optional[str] = None  # the transport's name for the node (pdsh's host prefix): it wins
    raw: Optional[bytes] = None  # the document's own bytes, when it is the whole input (a file)


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


def in_stream(source: str) -> bool:
    """The document is one of several of a plain stream (``_documents`` / ``iter_fd`` name it so)."""
    return bool(_STREAM_POSITION.search(source))


def _short(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _documents(text: str, source: str) -> Iterator[Tuple[Item, int, int]]:
    """Every JSON document in ``text`` (concatenated, whitespace or commas between), with its span."""
    dec = json.JSONDecoder()
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
        # raw=b"": the document is the snapshot itself (not a status document's member)
        yield (_not_snapshot(name, data) if snap is None else Document(name, snap, raw=b"" if snap is data else None)), start, i


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
    item.raw = raw if item.raw is not None else None  # the file is this snapshot alone: its bytes can key the content (compare.py)
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
    # named by the user: a pipe (`--from <(pdsh ...)`) is fine; read as stdin is (iter_fd: each
    # document bounded, the stream not), so a multi-node file and the same bytes on stdin agree
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        yield InputError(path, "cannot read: %s" % (exc.strerror or exc))
        return
    try:
        first: Optional[Item] = None
        n = 0
        for item in iter_fd(fd, path):
            n += 1
            if n == 1:
                first = item
                continue
            if n == 2:
                yield first  # type: ignore[misc]
            yield item
        if n == 1 and first is not None:
            if isinstance(first, Document):
                first.source = path  # one document per file: the file names it
            yield first
    except OSError as exc:
        yield InputError(path, "cannot read: %s" % (exc.strerror or exc))
    finally:
        os.close(fd)


class StreamTooLarge(ValueError):
    """A document of a stream is over MAX_DOC_BYTES: the whole input is refused (one line, exit 2)."""


READ_CHUNK = 1 << 20


class _Reader:
    """A descriptor's text as it arrives (UTF-8, errors replaced)."""

    def __init__(self, fd) -> None:
        import codecs

        # a descriptor, or a binary file object (click's test runner gives stdin without one)
        self.read = (lambda n: os.read(fd, n)) if isinstance(fd, int) else fd.read
        self.buf, self.eof = "", False
        self.dec = codecs.getincrementaldecoder("utf-8")("replace")

    def more(self, want: int) -> None:
        got = 0
        while not self.eof and got < want:
            chunk = self.read(READ_CHUNK)
            if not chunk:
                self.eof = True
                self.buf += self.dec.decode(b"", final=True)
                return
            got += len(chunk)
            self.buf += self.dec.decode(chunk)

    def take(self) -> str:
        text, self.buf = self.buf, ""
        return text


def _too_large(name: str) -> StreamTooLarge:
    return StreamTooLarge("%s: a document larger than %d MiB: not a snapshot" % (name, MAX_DOC_BYTES >> 20))


class _ReadFn:
    """A ``read(size) -> bytes`` function as the binary file object iter_fd takes."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read


def iter_reader(read: Callable[[int], bytes], source: str) -> Iterator[Item]:
    """iter_fd over a ``read(size)`` function (a pipe's, a socket's)."""
    return iter_fd(_ReadFn(read), source)


def iter_fd(fd, source: str) -> Iterator[Item]:
    """The documents of the stream on ``fd`` (a descriptor or a binary file: stdin, a file, a pipe) as they arrive, with the
    limit of a node's file for EACH document (MAX_DOC_BYTES) -- the same for `--from -` and
    `--from FILE`, whatever the stream's length: one document in memory at a time (pdsh: the
    hosts' lines).  Raises StreamTooLarge for a document over the limit."""
    r = _Reader(fd)
    while not r.eof and "\n" not in r.buf and len(r.buf) <= MAX_DOC_BYTES:
        r.more(1)
    if _pdsh(r.buf):
        yield from _demultiplex_fd(r, source)
        return
    jd = json.JSONDecoder()
    k = 0
    while True:
        r.buf = r.buf.lstrip(" \t\r\n,")
        while not r.buf and not r.eof:
            r.more(1)
            r.buf = r.buf.lstrip(" \t\r\n,")
        if not r.buf:
            return
        k += 1
        name = "%s#%d" % (source, k)
        while True:
            try:
                data, end = jd.raw_decode(r.buf)
                break
            except _PARSE_ERRORS as exc:
                if r.eof:
                    yield InputError(name, "not JSON: %s" % _short(str(exc) or type(exc).__name__, 120))
                    return  # the rest of the stream cannot be re-synchronised reliably
                if len(r.buf) > MAX_DOC_BYTES:
                    raise _too_large(name) from None
                r.more(max(len(r.buf), READ_CHUNK))  # doubling: a large document is parsed O(log) times
        if end > MAX_DOC_BYTES:
            raise _too_large(name)
        r.buf = r.buf[end:]
        snap = _snapshot_member(data)
        yield _not_snapshot(name, data) if snap is None else Document(name, snap, raw=b"" if snap is data else None)


def _demultiplex_fd(r: _Reader, source: str) -> Iterator[Item]:
    """pdsh output from a descriptor: each host's lines, at most MAX_DOC_BYTES per host."""
    sizes: "collections.Counter[str]" = collections.Counter()
    kept: List[str] = []
    rest = ""
    while True:
        lines = (rest + r.take()).split("\n")
        rest = "" if r.eof else lines.pop()
        for line in lines:
            m = _PDSH_LINE.match(line.rstrip("\r"))
            if m:
                sizes[m.group(1)] += len(line) + 1
                if sizes[m.group(1)] > MAX_DOC_BYTES:
                    raise _too_large("%s:%s" % (source, m.group(1)))
            kept.append(line)
        if len(rest) > MAX_DOC_BYTES:
            raise _too_large(source)
        if r.eof:
            break
        r.more(READ_CHUNK)
    yield from _demultiplex("\n".join(kept), source)


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
