"""The extension scan's warm path (issue 23): one stat per directory, no scandir, and still every
change seen.  Truth: an independent os.walk of the same tree (what a fresh, uncached scan must
find), and the calls counted on the real filesystem."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from cudafix.probes.pyenv import dirwalk, extensions

OLD = time.time() - 3600  # an mtime older than the racy window: a listing of it may be cached


def _truth(root: str, max_depth: int):
    """What the walk must yield, by os.walk: every candidate file, depth-limited, skip rules applied."""
    out = set()
    for d, dns, fns in os.walk(root):
        depth = 0 if d == root else os.path.relpath(d, root).count(os.sep) + 1
        dns[:] = [n for n in dns if n not in dirwalk.SKIP_DIRS and not n.endswith((".dist-info", ".egg-info"))
                  and not os.path.islink(os.path.join(d, n)) and depth + 1 < max_depth]
        for n in fns:
            p = os.path.join(d, n)
            if extensions.is_shared_object_name(n) and os.path.isfile(p):
                out.add((p, os.path.realpath(p)))
    return out


def _age(root: str) -> None:
    for d, _dns, _fns in os.walk(root):
        os.utime(d, (OLD, OLD))


def _tree(root) -> str:
    for rel in ("a/lib_x.so", "a/b/c/_C.cpython-311-x86_64-linux-gnu.so", "a/b/readme.txt", "torch/lib/libtorch.so",
                "pkg.dist-info/x.so", "d/e/f/g/deep.so", "libtop.so.1"):
        p = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(b"\x7fELF")
    os.symlink(os.path.join(str(root), "a", "lib_x.so"), os.path.join(str(root), "d", "link.so"))
    os.symlink(os.path.join(str(root), "a"), os.path.join(str(root), "dirlink"))  # never entered
    return str(root)


def _walk(root: str, cache_dir: str, depth: int = 4):
    c = dirwalk.DirCache(cache_dir, extensions.is_shared_object_name)
    got = list(dirwalk.walk(root, depth, c))
    c.save()
    return got


class _Count:
    def __init__(self, monkeypatch) -> None:
        self.n = 0
        real = os.scandir

        def counted(*a, **k):
            self.n += 1
            return real(*a, **k)

        monkeypatch.setattr(os, "scandir", counted)


def test_walk_matches_os_walk_cold_and_warm(tmp_path):
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    cold = _walk(root, cache)
    assert set(cold) == _truth(root, 4) and len(cold) == len(set(cold))
    assert ("%s/d/link.so" % root, "%s/a/lib_x.so" % root) in cold  # a symlinked file: its target
    assert _walk(root, cache) == cold  # warm: the same, in the same order


def test_warm_scan_reads_no_directory(tmp_path, monkeypatch):
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    _walk(root, cache)
    n = _Count(monkeypatch)
    _walk(root, cache)
    assert n.n == 0


@pytest.mark.parametrize("change", ["add", "remove", "rename", "new-subdir", "dir-to-file"])
def test_every_change_is_seen(tmp_path, change):
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    _walk(root, cache)
    if change == "add":
        open(os.path.join(root, "a", "b", "c", "libnew.so"), "wb").close()
    elif change == "remove":
        os.unlink(os.path.join(root, "a", "lib_x.so"))
    elif change == "rename":
        os.rename(os.path.join(root, "libtop.so.1"), os.path.join(root, "libtop.so.2"))
    elif change == "new-subdir":
        os.makedirs(os.path.join(root, "a", "n"))
        open(os.path.join(root, "a", "n", "libn.so"), "wb").close()
    else:
        shutil.rmtree(os.path.join(root, "a", "b"))
        open(os.path.join(root, "a", "b"), "wb").close()
    # the walk yields candidates; its caller stats each one (a dangling symlink is dropped there)
    assert {x for x in _walk(root, cache) if os.path.isfile(x[1])} == _truth(root, 4)


def test_racy_directory_is_listed_again(tmp_path, monkeypatch):
    root = _tree(tmp_path / "site")  # just made: inside the racy window, so not cached
    cache = str(tmp_path / "cache")
    _walk(root, cache)
    n = _Count(monkeypatch)
    _walk(root, cache)
    assert n.n > 0


def test_probe_extensions_warm_does_no_scandir(tmp_path, monkeypatch):
    """The whole scan (public entry point): a second scan of an unchanged env lists no directory.
    Fails on 51656f0, whose walk read every directory on every run."""
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    os.makedirs(cache)
    env = {"HOME": str(tmp_path / "home")}
    first = extensions.probe_extensions([root], env, cache_dir=cache)
    n = _Count(monkeypatch)
    second = extensions.probe_extensions([root], env, cache_dir=cache)
    assert n.n == 0
    assert [m.path for m in second.modules] == [m.path for m in first.modules]
    assert second.files_seen == first.files_seen == len(_truth(root, extensions.MAX_DEPTH_OTHER)) - 1  # link.so = lib_x.so


def test_warm_walk_is_one_stat_per_directory(tmp_path, monkeypatch):
    """An unchanged tree's walk is the stored whole walk: no per-directory listing (not even a
    cached one), one stat per directory the walk entered, and the cold walk's files in its order."""
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    cold = _walk(root, cache)
    entered = {d for d, _dns, _fns in os.walk(root)
               if not any(part in dirwalk.SKIP_DIRS or part.endswith(".dist-info") or part == "dirlink"
                          for part in os.path.relpath(d, root).split(os.sep))
               and (d == root or os.path.relpath(d, root).count(os.sep) + 1 < 4)}
    listings, stats = [], []
    monkeypatch.setattr(dirwalk.DirCache, "listing", lambda self, d: listings.append(d))
    real = dirwalk.cachefile.stat_sig
    monkeypatch.setattr(dirwalk.cachefile, "stat_sig", lambda p: stats.append(p) or real(p))
    assert _walk(root, cache) == cold
    assert listings == [] and sorted(stats) == sorted(entered)


