"""GPU product -> compute capability, and which CUDA toolkits support which SM
(NVIDIA's CUDA GPU pages and its toolkit/driver/architecture matrix, URLs below).

A name is looked up first in gpu_names.py, generated from NVIDIA's CUDA GPU lists and pci.ids
(tools/gpu_names.py, sources in tests/fixtures/gpus/), then in the family patterns of
GPU_CC below; a miss answers None (unknown), and --assume-gpu suggests the nearest names.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

from cudafix.knowledge import (
    DERIVED,
    PRIMARY,
    SECONDARY,
    version_tuple,
)
from cudafix.knowledge.arch import parse_cc
from cudafix.knowledge.gpu_keys import name_key, name_keys
from cudafix.model.record import record

CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus"
LEGACY_GPUS = "https://developer.nvidia.com/cuda-legacy-gpus"
OLD_CUDA_GPUS = (
    "older edition of https://developer.nvidia.com/cuda-gpus as copied at "
    "https://blog.csdn.net/HaoZiHuang/article/details/125834480 and the TensorRT support matrix"
)
ARCH_MATRIX = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"
PER_SM = (
    "ptxas --help (--gpu-name list) of NVIDIA's nvidia-cuda-nvcc-cuXX wheels on PyPI; "
    "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html; "
    "https://github.com/llvm/llvm-project/blob/337115da/llvm/include/llvm/TargetParser/NVPTXTargetParser.def"
)


@record(frozen=True)
class GpuCC:
    """A GPU product name pattern and its compute capability."""

    product: str  # as NVIDIA names it
    pattern: str  # regex searched in the normalised name (upper case, '-'/'_' -> ' ')
    cc: str  # "9.0"
    source: str
    status: str = PRIMARY


def _g(product, pattern, cc, source=CUDA_GPUS, status=PRIMARY):
    return GpuCC(product, pattern, cc, source, status)


# Order matters: the first matching row wins, so specific names come before families.
GPU_CC: Tuple[GpuCC, ...] = (
    _g("GeForce RTX 5090", r"\bRTX 5090\b", "12.0"),
    _g("RTX PRO 6000 Blackwell", r"\bRTX PRO 6000 BLACKWELL\b", "12.0"),
    _g("GB10 (DGX Spark)", r"\bGB10\b", "12.1"),
    _g("Jetson T5000 / T4000 (Thor)", r"\b(JETSON )?(THOR|T5000|T4000)\b", "11.0"),
    _g("GB300", r"\bGB300\b", "10.3"),
    _g("B300", r"\bB300\b", "10.3"),
    _g("GB200", r"\bGB200\b", "10.0"),
    _g("B200", r"\bB200\b", "10.0"),
    _g("GH200", r"\bGH200\b", "9.0"),
    _g("H200", r"\bH200\b", "9.0"),
    _g("H100", r"\bH100\b", "9.0"),
    _g("L40S", r"\bL40S\b", "8.9"),
    _g("L40", r"\bL40\b", "8.9"),
    _g("L4", r"\bL4\b", "8.9"),
    _g("GeForce RTX 4090", r"\bRTX 4090\b", "8.9"),
    _g("Jetson AGX Orin / Orin NX / Orin Nano", r"\bORIN\b", "8.7"),
    _g("A40", r"\bA40\b", "8.6"),
    _g("A16", r"\bA16\b", "8.6"),
    _g("A10", r"\bA10\b", "8.6"),
    _g("A2", r"\bA2\b", "8.6"),
    _g("GeForce RTX 3090", r"\bRTX 3090\b", "8.6"),
    _g("A100", r"\bA100\b", "8.0", OLD_CUDA_GPUS, SECONDARY),
    _g("A30", r"\bA30\b", "8.0", OLD_CUDA_GPUS, SECONDARY),
    _g("T4", r"\bT4\b", "7.5", OLD_CUDA_GPUS, SECONDARY),
    _g("GeForce RTX 2080 Ti", r"\bRTX 2080\b", "7.5",
       "Turing = 7.5 per " + ARCH_MATRIX + "; product row only in a secondary copy", SECONDARY),
    _g("V100", r"\bV100S?\b", "7.0", LEGACY_GPUS),
    _g("Jetson AGX Xavier / Xavier NX", r"\bXAVIER\b", "7.2", LEGACY_GPUS),
    _g("Jetson TX2", r"\bTX2\b", "6.2", LEGACY_GPUS),
    _g("GeForce GTX 1080 Ti", r"\bGTX 1080 TI\b", "6.1", LEGACY_GPUS),
    _g("Tesla P100", r"\bP100\b", "6.0", LEGACY_GPUS),
    _g("Tesla P4 / P40", r"\bP40?\b", "6.1", PER_SM + " ('sm_61 Pascal (GTX 10xx, P4/P40)')", DERIVED),
    _g("Jetson Nano", r"\bJETSON NANO\b", "5.3", LEGACY_GPUS),
    _g("Tesla M60 / M40", r"\bM[46]0\b", "5.2", LEGACY_GPUS),
    _g("Tesla K80", r"\bK80\b", "3.7", "older cuda-gpus edition copy: https://blog.csdn.net/HaoZiHuang/article/details/125834480", SECONDARY),
    _g("Tesla K20 / K40", r"\bK[24]0[CMX]?\b", "3.5", PER_SM + " ('sm_35 Kepler (K20/K40)')", SECONDARY),
    # Families (a whole GeForce generation shares one chip family / CC).
    _g("GeForce RTX 50 series", r"\bRTX 50[5-9]0\b", "12.0", PER_SM + " ('sm_120 Blackwell RTX (RTX 50xx, RTX PRO 6000)')", DERIVED),
    _g("GeForce RTX 40 series", r"\bRTX 40[5-9]0\b", "8.9", ARCH_MATRIX + " (Ada = 8.9); RTX 4090 row of " + CUDA_GPUS, DERIVED),
    _g("GeForce RTX 30 series", r"\bRTX 30[5-9]0\b", "8.6", PER_SM + " ('sm_86 Ampere (GA10x)'); RTX 3090 row of " + CUDA_GPUS, DERIVED),
    _g("GeForce RTX 20 series", r"\bRTX 20[6-8]0\b", "7.5", ARCH_MATRIX + " (Turing = 7.5)", DERIVED),
    _g("GeForce GTX 10 series", r"\bGTX 10[5-8]0\b", "6.1", PER_SM + " ('sm_61 Pascal (GTX 10xx, P4/P40)')", DERIVED),
)


def normalize_name(name: str) -> str:
    """NVML/procfs product names -> comparable form ("NVIDIA A100-SXM4-80GB" -> "NVIDIA A100 SXM4 80GB")."""
    text = re.sub(r"[-_/,()]+", " ", str(name).upper())
    return re.sub(r"\s+", " ", text).strip()


def _named() -> Dict[str, GpuCC]:
    """lookup key -> row, from NVIDIA's lists and pci.ids (knowledge/gpu_names.py, generated)."""
    global _NAMED
    if _NAMED is None:
        from cudafix.knowledge import gpu_names

        table: Dict[str, GpuCC] = {}
        for product, key, cc, src, via in gpu_names.ROWS:
            status, where = gpu_names.SOURCES[src]
            table.setdefault(key, GpuCC(product, "key " + key, cc, where + ("; " + via if via else ""), status))
        _NAMED = table
    return _NAMED


