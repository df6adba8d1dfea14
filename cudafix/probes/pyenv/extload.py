"""The first failure the loader reports when an extension module is loaded after `import torch`.

ld.so maps a module's DT_NEEDED libraries (breadth first, glibc elf/dl-deps.c
`_dl_map_object_deps`) before it binds a single symbol, and stops at the first library it cannot
find: the user sees "libc10_cuda.so: cannot open shared object file: No such file or directory",
never the undefined symbol that binding would have hit later.  This answers which library that is,
simulated (cudafix.probes.loader.loadersim, nothing is loaded), in the process `import torch` leaves:
torch's own libraries are already mapped, and a name already loaded is reused.
"""

from __future__ import annotations

import glob
import os
from typing import List, Mapping, Optional, Tuple

from cudafix.probes.loader.loaderfs import REAL, FileSystem
from cudafix.probes.loader.loadersim import LoaderSim, ld_cache_of

# What `import torch` maps before anything else (torch/__init__.py: _load_global_deps, then _C).
TORCH_FIRST = ("lib/libtorch_global_deps.so", "_C*.so")


def torch_preloads(torch_dir: str) -> list:
    out = []
    for pattern in TORCH_FIRST:
        out.extend(sorted(glob.glob(os.path.join(torch_dir, pattern))))
    return out


def first_missing_needed(module: str, torch_dir: Optional[str], env: Mapping[str, str],
                         executable: Optional[str] = None, root: str = "/",
                         keep: Tuple[str, ...] = ()) -> Tuple[Optional[str], str, str]:
    """(soname, requested_by, how_known): the first DT_NEEDED library the loader cannot find for
    ``module`` after `import torch`; soname None when every one is found ("" requested_by) or
    when it could not be decided (how_known then says why, prefixed "unknown: ").  ``root`` /
    ``keep``: the probe root the machine's paths are read under (loaderfs.FileSystem.machine)."""
    try:
        fs = REAL if root == "/" else FileSystem(root, keep)
        sim = LoaderSim(env, executable=executable, ld_cache=ld_cache_of(fs), fs=fs)
        if torch_dir:
            sim.preload(torch_preloads(torch_dir))
        start = len(sim.events)
        sim.load(module, None, how="root")
    except Exception as exc:  # a probe lets no exception out
        return None, "", "unknown: loader simulation failed: %s: %s" % (type(exc).__name__, exc)
    for name, requester, result, _via, why in sim.events[start:]:
        if result is not None:
            continue
        if why and why.startswith("search stopped"):
            return None, "", "unknown: %s: %s" % (name, why)
        return name, requester.path if requester is not None else module, why or "not found"
    return None, "", "every DT_NEEDED library found (glibc search order simulated, breadth first, after `import torch`)"


def undefined_in_closure(module: str, torch_dir: Optional[str], names: List[str], env: Mapping[str, str],
                         executable: Optional[str] = None, root: str = "/",
                         keep: Tuple[str, ...] = ()) -> Tuple[Optional[List[str]], str]:
    """The ``names`` that no object of the process `import torch` leaves plus ``module``'s whole
    DT_NEEDED closure defines (glibc looks a symbol up in the global scope, then the module's own
    dependencies, elf/dl-lookup.c): torch 2.0.1's nvfuser/_C imports 241 torch symbols that
    torch/lib/libnvfuser_codegen.so, its first DT_NEEDED, defines.  (None, why) when undecided."""
    from cudafix.probes.binfmt.elfsym import SymbolTable, missing_from

    try:
        fs = REAL if root == "/" else FileSystem(root, keep)
        sim = LoaderSim(env, executable=executable, ld_cache=ld_cache_of(fs), fs=fs)
        if torch_dir:
            sim.preload(torch_preloads(torch_dir))
        sim.load(module, None, how="root")
    except Exception as exc:  # a probe lets no exception out
        return None, "loader simulation failed: %s: %s" % (type(exc).__name__, exc)
    tables = [SymbolTable(o.path) for o in sim.loaded if o.path != module]
    try:
        left, err = missing_from(names, [t for t in tables if t.error is None])
    finally:
        for t in tables:
            t.close()
    return (None, err) if err else (left, "")
