"""The extension scan's parts inside one snapshot (warm cache: the env's own cache dir): module
owners (RECORD / conda-meta lookups), the directory walks, and the cache files' loads (walks,
listings, examined files).  Prints the figures of one serial snapshot:

    PYTHONPATH=<dir holding cudafix/> <env>/bin/python bench/extension_phases.py

Each part is timed by wrapping the function that the scan calls (cudafix.probes.sections imports
probe_extensions from its module when the section runs; the scan calls `walk`, `Owners.owner` and
`cachefile.load` by the names patched here): a renamed function fails here (AttributeError), and
a snapshot whose scan no longer runs through probe_extensions ends in an error, not in a 0.
Used for docs/gpu-raw/h200-status-phases-2329.txt (docs/benchmarks.md, issue 23)."""
import sys
import time

from cudafix.probes.pyenv import extensions as E, extowners
from cudafix.probes import take_snapshot
from cudafix.store import cachefile, paths

spent = {"ext": 0.0, "owner": 0.0, "walk": 0.0, "cache-load": 0.0}


def timed(part, fn, materialize=False):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            r = fn(*a, **k)
            return iter(list(r)) if materialize else r
        finally:
            spent[part] += time.perf_counter() - t
    return wrapper


extowners.Owners.owner = timed("owner", extowners.Owners.owner)
E.walk = timed("walk", E.walk, materialize=True)  # a generator: time its whole iteration
cachefile.load = timed("cache-load", cachefile.load)
E.probe_extensions = timed("ext", E.probe_extensions)
t = time.perf_counter()
s = take_snapshot(cache_dir=paths.env_cache_dir(sys.prefix))
total = time.perf_counter() - t
if spent["ext"] == 0.0:
    sys.exit("extension_phases: the scan never ran through cudafix.probes.pyenv.extensions.probe_extensions")
print("snapshot %.1f ext %.1f owner %.1f walk %.1f cache-load %.1f ms (cache loads of every probe)"
      % (total * 1e3, spent["ext"] * 1e3, spent["owner"] * 1e3, spent["walk"] * 1e3, spent["cache-load"] * 1e3),
      s.extensions.files_seen, len(s.extensions.modules))
