"""GPU product name -> lookup key, shared by the generator of gpu_names.py and the lookup.

NVIDIA's list says "NVIDIA RTX A6000" and "GeForce RTX 4090"; nvidia-smi and NVML print
"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090 Laptop GPU",
"Tesla V100-SXM2-16GB", "Quadro RTX 8000"; users type "a6000", "rtx 4090", "H100 PCIe".  The
key keeps what names the product and drops what does not change the chip: the brand words,
form factor, memory size and laptop/board words.  Two products whose keys collide with
different compute capabilities make the generator fail (tools/gpu_names.py).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List

from cudafix.model.lazyre import lazy_re

# Words that never decide the chip (a 4080 laptop GPU is an AD104, the desktop one an AD103:
# both Ada, 8.9; the generator checks every name of pci.ids against its chip).
_DROP = frozenset((
    "NVIDIA", "GEFORCE", "TESLA", "QUADRO", "CORPORATION", "GPU", "LAPTOP", "MOBILE", "NOTEBOOK",
    "GENERATION", "EDITION", "PCIE", "NVL", "LHR", "LITE", "HASH", "RATE", "GRAPHICS",
    "SXM", "SXM2", "SXM3", "SXM4", "SXM5", "SXM6", "HBM2", "HBM2E", "HBM3", "HBM3E",
))
_MEMORY = lazy_re(r"^\d+(GB|G|GIB|MB)$")


def tokens(name: str) -> List[str]:
    text = str(name).upper().replace("(TM)", " ").replace("(R)", " ")
    # "GeForce RTX 4080 Max-Q" and "MAXQ": the Max-Q power design is the same chip
    text = re.sub(r"\bMAX[\s\-_]*Q\b", " ", text)
    out = []
    for tok in re.split(r"[\s\-_/,()\[\]]+", text):
        if not tok or tok in _DROP or _MEMORY.match(tok):
            continue
        out.append(tok)
    return out


def name_key(name: str) -> str:
    """"NVIDIA A100-SXM4-80GB" -> "A100"; "NVIDIA RTX 6000 Ada Generation" -> "RTX 6000 ADA"."""
    return " ".join(tokens(name))


def name_keys(name: str) -> List[str]:
    """The key of ``name``, then (if different) the key without its parenthetical part:
    "NVIDIA GB10 (DGX Spark)" -> ["GB10 DGX SPARK", "GB10"]."""
    keys = [name_key(name)]
    bare = re.sub(r"\([^)]*\)", " ", str(name))
    if name_key(bare) not in keys:
        keys.append(name_key(bare))
    return [k for k in keys if k]
