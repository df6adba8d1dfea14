"""Reading a directory of node files in parallel, for `cudafix fleet --from DIR`.

Reading and parsing each node's ~30 KB JSON is nearly all of a large fleet's cost (bench/fleet.py);
it is the same work per file, so worker processes do it: each reads its files, checks the node's
identity, and computes the content key (compare.raw_key), and sends back only that: the node's
identity and a digest of the key, plus the parsed document the first time it meets a content.
The parent judges each distinct content once, as for a serial read.  Worth it from a few hundred
files up (a worker costs a fork); CUDAFIX_FLEET_JOBS=1 reads serially.
"""

from __future__ import annotations

import gc
import hashlib
import os
from typing import Iterator, List, Set

from cudafix.fleet import compare, inputs

MIN_FILES = 400  # below this, forking workers costs more than it saves
BATCH = 64  # files per task: results travel back in few, small messages
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


def _work(paths: List[str]) -> List[compare.Keyed]:
    gc.disable()  # acyclic documents, freed by refcounting (see compare.compare_keyed)
    out = []
    for p in paths:
        k = one(p)
        if k.error is None:
            if isinstance(k.key, bytes):  # raw_key's bytes: a digest travels instead of ~30 KB
                if k.key != _LAST[0]:  # the previous file's content again (the usual case): no new digest
                    _LAST[:] = [k.key, hashlib.sha256(k.key).digest()]
                k.key = _LAST[1]
            if k.key in _SENT:
                k.data = None  # the parent has this content's document already
            else:
                _SENT.add(k.key)
        out.append(k)
    return out


def iter_dir(path: str) -> Iterator[compare.Keyed]:
    """The directory's node files, keyed, in file-name order (as a serial read gives them)."""
    try:
        files = inputs.directory_files(path)
    except OSError as exc:
        yield compare.Keyed(path, error="cannot read: %s" % (exc.strerror or exc))
        return
    jobs = jobs_wanted(len(files))
    pool = None
    if jobs > 1:
        try:
            import multiprocessing

            pool = multiprocessing.get_context("fork").Pool(jobs)
        except (ImportError, ValueError, OSError):
            pool = None  # no fork here (or no resources for workers): read serially
    if pool is None:
        for p in files:
            yield one(p)
        return
    try:
        # imap keeps the order; each worker takes its tasks in order, so a content's document
        # (sent the first time that worker meets it) always comes before the keys alone.
        for batch in pool.imap(_work, [files[i:i + BATCH] for i in range(0, len(files), BATCH)]):
            yield from batch
    finally:
        pool.terminate()
        pool.join()
