"""Reading a directory of node files in parallel, for `cudafix fleet --from DIR`.

Reading and parsing each node's ~30 KB JSON is nearly all of a large fleet's cost (bench/fleet.py);
it is the same work per file, so forked workers do it: each reads its run of files, checks the
node's identity, and computes the content key (compare.raw_key), and hands back only that: the
node's identity and a digest of the key, plus the parsed document the first time it meets a content.
The parent judges each distinct content once, as for a serial read.  Worth it from a few hundred
files up (a worker costs a fork); CUDAFIX_FLEET_JOBS=1 reads serially.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import signal
import tempfile
from typing import Iterator, List, Optional, Set, Tuple

from cudafix.fleet import compare, inputs

MIN_FILES = 400  # below this, forking workers costs more than it saves
_SENT: Set[object] = set()  # in a worker: the content keys whose document it already sent
_LAST: List[bytes] = [b"", b""]  # in a worker: the last raw key and its digest


def jobs_wanted(n_files: int) -> int:
    env = os.environ.get("CUDAFIX_FLEET_JOBS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 1 if n_files < MIN_FILES else max(1, min(cpus, 8))


def one(path: str) -> compare.Keyed:
    item = inputs.node_file(path)
    if isinstance(item, inputs.InputError):
        return compare.Keyed(item.source, error=item.message)
    return compare.keyed(item)


def _digested(k: compare.Keyed) -> compare.Keyed:
    """raw_key's bytes replaced by their SHA-256 (~30 KB would travel otherwise): every process
    of one read keys the same way, so a content is judged once whoever read it."""
    if k.error is None and isinstance(k.key, bytes):
        if k.key != _LAST[0]:  # the previous file's content again (the usual case): no new digest
            _LAST[:] = [k.key, hashlib.sha256(k.key).digest()]
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
