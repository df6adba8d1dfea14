"""Which nvidia-* wheel, at which version, torch requires for each CUDA library family.

Read from the installed torch's METADATA ``Requires-Dist`` and, where torch requires
``cuda-toolkit[cublas,...]==V`` (torch 2.14.1's CUDA 13 wheels), from the installed cuda-toolkit's
own requirements for those extras; markers evaluated for the target Python
(https://packaging.python.org/en/latest/specifications/dependency-specifiers/).
"""

from __future__ import annotations

import glob
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

from cudafix.knowledge import torch_wheels
from cudafix.knowledge.cuda_packages import normalize
from cudafix.probes.loader.loaderfs import REAL, FileSystem, RecordingFileSystem

MAX_METADATA = 1 << 20
# torch's requirements, flattened, kept per torch by the stat of the METADATA files they came from:
# parsing cuda-toolkit's Requires-Dist lines with their markers on every status cost the most of
# a warm one (docs/benchmarks.md, "Figures behind the code").
CACHE_FILE = "torch-requirements-cache.json"
CACHE_VERSION = 1
CACHE_MAX_ENTRIES = 32


def _info_dirs(fs: FileSystem, site: str, *dists: str) -> List[str]:
    """The dist-info directories of ``dists`` in ``site`` (what a cached answer is keyed on)."""
    out = []
    for info in sorted(fs.glob(os.path.join(glob.escape(site), "*.dist-info"))):
        m = re.match(r"^(.+)-([^-]+)\.dist-info$", os.path.basename(info))
        if m and any(re.fullmatch(re.sub(r"[-_.]+", "[-_.]", d), m.group(1), re.I) for d in dists):
            out.append(info)
    return out


def _metadata(fs: FileSystem, site: str, dist: str) -> Tuple[Optional[str], List[str]]:
    """(version, Requires-Dist values) of ``dist`` installed in ``site``; (None, []) if absent."""
    for info in _info_dirs(fs, site, dist):
        version = os.path.basename(info)[: -len(".dist-info")].rsplit("-", 1)[1]
        try:
            with fs.open_text(os.path.join(info, "METADATA")) as fh:
                text = fh.read(MAX_METADATA)
        except (OSError, ValueError):
            return version, []
        head = text.split("\n\n", 1)[0]
        return version, [ln[len("Requires-Dist:"):].strip() for ln in head.splitlines() if ln.startswith("Requires-Dist:")]
    return None, []