_NAMED: Optional[Dict[str, GpuCC]] = None


def named_row(name: str) -> Optional[GpuCC]:
    """The row of a name NVIDIA's list or pci.ids spells this way (any case, with or without
    "NVIDIA"/"GeForce"/"Tesla"/"Quadro", form factor, memory size, "Laptop GPU"); a short
    form with a letter ("a6000", "A10G") when it ends exactly one known name."""
    table = _named()
    for key in name_keys(name):
        if key in table:
            return table[key]
    key = name_key(name)
    if key and re.search(r"[A-Z]", key):
        hits = {table[k].cc: table[k] for k in table if k.endswith(" " + key)}
        if len(hits) == 1:
            return next(iter(hits.values()))
    return None


def suggest(name: str, n: int = 3) -> List[str]:
    """Known product names nearest to ``name`` (for a typo): NVIDIA's spelling, best first."""
    import difflib  # only for a typo: not on every run's import path (it pulls heapq)

    table = _named()
    key = name_key(name)
    out: List[str] = []
    for k in difflib.get_close_matches(key, list(table), n=n * 3, cutoff=0.5):
        product = table[k].product
        if product not in out:
            out.append(product)
    return out[:n]


def gpu_row(name: str) -> Optional[GpuCC]:
    norm = normalize_name(name)
    if not norm:
        return None
    row = named_row(name)
    if row is not None:
        return row
    for row in GPU_CC:
        if re.search(row.pattern, norm):
            return row
    return None


def compute_capability(name: str) -> Optional[str]:
    """Product name (as NVML / nvidia-smi / procfs print it) -> "X.Y", or None when unknown."""
    row = gpu_row(name)
    return row.cc if row else None


# -- which CUDA toolkits support which SM --------------------------------------------------


@record(frozen=True)
class SmSupport:
    """The first and last CUDA toolkits that can build for one sm_XY."""

    sm: int  # 90
    arch: str  # "Hopper"
    first_cuda: str  # first toolkit that compiles for it
    last_cuda: Optional[str]  # last toolkit that does (None: still supported)
    source: str
    status: str = PRIMARY
    note: str = ""


def _s(sm, arch, first, last, status=PRIMARY, note=""):
    return SmSupport(sm, arch, first, last, PER_SM, status, note)


