"""Error texts in a report -> the rules that explain them.

The patterns are the rules' own ``symptoms`` (what `cudafix explain` lists), made tolerant of
what varies between reports (numbers, paths, GPU names), plus a few phrasings the same errors
take in other torch releases (``EXTRA``, each with its rule).  A symptom is a clue, never a
verdict: the diagnosis shows it as likely until the facts decide.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Pattern, Sequence, Tuple

from cudafix.model.findings import Rule
from cudafix.paste.facts import Symptom

# Symptoms that describe behaviour rather than quote an error (they would match prose).
_DESCRIPTIVE = re.compile(r"returns False|hangs|stalls|stuck|utilisation|seemingly|fewer GPUs|stays idle|dominated|"
                          r"bandwidth|first CUDA operation|pip list / conda list|virtual package|multi-node", re.I)
_PREFIX = re.compile(r"^(?:[A-Za-z_.]*(?:Error|Warning|Exception)|AssertionError):\s*")

# (rule, pattern): phrasings of the same errors the rules' symptoms do not quote verbatim
EXTRA: Tuple[Tuple[str, str], ...] = (
    # torch/cuda/__init__.py _check_capability / _warn_arch_list (every release 1.x-2.x)
    ("arch-unsupported", r"CUDA capability sm_\d+ is not compatible with the current PyTorch installation"),
    ("arch-unsupported", r"which is of cuda capability \d+\.\d+\. PyTorch no longer supports this GPU"),
    ("arch-unsupported", r"no kernel image is available for execution on the device"),
    ("ext-arch-unsupported", r"no kernel image is available for execution on the device"),
    # torch/csrc/cuda: the driver API's message for CUDA_ERROR_INSUFFICIENT_DRIVER (torch < 1.8 and >= 1.8)
    ("driver-too-old", r"NVIDIA driver on your system is too old"),
    ("driver-too-old", r"CUDA driver version is insufficient for CUDA runtime version"),
    ("no-driver", r"Found no NVIDIA driver on your system"),
    ("no-driver", r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ("cpu-only-torch", r"Torch not compiled with CUDA enabled"),
    ("cpu-only-torch", r"Invalid CUDA '?device=[\d,]+'? requested"),
    ("torchvision-mismatch", r"operator torchvision::\w+ does not exist"),
    ("torchvision-mismatch", r"Detected that PyTorch and torchvision were compiled with different CUDA"),
    ("torchvision-mismatch", r"Couldn't load custom C\+\+ ops"),
    # torchvision/extension.py: the same error's second sentence, quoted alone
    ("torchvision-mismatch", r"This can happen if your PyTorch and torchvision versions are incompatible"),
    # torch/utils/cpp_extension.py _check_cuda_version
    ("cuda-home-mismatch", r"The detected CUDA version \(\d+\.\d+\) mismatches the version that was used to compile"),
    ("cuda-home-mismatch", r"The detected CUDA version \(\d+\.\d+\) has a minor version mismatch"),
    ("lib-shadowed", r"undefined symbol: __nvJitLink\w+, version libnvJitLink\.so\.\d+"),
    ("lib-shadowed", r"undefined symbol: cublasLt\w+, version libcublasLt\.so\.\d+"),
    ("lib-shadowed", r"cuDNN version incompatibility: PyTorch was compiled against"),
    ("driver-library-mismatch", r"Driver/library version mismatch"),
)

# cheap first test of a line: only lines with one of these go through the patterns
_HINTS = ("rror", "CUDA", "cuda", "river", "NVIDIA", "kernel image", "capability", "cuDNN", "symbol", "torchvision",
          "NCCL", "WinError", "llocator", "nvcc", "shared object", "compiled", "devices", "cudaError", "libcuda")


def _pattern(symptom: str) -> str:
    """One symptom text -> a regex: numbers, paths and quoted names vary; the first sentence matters."""
    text = _PREFIX.sub("", symptom.strip())
    text = re.split(r"(?<=[a-z)])\. ", text, maxsplit=1)[0]  # its first sentence
    out: List[str] = []
    for tok in re.split(r"(\.\.\.|\d+|'[^']*')", text):
        if tok == "...":
            out.append(r".*?")
        elif tok.isdigit():
            out.append(r"\d+")
        elif tok.startswith("'") and tok.endswith("'") and len(tok) > 1:
            out.append(r"'[^']*'")
        elif tok:
            out.append(re.sub(r"\\ ", r"\\s+", re.escape(tok)))
    return "".join(out)


def compile_table(rules: Iterable[Rule]) -> List[Tuple[str, "Pattern[str]"]]:
    table: List[Tuple[str, Pattern[str]]] = []
    for rule in rules:
        for s in rule.symptoms:
            if _DESCRIPTIVE.search(s) or len(s) < 20:
                continue
            table.append((rule.id, re.compile(_pattern(s), re.I)))
    table += [(rid, re.compile(p, re.I)) for rid, p in EXTRA]
    return table


_TABLE: List[Tuple[str, "Pattern[str]"]] = []


def table() -> List[Tuple[str, "Pattern[str]"]]:
    if not _TABLE:
        from cudafix import rules

        _TABLE.extend(compile_table(rules.REGISTRY))
    return _TABLE


def _hits(tab: List[Tuple[str, "Pattern[str]"]], line: str) -> List[str]:
    hit: List[str] = []
    for rid, pat in tab:
        if rid not in hit and pat.search(line):
            hit.append(rid)
    return hit


def find(lines: Sequence[str], limit: int = 50) -> List[Symptom]:
    """The report's error lines that rules list as symptoms (one Symptom per line, its rules in
    registry order); at most ``limit`` (a 10 MB log repeats the same error)."""
    tab = table()
    out: List[Symptom] = []
    seen: Dict[Tuple[str, ...], int] = {}
    for i, line in enumerate(lines):
        if not any(h in line for h in _HINTS):
            continue
        hit = _hits(tab, line)
        if not hit and i + 1 < len(lines) and lines[i + 1].strip():
            # a message wrapped at the terminal's width or the issue's: read it with its next line
            line = line.rstrip() + " " + lines[i + 1].strip()
            hit = _hits(tab, line)
        if not hit:
            continue
        key = tuple(hit)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 3:
            continue  # the same error again
        out.append(Symptom(line=i + 1, text=line.strip()[:300], rules=hit))
        if len(out) >= limit:
            break
    return out