def test_a_change_deep_down_ends_the_stored_walk(tmp_path):
    """The stored walk holds only while every directory it entered keeps its stat: a file added
    four levels down is found, and the walk stored after it holds the new file."""
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    _walk(root, cache)
    open(os.path.join(root, "d", "e", "f", "libdeep2.so"), "wb").close()
    os.utime(os.path.join(root, "d", "e", "f"), (OLD + 60, OLD + 60))  # outside the racy window: stored again
    got = _walk(root, cache)
    assert {x for x in got if os.path.isfile(x[1])} == _truth(root, 4)
    assert ("%s/d/e/f/libdeep2.so" % root, "%s/d/e/f/libdeep2.so" % root) in got
    assert _walk(root, cache) == got


def _loads(monkeypatch):
    """The cache files each DirCache reads, in order."""
    read = []
    real = dirwalk.cachefile.load
    monkeypatch.setattr(dirwalk.cachefile, "load", lambda d, name, v: read.append(name) or real(d, name, v))
    return read


def test_warm_walk_reads_the_walks_file_alone(tmp_path, monkeypatch):
    """A warm scan parses the stored walks only; the listings file (the larger one) is read when
    a walk misses, and that scan lists only the directory that changed."""
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    cold = _walk(root, cache)
    read = _loads(monkeypatch)
    assert _walk(root, cache) == cold
    assert read == [dirwalk.WALKS_FILE]
    del read[:]
    open(os.path.join(root, "a", "libnew.so"), "wb").close()
    os.utime(os.path.join(root, "a"), (OLD + 60, OLD + 60))
    n = _Count(monkeypatch)
    got = _walk(root, cache)
    assert read == [dirwalk.WALKS_FILE, dirwalk.DIRS_FILE] and n.n == 1
    assert {x for x in got if os.path.isfile(x[1])} == _truth(root, 4)


def test_a_whole_walk_keeps_its_listings_when_another_walk_is_stored(tmp_path, monkeypatch):
    """Two roots: the scan that re-walks one (a change in it) and takes the other whole writes
    the listings file; the listings of the whole walk stay in it, so that when that root changes
    in turn only its changed directory is listed again."""
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    _age(str(tmp_path))
    cache = str(tmp_path / "cache")

    def both():
        c = dirwalk.DirCache(cache, extensions.is_shared_object_name)
        got = list(dirwalk.walk(one, 4, c)) + list(dirwalk.walk(two, 4, c))
        c.save()
        return got

    both()
    open(os.path.join(two, "a", "libnew.so"), "wb").close()
    os.utime(os.path.join(two, "a"), (OLD + 60, OLD + 60))
    both()  # one: whole; two: walked again from its listings, stored
    open(os.path.join(one, "d", "libnew.so"), "wb").close()
    os.utime(os.path.join(one, "d"), (OLD + 60, OLD + 60))
    n = _Count(monkeypatch)
    got = both()
    assert n.n == 1
    assert {x for x in got if os.path.isfile(x[1])} == _truth(one, 4) | _truth(two, 4)