SM_SUPPORT: Tuple[SmSupport, ...] = (
    _s(30, "Kepler", "6.0", "10.2", SECONDARY, "first toolkit per NVIDIA arch matrix family row"),
    _s(32, "Kepler", "6.0", "10.2", SECONDARY, "first toolkit per NVIDIA arch matrix family row"),
    _s(35, "Kepler (K20/K40)", "6.0", "11.8", PRIMARY, "first toolkit unconfirmed (existed earlier); dropped in 12.0"),
    _s(37, "Kepler (K80)", "6.0", "11.8", PRIMARY, "first toolkit unconfirmed (6.0 vs 6.5); dropped in 12.0"),
    _s(50, "Maxwell", "6.5", "12.9"),
    _s(52, "Maxwell", "6.5", "12.9"),
    _s(53, "Maxwell (Jetson Nano)", "6.5", "12.9", PRIMARY, "first toolkit unconfirmed (6.5 vs 7.0)"),
    _s(60, "Pascal (P100)", "8.0", "12.9"),
    _s(61, "Pascal (GTX 10xx, P4/P40)", "8.0", "12.9"),
    _s(62, "Pascal (Jetson TX2)", "8.0", "12.9"),
    _s(70, "Volta (V100)", "9.0", "12.9"),
    _s(72, "Volta (Jetson Xavier)", "9.1", "12.9", SECONDARY, "first toolkit from LLVM only"),
    _s(75, "Turing", "10.0", None),
    _s(80, "Ampere (A100/A30)", "11.0", None),
    _s(86, "Ampere (GA10x)", "11.1", None, SECONDARY, "first toolkit from LLVM (NVIDIA matrix lumps 8.6 under 11.0)"),
    _s(87, "Ampere (Jetson Orin)", "11.4", None, SECONDARY, "first toolkit from LLVM"),
    _s(88, "(no product named)", "13.0", None),
    _s(89, "Ada", "11.8", None),
    _s(90, "Hopper", "11.8", None),
    _s(100, "Blackwell (B200/GB200)", "12.8", None),
    _s(101, "Blackwell (Thor, old name)", "12.8", "12.9", PRIMARY, "renamed sm_110 in CUDA 13.0"),
    _s(103, "Blackwell Ultra (B300/GB300)", "12.9", None),
    _s(107, "(no product named)", "13.4", None),
    _s(110, "Jetson Thor", "13.0", None),
    _s(120, "Blackwell RTX (RTX 50xx, RTX PRO 6000)", "12.8", None),
    _s(121, "GB10 (DGX Spark)", "12.9", None),
)

KNOWN_SM = frozenset(row.sm for row in SM_SUPPORT)


def sm_support(sm: int) -> Optional[SmSupport]:
    for row in SM_SUPPORT:
        if row.sm == int(sm):
            return row
    return None


def cuda_supports_sm(cuda: str, sm: int) -> Optional[bool]:
    """Whether toolkit ``cuda`` ("12.1" / "12.1.1") can build for ``sm`` (90); None if sm unknown."""
    row = sm_support(sm)
    t = version_tuple(cuda)
    if row is None or len(t) < 1:
        return None
    c = (t + (0,))[:2]
    if c < version_tuple(row.first_cuda)[:2]:
        return False
    return not (row.last_cuda is not None and c > version_tuple(row.last_cuda)[:2])


# -- --assume-gpu specs -------------------------------------------------------------------


def parse_gpu_spec(spec: str) -> Tuple[Optional[str], str]:
    """A user's GPU spec -> (product name or None, "X.Y").

    Accepts a product name ("NVIDIA H200", "H100", "GeForce RTX 4090"), "sm_90", "9.0", or
    "NAME=X.Y" for a product cudafix does not know.  ValueError for anything else.
    """
    text = str(spec).strip()
    if not text:
        raise ValueError("empty GPU spec")
    if "=" in text:
        name, _, cc = text.rpartition("=")
        major, minor = _valid_cc(cc.strip(), spec)
        if not name.strip():
            raise ValueError("%r: missing GPU name before '='" % spec)
        return name.strip(), "%d.%d" % (major, minor)
    if re.match(r"^(sm_?\d+[af]?|\d+\.\d+)$", text, re.IGNORECASE):
        core = re.sub(r"[af]$", "", text, flags=re.IGNORECASE)
        core = re.sub(r"^sm_?", "", core, flags=re.IGNORECASE)
        major, minor = _valid_cc(core, spec)
        return None, "%d.%d" % (major, minor)
    cc = compute_capability(text)
    if cc is None:
        near = suggest(text)
        hint = (" (did you mean %s?)" % " or ".join(repr(n) for n in near)) if near else ""
        raise ValueError("%r: not a GPU name cudafix knows%s; give its compute capability as sm_XY "
                         "(e.g. sm_86) or NAME=X.Y" % (spec, hint))
    return text, cc


def _valid_cc(text: str, spec: str) -> Tuple[int, int]:
    try:
        major, minor = parse_cc(text)
    except ValueError:
        raise ValueError("%r: not a GPU name or sm_XY" % spec) from None
    if major * 10 + minor not in KNOWN_SM:
        raise ValueError("%r: no NVIDIA GPU has compute capability %d.%d" % (spec, major, minor))
    return major, minor
