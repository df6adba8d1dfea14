"""Reading a directory of node files for `cudafix fleet --from DIR`, in one process or several.

Each node file is read, parsed and keyed by its content (compare.keyed: its identity apart); a
content's document travels to the comparison only the first time a process meets it.  With
``CUDAFIX_JOBS=N`` (N > 1) the files are cut into N runs: N - 1 children (cudafix/forks.py) key
theirs while this process keys the first, and their results are read in file order.  Serial by
default: on a 2-core machine the children's fork and the trip of their results cost about what
they save (docs/benchmarks.md, bench/fleet.py --jobs).
"""

from __future__ import annotations

import gc
import os
from typing import Iterator, List, Optional, Set, Tuple

from cudafix import forks
from cudafix.fleet import compare, inputs
from cudafix.knowledge import knobs

MIN_FILES = 400  # below this, forking workers costs more than it saves


def jobs_wanted(n_files: int) -> int:
    """The processes to read ``n_files`` with: ``CUDAFIX_JOBS`` where set (at most the CPUs, 8),
    else one."""
    asked = knobs.jobs(os.environ)
    if asked is None or asked < 2 or n_files < MIN_FILES or forks.unsafe() is not None:
        return 1
    return max(1, min(asked, forks.cpus(), 8))


def one(path: str) -> compare.Keyed:
    """One node file, keyed."""
    item = inputs.node_file(path)
    if isinstance(item, inputs.InputError):
        return compare.Keyed(item.source, error=item.message)
    return compare.keyed(item)


def _work(paths: List[str]) -> List[Tuple[object, ...]]:
    """In a child: its run of files keyed, each content's document sent once."""
    gc.disable()  # acyclic documents, freed by refcounting (see compare.compare_keyed)
    sent: Set[bytes] = set()
    out = []
    for p in paths:
        k = one(p)
        if k.key is not None:
            if k.key in sent:
                k.data = None  # the parent has this content's document already
            else:
                sent.add(k.key)
        out.append((k.source, k.ident, k.key, k.data, k.error))  # a plain tuple pickles in a fraction of the time
    return out


def iter_dir(path: str) -> Iterator[compare.Keyed]:
    """The directory's node files, keyed, in file-name order (as a serial read gives them)."""
    try:
        files = inputs.directory_files(path)
    except OSError as exc:
        yield compare.Keyed(path, error="cannot read: %s" % (exc.strerror or exc))
        return
    jobs = jobs_wanted(len(files))
    size = max(1, -(-len(files) // jobs))
    shards = [files[i:i + size] for i in range(0, len(files), size)]
    children: List[Tuple[Optional[forks.Child], List[str]]] = []
    try:
        for shard in shards[1:]:
            children.append((forks.fork(lambda shard=shard: _work(shard)), shard))
        for p in shards[0] if shards else ():
            yield one(p)
        while children:
            child, shard = children.pop(0)
            got = child.take() if child is not None else None
            if got is None or not got[0] or len(got[1]) != len(shard):  # no worker, or it failed: read its run here
                for p in shard:
                    yield one(p)
            else:
                for t in got[1]:
                    yield compare.Keyed(*t)
    finally:
        for child, _ in children:  # a consumer that stopped early: read (and so reap) our own children
            if child is not None:
                child.take()