def test_a_stale_or_foreign_walks_file_is_a_miss(tmp_path):
    """A walks file of another shape (an older cudafix, a damaged file) is read as no stored walk."""
    root = _tree(tmp_path / "site")
    _age(root)
    cache = str(tmp_path / "cache")
    cold = _walk(root, cache)
    key = "\0walk\0%s\0%d" % (root, 4)
    for bad in ([["x"], [], []], [[root], [[1, 2]], []], [[root], [None], [["p"]]], "x", [[], [], [["p", 3]]]):
        dirwalk.cachefile.store(cache, dirwalk.WALKS_FILE, dirwalk.WALKS_VERSION, {key: bad})
        assert sorted(_walk(root, cache)) == sorted(cold)


# A walk split over processes (dirwalk._split, the cold scan of the CLI's extension job) against
# one process's: in a fresh single-threaded interpreter (cudafix.probes.ahead forks nowhere
# else), over this interpreter's real site-packages and the tree above with 20 more
# subdirectories.  The same files in the same order, the same stored walks and listings, the
# same WalkLimit; the split really happened; the next walk is warm.
SPLIT = r"""
import json, os, sys
from cudafix import forks
from cudafix.probes.pyenv import dirwalk, extensions as E
split = []
real_split = forks.split_work
forks.split_work = lambda *a: (lambda r: split.append(len(r)) or r)(real_split(*a))  # how many subtrees came back
scandirs = []
real_scandir = os.scandir
os.scandir = lambda *a: scandirs.append(1) or real_scandir(*a)
cache, roots = sys.argv[1], sys.argv[2:]

def run(name, workers, limit=None):
    if limit:
        dirwalk.MAX_DIRS = limit
    c = dirwalk.DirCache(os.path.join(cache, name), E.is_shared_object_name)
    try:
        got = [list(dirwalk.walk(r, E.MAX_DEPTH, c, workers=workers)) for r in roots]
    except dirwalk.WalkLimit as exc:
        got = str(exc)
    c.save()
    dirwalk.MAX_DIRS = 20000
    stored = [json.load(open(os.path.join(cache, name, f))) if os.path.exists(os.path.join(cache, name, f)) else None
              for f in (dirwalk.WALKS_FILE, dirwalk.DIRS_FILE)]
    return got, stored

for d in (cache + "/one", cache + "/split", cache + "/l1", cache + "/l2"):
    os.makedirs(d, mode=0o700)
one, split_run = run("one", 1), run("split", 4)
n_split = [n > 0 for n in split]
del scandirs[:]
warm = run("split", 4)
print(json.dumps({"same": one == split_run, "files": sum(map(len, one[0])), "split": n_split,
                  "warm_same": warm[0] == one[0], "warm_scandirs": len(scandirs),
                  "limit": [run("l1", 1, 50)[0], run("l2", 4, 50)[0]]}))
"""


def test_a_split_walk_is_one_walk(tmp_path):
    import subprocess
    import sys
    import sysconfig

    root = _tree(tmp_path / "site")
    for i in range(20):
        os.makedirs(os.path.join(root, "pkg%02d" % i, "sub"))
        with open(os.path.join(root, "pkg%02d" % i, "sub", "_m%d.so" % i), "wb") as fh:
            fh.write(b"\x7fELF")
    _age(root)
    site = sysconfig.get_paths()["purelib"]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-c", SPLIT, str(tmp_path / "cache"), root, site], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    limit = "more than 50 directories under %s: the rest were not examined" % site
    assert got["files"] > 27 and got["limit"] == [limit, limit]
    assert got == {"same": True, "files": got["files"], "split": [True, True], "warm_same": True, "warm_scandirs": 0,
                   "limit": got["limit"]}
