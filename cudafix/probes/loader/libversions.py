"""The version of a shared library file: from its name, else from the RECORD of the nvidia-* wheel
that installed it (pip wheels ship libcudart.so.13 with no version in the name)."""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Set, Tuple

from cudafix.probes.loader.loaderfs import REAL, FileSystem

MAX_RECORDS = 64  # nvidia_*.dist-info directories read per site-packages
MAX_RECORD_BYTES = 4 << 20


def file_version(path: str, fs: FileSystem = REAL) -> Optional[str]:
    """"13.0.88" from libnvJitLink.so.13.0.88 (after resolving symlinks); None if only a major."""
    for cand in (os.path.basename(fs.realpath(path)), os.path.basename(path)):
        m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", cand)
        if m:
            return m.group(1)
    return None


class WheelRecords:
    """(dist-info dir name, files) of the nvidia-* wheels in each site-packages, read once."""

    def __init__(self, fs: FileSystem = REAL) -> None:
        self.fs = fs
        self._by_site: Dict[str, List[Tuple[str, Set[str]]]] = {}

    def of_site(self, site: str) -> List[Tuple[str, Set[str]]]:
        hit = self._by_site.get(site)
        if hit is not None:
            return hit
        out: List[Tuple[str, Set[str]]] = []
        import glob  # glob.escape only: the listing goes through fs

        for info in sorted(self.fs.glob(os.path.join(glob.escape(site), "nvidia_*.dist-info")))[:MAX_RECORDS]:
            files: Set[str] = set()
            try:
                with self.fs.open_text(os.path.join(info, "RECORD")) as fh:
                    for line in fh.read(MAX_RECORD_BYTES).splitlines():
                        files.add(line.split(",", 1)[0])
            except OSError:
                continue
            out.append((os.path.basename(info), files))
        self._by_site[site] = out
        return out

    def wheel_version(self, path: str) -> Optional[Tuple[str, str]]:
        """(version, dist-info name) of the nvidia-* wheel whose RECORD lists ``path``."""
        real = self.fs.realpath(path)
        parts = real.split(os.sep)
        if "nvidia" not in parts:
            return None
        i = len(parts) - 1 - parts[::-1].index("nvidia")
        site = os.sep.join(parts[:i])
        rel = "/".join(parts[i:])
        for info, files in self.of_site(site):
            if rel in files:
                m = re.match(r"^[A-Za-z0-9_.]+?-([^-]+)\.dist-info$", info)
                if m:
                    return m.group(1), info
        return None

    def version_of(self, path: Optional[str], notes: Dict[str, str]) -> Optional[str]:
        """The file's version; where it came from (a RECORD) goes into ``notes[path]``."""
        if not path:
            return None
        v = file_version(path, self.fs)
        if v:
            return v
        wv = self.wheel_version(path)
        if wv:
            notes[path] = "version from RECORD of %s" % wv[1]
            return wv[0]
        return None
