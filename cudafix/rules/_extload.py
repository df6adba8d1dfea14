"""What loading an extension module fails with, as the loader reports it (shared by
ext-torch-symbols and torchvision-mismatch, so that one cause gives one finding).

ld.so maps every DT_NEEDED library (breadth first) before it binds a symbol, so a missing
library is the first failure whenever there is one; only then an undefined symbol (glibc
elf/dl-deps.c, elf/dl-lookup.c; the facts: cudafix.probes.pyenv.extload, cudafix.probes.binfmt.elfsym)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

from cudafix.model.snapshot import ExtensionModule, Snapshot


def fails(m: ExtensionModule) -> bool:
    return bool(m.torch_linked and (m.missing_needed or m.missing_torch_symbols_count))


def load_error(m: ExtensionModule) -> Optional[str]:
    """dlerror()'s text for loading ``m`` after `import torch` (what ctypes / ImportError show)."""
    if m.missing_needed:
        return "%s: cannot open shared object file: No such file or directory" % m.missing_needed
    if m.missing_torch_symbols_count:
        first = m.missing_torch_symbols[0] if m.missing_torch_symbols else "?"
        return "%s: undefined symbol: %s" % (m.path, first)
    return None


def file_evidence(m: ExtensionModule) -> str:
    name = os.path.basename(m.path)
    parts = []
    if m.missing_needed:
        by = os.path.basename(m.missing_needed_by) if m.missing_needed_by and m.missing_needed_by != m.path else name
        parts.append("DT_NEEDED %s (of %s) is found by no step of the loader's search: loading stops there, before any "
                     "symbol is bound" % (m.missing_needed, by))
    if m.missing_torch_symbols_count:
        first = m.missing_torch_symbols[0] if m.missing_torch_symbols else "?"
        parts.append("%d of the %d torch symbols it imports are defined by no library in %s (first in binding order: %s%s)" % (
            m.missing_torch_symbols_count, m.torch_symbols_checked, m.checked_against, first,
            "; demangled: %s" % m.missing_demangled if m.missing_demangled and m.missing_demangled != first else ""))
    return "%s (%s): %s" % (m.path, m.owner_via or m.location, "; ".join(parts))


def failing(snap: Snapshot, package: str) -> List[ExtensionModule]:
    return [m for m in snap.extensions.modules if m.package == package and fails(m)]
