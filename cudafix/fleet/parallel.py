"""Reading a directory of node files in parallel, for `cudafix fleet --from DIR`.

Reading and parsing each node's ~30 KB JSON is nearly all of a large fleet's cost (bench/fleet.py);
it is the same work per file, so forked workers do it: each reads its run of files, checks the
node's identity, and computes the content key (compare.raw_key), and hands back only that: the
node's identity and a digest of the key, plus the parsed document the first time it meets a content.
The parent judges each distinct content once, as for a serial read.  Serial by default
(jobs_wanted says why); CUDAFIX_FLEET_JOBS=N forks N - 1 workers.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import signal
import tempfile
from typing import Dict, Iterator, List, Optional, Set, Tuple

from cudafix.fleet import compare, inputs

MIN_FILES = 400  # below this, forking workers costs more than it saves
_SENT: Set[object] = set()  # in a worker: the content keys whose document it already sent
_LAST: List[bytes] = [b"", b""]  # in a worker: the last raw key and its digest


def jobs_wanted(n_files: int) -> int:
    """1 unless CUDAFIX_FLEET_JOBS asks for more: with the template (below) a node whose content
    repeats costs a read and a compare, ~4x less than parsing it, and a worker's fork and the trip
    of its results cost more than they save on the 2-core machine of bench/fleet.py (measured:
    10,000 nodes 0.52 s serial, 0.82 s with 2 jobs).  More jobs can pay where most nodes differ."""
    env = os.environ.get("CUDAFIX_FLEET_JOBS", "")
    if not (env.isdigit() and int(env) > 1) or n_files < MIN_FILES:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(int(env), cpus, 8))


class _Template:
    """The last fully parsed file, as a pattern for the next: a file of the same length whose bytes
    are the same outside the identity members (compare.identity_cuts), and whose members hold a
    JSON string (or null) each, parses to the same content with those values as its identity —
    the rest of its bytes tokenise as they did.  Checked once per template before its first use:
    its members, overwritten with markers, must come back as the node's identity fields (a member
    found elsewhere than where the identity lives would otherwise stand for content)."""

    def __init__(self, raw: bytes, cuts: List[Tuple[int, int, str]], key: object) -> None:
        self.raw, self.cuts, self.key = raw, cuts, key
        self.pieces, pos = [], 0
        for a, b, name in cuts:
            self.pieces.append((pos, a, raw[pos:a], b, ('"%s": ' % name).encode("ascii"), name))
            pos = b
        self.tail = (pos, raw[pos:])
        self.ok: Optional[bool] = None  # verified: None = not yet

    def match(self, raw: bytes) -> Optional[Dict[str, Optional[str]]]:
        if len(raw) != len(self.raw):
            return None
        values: Dict[str, Optional[str]] = {}
        for pos, a, piece, b, prefix, name in self.pieces:
            if raw[pos:a] != piece or not raw.startswith(prefix, a):
                return None
            try:
                v = json.loads(raw[a + len(prefix):b])
            except (ValueError, RecursionError):
                return None
            if not isinstance(v, str) and (v is not None or name in compare.IDENTITY_TOP_FIELDS):
                return None  # not what an identity field may hold: the full read reports it
            values[name] = v
        if raw[self.tail[0]:] != self.tail[1]:
            return None
        return values if self.verified() else None

    def verified(self) -> bool:
        if self.ok is None:
            buf, want = bytearray(self.raw), {}
            for pos, a, piece, b, prefix, name in self.pieces:
                n = b - a - len(prefix) - 2
                mark = "~" * n if self.raw[a + len(prefix) + 1:a + len(prefix) + 2] != b"~" else "!" * n
                buf[a + len(prefix):b] = ('"%s"' % mark).encode("ascii")
                want[name] = mark
            try:
                d = json.loads(bytes(buf))
                node = d.get("node") or {}
                self.ok = all((d if name in compare.IDENTITY_TOP_FIELDS else node).get(name) == mark
                              for name, mark in want.items())
            except (ValueError, RecursionError, AttributeError, TypeError):
                self.ok = False
        return self.ok


_TEMPLATE: List[Optional[_Template]] = [None]


def one(path: str) -> compare.Keyed:
    """One node file keyed: by its template when it matches (no parse), else read in full."""
    raw = inputs.read_file(path, regular_only=True)
    if isinstance(raw, inputs.InputError):
        return compare.Keyed(raw.source, error=raw.message)
    t = _TEMPLATE[0]
    if t is not None and t.ok is not False:
        values = t.match(raw)
        if values is not None:
            nid, engine = values.get("node_id"), values.get("engine")
            short = nid[:12] if engine == "ray" and nid else nid  # as compare._name names it
            return compare.Keyed(path, (short or values.get("hostname") or path, values.get("hostname"), engine, nid), t.key)
    item = inputs.node_document(path, raw)
    if isinstance(item, inputs.InputError):
        return compare.Keyed(item.source, error=item.message)
    k = _digested(compare.keyed(item))
    if k.error is None and item.raw is not None and isinstance(k.key, bytes) and k.key.startswith(b"D"):
        cuts = compare.identity_cuts(item.raw, item.data)
        if cuts and (t is None or t.ok is not False or t.key != k.key):
            _TEMPLATE[0] = _Template(item.raw, cuts, k.key)
    return k


def _digested(k: compare.Keyed) -> compare.Keyed:
    """raw_key's bytes replaced by their SHA-256 (~30 KB would travel otherwise): every process
    of one read keys the same way, so a content is judged once whoever read it."""
    if k.error is None and isinstance(k.key, bytes) and not k.key.startswith(b"D"):  # raw_key's start with "["
        if k.key != _LAST[0]:  # the previous file's content again (the usual case): no new digest
            _LAST[:] = [k.key, b"D" + hashlib.sha256(k.key).digest()]
        k.key = _LAST[1]
    return k


def _work(paths: List[str]) -> List[Tuple[object, ...]]:
    gc.disable()  # acyclic documents, freed by refcounting (see compare.compare_keyed)
    out = []
    for p in paths:
        k = _digested(one(p))
        if k.error is None:
            if k.key in _SENT:
                k.data = None  # the parent has this content's document already
            else:
                _SENT.add(k.key)
        out.append((k.source, k.ident, k.key, k.data, k.error))  # a plain tuple pickles in a fraction of the time
    return out


def _shard(files: List[str], out) -> None:
    """In a forked child: key its files and leave the results in ``out`` (a file, not a pipe: the
    parent reads it only once its own shard is done)."""
    pickle.dump(_work(files), out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()


def _fork_shard(files: List[str]) -> Optional[Tuple[int, object]]:
    out = tempfile.TemporaryFile()
    try:
        pid = os.fork()
    except OSError:
        out.close()
        return None  # no resources for a worker: the parent reads the shard itself
    if pid == 0:  # the child: never returns into the caller's code
        code = 1
        try:
            _shard(files, out)
            code = 0
        finally:
            os._exit(code)
    return pid, out


def _collect(pid: int, out, files: List[str], pending: Set[int]) -> Iterator[compare.Keyed]:
    _, status = os.waitpid(pid, 0)
    pending.discard(pid)
    results = None
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        out.seek(0)
        try:
            results = pickle.load(out)
        except (pickle.UnpicklingError, EOFError, ValueError):
            results = None
    out.close()
    if results is None or len(results) != len(files):  # the worker failed: read its shard here
        for p in files:
            yield one(p)
        return
    for t in results:
        yield compare.Keyed(*t)


def iter_dir(path: str) -> Iterator[compare.Keyed]:
    """The directory's node files, keyed, in file-name order (as a serial read gives them).

    With J jobs the files are cut into J runs: J - 1 forked children key theirs while this process
    keys the first, then their results are read in order.  No pool, no threads: under a loaded
    machine every hand-off between threads waits for a time slice."""
    try:
        files = inputs.directory_files(path)
    except OSError as exc:
        yield compare.Keyed(path, error="cannot read: %s" % (exc.strerror or exc))
        return
    _TEMPLATE[0] = None
    jobs = jobs_wanted(len(files)) if hasattr(os, "fork") else 1
    size = -(-len(files) // jobs)
    shards = [files[i:i + size] for i in range(0, len(files), size)] or [[]]
    children = []
    pending: Set[int] = set()  # forked and not yet waited for
    try:
        for shard in shards[1:]:
            child = _fork_shard(shard)
            children.append((child, shard))
            if child is not None:
                pending.add(child[0])
        for p in shards[0]:
            yield _digested(one(p))
        for child, shard in children:
            if child is None:
                for p in shard:
                    yield _digested(one(p))
            else:
                yield from _collect(child[0], child[1], shard, pending)
    finally:
        for pid in pending:  # a consumer that stopped early: our own children only, by their id
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
