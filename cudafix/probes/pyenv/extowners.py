"""Which package installed an extension module, for the extension scan (cudafix/probes/pyenv/extensions.py).

pip's RECORD files (one site directory at a time, read lazily), conda-meta records, and the
build folders of torch's extension cache; with each answer, the paths whose stat keeps it true,
so that a warm scan checks a stat each instead of reading a RECORD (``cached_owner``).
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

from cudafix.probes.machine.host import open_regular
from cudafix.store import cachefile


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Owners:
    """Which distribution's RECORD lists a file (read lazily, one site dir at a time)."""

    def __init__(self) -> None:
        self._records: Dict[str, List[Tuple[str, str, str, set]]] = {}

    def _load(self, site: str) -> List[Tuple[str, str, str, set]]:
        if site in self._records:
            return self._records[site]
        out = []
        try:
            names = sorted(os.listdir(site))
        except OSError:
            names = []
        for n in names:
            if not n.endswith(".dist-info"):
                continue
            stem = n[: -len(".dist-info")]
            dist, _, version = stem.partition("-")
            out.append((n, dist, version, set()))
        self._records[site] = out
        return out

    def owner(self, site: str, path: str) -> Tuple[Optional[str], Optional[str], str, Optional[str]]:
        """(dist, version, how it was found, the RECORD that lists ``path`` or None)."""
        rel = os.path.relpath(path, site)
        top = rel.split(os.sep, 1)[0]
        recs = self._load(site)
        # The dist named like the top-level package first (torchvision/ -> torchvision-*.dist-info).
        recs = sorted(recs, key=lambda r: norm(r[1]) != norm(top))
        for dirname, dist, version, files in recs:
            record = os.path.join(site, dirname, "RECORD")
            if not files:
                files.update(self._read_record(record))
                files.add("")  # mark as read
            if rel in files:
                return dist, version, "RECORD of %s" % dirname, record
        return None, None, "no RECORD in %s lists it" % site, None

    @staticmethod
    def _read_record(path: str) -> List[str]:
        try:
            with open_regular(path, text=True) as fh:  # never a FIFO planted in a dist-info
                return [line.split(",", 1)[0] for line in fh if ".so" in line]
        except OSError:
            return []


def conda_owner(prefix: str, path: str, cache: Dict[str, Tuple[str, str, str]]) -> Tuple[Optional[str], Optional[str], str]:
    """The conda-meta record whose "files" list holds ``path``."""
    if not cache:
        import json

        meta = os.path.join(prefix, "conda-meta")
        try:
            names = os.listdir(meta)
        except OSError:
            names = []
        for n in names:
            if not n.endswith(".json"):
                continue
            try:
                with open_regular(os.path.join(meta, n), text=True) as fh:
                    rec = json.load(fh)
                for f in rec.get("files") or ():
                    if ".so" in f:
                        cache[f] = (str(rec.get("name") or n), str(rec.get("version") or ""), "conda-meta/%s" % n)
            except (OSError, ValueError, AttributeError, TypeError):
                continue
        cache.setdefault("", ("", "", ""))
    rel = os.path.relpath(path, prefix)
    hit = cache.get(rel)
    if hit and hit[0]:
        return hit[0], hit[1] or None, hit[2]
    return None, None, "no conda-meta record lists %s" % rel


if TYPE_CHECKING:  # an annotation only: typing is not imported at run time (issue 23)
    Owner = Tuple[Optional[str], Optional[str], str]  # package, version, how it was found


def find_owner(path: str, kind: str, root: str, owners: Owners, prefix: Optional[str],
               conda_cache: Dict[str, Tuple[str, str, str]]) -> Tuple[Owner, List[str]]:
    """Which package installed ``path``, and the paths whose stat_sig keeps that answer true: the
    RECORD that lists it and ``root`` itself (installing or removing a dist adds or removes a
    .dist-info there, so a second claimant or a new owner changes its mtime), or conda-meta/
    (every conda install, update and removal adds or removes a record in it)."""
    if kind == "torch extension cache":  # named by its build folder: the path is the whole answer
        rel = os.path.relpath(path, root).split(os.sep)
        return (rel[-2] if len(rel) >= 2 else os.path.splitext(os.path.basename(path))[0], None,
                "torch extension cache %s (torch.utils.cpp_extension.load)" % os.path.join(root, *rel[:-1])), []
    meta = [os.path.join(prefix, "conda-meta")] if prefix else []
    if kind == "conda lib" and prefix:
        return conda_owner(prefix, path, conda_cache), meta
    dist, version, via, record = owners.owner(root, path)
    if dist is not None:
        return (dist, version, via), [root, record] if record else [root]
    if prefix:  # a conda package's module in site-packages, no RECORD
        pkg, ver, cvia = conda_owner(prefix, path, conda_cache)
        if pkg:
            return (pkg, ver, cvia), [root] + meta
    return (None, None, via), [root] + meta


def cached_owner(ent: Dict[str, Any], path: str, root: str) -> Optional[Owner]:
    """The owner a warm scan stored for this file, if every path it depends on is unchanged:
    a stat each, no RECORD or conda-meta read."""
    got = ent.get("owner")
    if not (isinstance(got, list) and len(got) == 4 and got[0] == root and got[1] == path
            and isinstance(got[2], list) and len(got[2]) == 3 and isinstance(got[3], list)):
        return None
    for item in got[3]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)) \
                or cachefile.stat_sig(item[0]) != item[1]:
            return None
    pkg, ver, via = got[2]
    return (pkg if isinstance(pkg, str) else None, ver if isinstance(ver, str) else None, str(via))