class Requirements:
    """torch's CUDA wheel requirements, flattened: (wheel name, pip spec, required by, family, extra)."""

    def __init__(self, torch_dir: str, sys_path: Sequence[str], python_version: str, cache_dir: Optional[str] = None,
                 fs: FileSystem = REAL) -> None:
        from cudafix.store import cachefile

        self.fs = fs
        self.sites = [p for p in sys_path if p and fs.isdir(p)]
        self._installed: Optional[Dict[str, str]] = None
        self._missing: Optional[List[Tuple[str, str, str]]] = None
        self._unpinned: Optional[List[Tuple[str, str, str, str]]] = None
        site = os.path.dirname(torch_dir)
        key = [python_version] + [[d, cachefile.stat_sig(os.path.join(d, "METADATA"))]
                                  for d in _info_dirs(fs, site, "torch", "cuda-toolkit")]
        for d in key[1:]:
            fs.exists(d[0] + "/METADATA")  # a recording FileSystem keeps it (a cached torch import depends on it)
        cache = cachefile.load(cache_dir, CACHE_FILE, CACHE_VERSION) if cache_dir else {}
        hit = cache.get(site)
        if isinstance(hit, dict) and hit.get("key") == key and isinstance(hit.get("entries"), list):
            self.entries = [tuple(str(x) for x in e) for e in hit["entries"]]  # type: ignore[misc]
            return
        self._parse(site, python_version)
        if cache_dir:
            cache.pop(site, None)
            cache[site] = {"key": key, "entries": [list(e) for e in self.entries]}
            while len(cache) > CACHE_MAX_ENTRIES:
                cache.pop(next(iter(cache)))
            cachefile.store(cache_dir, CACHE_FILE, CACHE_VERSION, cache)

    def _parse(self, site: str, python_version: str) -> None:
        from packaging.markers import default_environment
        from packaging.requirements import InvalidRequirement, Requirement

        self.entries: List[Tuple[str, str, str, str, str]] = []
        env = default_environment()
        if python_version:
            env["python_version"] = ".".join(python_version.split(".")[:2])
            env["python_full_version"] = python_version

        def applies(req: "Requirement", extra: str = "") -> bool:
            return req.marker is None or req.marker.evaluate(dict(env, extra=extra))

        tv, lines = _metadata(self.fs, site, "torch")
        for line in lines:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if not applies(req):
                continue
            name = normalize(req.name)
            fam = torch_wheels.wheel_family(name)
            if fam:
                self.entries.append((name, "%s%s" % (name, req.specifier), "torch %s" % tv, fam, ""))
            elif name == "cuda-toolkit":
                cv, ct_lines = _metadata(self.fs, site, "cuda-toolkit")
                subs = []  # cuda-toolkit's CUDA wheel requirements that depend on an extra, each parsed once
                for ct_line in ct_lines if cv else ():
                    try:
                        sub = Requirement(ct_line)
                    except InvalidRequirement:
                        continue
                    sname = normalize(sub.name)
                    sfam = torch_wheels.wheel_family(sname)
                    if sfam and sub.marker is not None and not applies(sub, ""):
                        subs.append((sub, sname, sfam))
                for extra in sorted(req.extras):
                    fam_of_extra = next((f for _p, f, e in torch_wheels.FAMILIES if e == extra), "")
                    # without the installed cuda-toolkit's METADATA, its own requirement installs the extra
                    self.entries.append(("cuda-toolkit", "cuda-toolkit[%s]%s" % (extra, req.specifier), "torch %s" % tv,
                                         fam_of_extra, extra))
                    for sub, sname, sfam in subs:
                        if applies(sub, extra):
                            self.entries.insert(0, (sname, "%s%s" % (sname, sub.specifier),
                                                    "cuda-toolkit %s [%s]" % (cv, extra), sfam, extra))

    def for_family(self, fam: str, extra: str = "") -> Optional[Tuple[str, str, str]]:
        for name, spec, by, f, _e in self.entries:
            if f == fam and name != "cuda-toolkit":
                return name, spec, by
        for name, spec, by, f, e in self.entries:
            if name == "cuda-toolkit" and (f == fam or (extra and e == extra)):
                return name, spec, by
        return None

    def installed(self) -> Dict[str, str]:
        """name -> version of every nvidia-* distribution on the sys.path entries."""
        if self._installed is None:
            self._installed = {}
            for site in self.sites:
                for info in sorted(self.fs.glob(os.path.join(glob.escape(site), "nvidia_*.dist-info"))):
                    m = re.match(r"^(.+)-([^-]+)\.dist-info$", os.path.basename(info))
                    if m:
                        self._installed.setdefault(normalize(m.group(1)), m.group(2))
        return self._installed

    def installed_family(self, fam: str) -> List[Tuple[str, str]]:
        return [(n, v) for n, v in sorted(self.installed().items()) if torch_wheels.wheel_family(n) == fam]

    def not_installed(self) -> List[Tuple[str, str, str]]:
        """(name, spec, required by) of the nvidia-* wheels torch requires that no distribution of
        that name is installed for (cuda-toolkit's own requirements stand for its extras)."""
        if self._missing is None:
            self._missing = self._not_installed()
        return self._missing

    def _not_installed(self) -> List[Tuple[str, str, str]]:
        have = self.installed()
        named = {f for n, _s, _b, f, _e in self.entries if n != "cuda-toolkit"}
        out = []
        for name, spec, by, fam, _e in self.entries:
            if name == "cuda-toolkit":
                if fam in named or not fam or self.installed_family(fam):
                    continue
            elif name in have:
                continue
            if all(o[0] != name or o[1] != spec for o in out):
                out.append((name, spec, by))
        return out

    def unpinned(self) -> List[Tuple[str, str, str, str]]:
        """(name, spec, required by, installed version) of installed wheels the pins exclude."""
        if self._unpinned is None:
            self._unpinned = self._unpinned_now()
        return self._unpinned

    def _unpinned_now(self) -> List[Tuple[str, str, str, str]]:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion

        out = []
        have = self.installed()
        for name, spec, by, _f, _e in self.entries:
            if name == "cuda-toolkit" or name not in have:
                continue
            try:
                ok = SpecifierSet(spec[len(name):]).contains(have[name], prereleases=True)
            except (InvalidVersion, ValueError):
                continue
            if not ok and all(o[0] != name for o in out):
                out.append((name, spec, by, have[name]))
        return out


# -- in a helper process -----------------------------------------------------------------------
#
# A cold `import torch` simulation spends a large part of its time here, most of it importing
# packaging (docs/benchmarks.md, "Figures behind the code"), and needs the answer only at its
# end: where it runs in a child of the CLI's, a helper forked at its start works this out beside
# the symbol reads.  The answer is the same object (every fact computed, nothing left to read but
# what the caller reads itself), and what the helper read is added to the caller's recording, so
# that a stored answer depends on the same files as a serial one.


def ahead(torch_dir: str, sys_path: Sequence[str], python_version: str, cache_dir: Optional[str],
          fs: FileSystem) -> Optional[object]:
    """A helper process computing :class:`Requirements` for these arguments (None where none can
    be forked); :func:`take` its answer."""
    from cudafix import forks

    if forks.unsafe() is not None:
        return None

    def work() -> tuple:
        sub = RecordingFileSystem(fs.root, fs.keep) if fs.recording else fs
        reqs = Requirements(torch_dir, sys_path, python_version, cache_dir, sub)
        reqs.not_installed(), reqs.unpinned()
        reqs.fs = REAL  # not sent: the caller's own takes its place
        seen = (sub.sigs, sorted(sub.dangling), sub.cwd) if isinstance(sub, RecordingFileSystem) else None
        return reqs, seen

    return forks.fork(work)


def take(helper: Optional[object], fs: FileSystem) -> Optional[Requirements]:
    """The helper's :class:`Requirements`, what it read recorded in ``fs``; None: no helper, or no
    answer from it (the caller computes them itself)."""
    got = helper.take() if helper is not None else None  # type: ignore[attr-defined]
    if not got or not got[0] or not isinstance(got[1], tuple) or len(got[1]) != 2 or not isinstance(got[1][0], Requirements):
        return None
    reqs, seen = got[1]
    reqs.fs = fs
    if seen is not None and isinstance(fs, RecordingFileSystem):
        fs.merge(*seen)
    return reqs
