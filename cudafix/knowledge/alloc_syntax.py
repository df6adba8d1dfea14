"""PYTORCH_CUDA_ALLOC_CONF checked the way the installed torch's parser reads it.

The option names come from torch's own libraries (cudafix.probes.pyenv.alloc_conf -> AllocConfKeys);
this module knows how each parser generation splits the value and which values it refuses.
Three generations, told apart by the parser's own texts in the library:

- ``regex`` (torch 1.10): the value is split on runs of spaces/commas, each item on runs of ':';
  an item without ':' is ignored; only ``max_split_size_mb`` exists and must be > 20 although the
  message says ">= 20" (c10/cuda/CUDACachingAllocator.cpp v1.10.0, ``CachingAllocatorConfig::parseArgs``:
  ``TORCH_CHECK(val2 > kLargeBuffer / (1024 * 1024), ...)``).
- ``lexer`` (torch 2.0 - 2.8): ``,`` ``:`` ``[`` ``]`` are tokens, spaces are dropped; every item
  is ``key:value``; an unknown key raises "Unrecognized CachingAllocator option: KEY".
- ``tokenizer`` (torch 2.9+, c10/core/AllocatorConfig.cpp ``ConfigTokenizer``): the same tokens;
  an unknown key raises "Unrecognized key 'KEY' in ... allocator config."

Every verdict here is compared with torch's own parser on real builds in docs/alloc-conf.md
(tools.alloc_conf_proof; tests/test_alloc_conf_real.py re-runs it).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Sequence

from cudafix.model.record import record
from cudafix.model.lazyre import lazy_re

TORCH_URL = "https://github.com/pytorch/pytorch/blob/"
SOURCES = (
    TORCH_URL + "v1.10.0/c10/cuda/CUDACachingAllocator.cpp",
    TORCH_URL + "v2.5.1/c10/cuda/CUDAAllocatorConfig.cpp",
    TORCH_URL + "main/c10/core/AllocatorConfig.cpp",
    "docs/alloc-conf.md",
)

REJECTED = "rejected"  # the key is not in this torch's parser
BAD_VALUE = "bad-value"
MALFORMED = "malformed"
UNCERTAIN = "uncertain"  # the name is in the library only as a fragment (probe state tail/pieces)
NOT_CHECKED = "not-checked"  # a key cudafix knows no value rule for


@record(frozen=True)
class Item:
    """One ``key:value`` item as the user wrote it (``raw``), and as torch's parser sees it."""

    raw: str
    key: str
    value: Optional[str]  # None: no ':' in the item


@record(frozen=True)
class Issue:
    """What torch's parser would make of one item: refuse it, or cudafix cannot tell."""

    key: str
    kind: str  # REJECTED | BAD_VALUE | MALFORMED | UNCERTAIN
    reason: str


def split_items(value: str, parser: str) -> List[Item]:
    """The items of ``value`` in order, each with the user's own spelling."""
    if parser == "regex":
        out = []
        for raw in re.split(r"[\s,]+", value):
            if not raw:
                continue
            kv = [p for p in re.split(r":+", raw)]
            out.append(Item(raw, kv[0], kv[1] if len(kv) >= 2 else None))
        return out
    items: List[str] = []
    depth, cur = 0, ""
    for ch in value:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for raw in items:
        if not raw.strip():
            continue
        flat = raw.replace(" ", "")
        key, sep, val = flat.partition(":")
        out.append(Item(raw.strip(), key, val if sep else None))
    return out


# -- values -----------------------------------------------------------------------------------

_INT = lazy_re(r"^\s*[+-]?\d+")  # what C's stoi/stoul accept as a prefix
_FLOAT = lazy_re(r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)")


def _stoi(v: str) -> Optional[int]:
    m = _INT.match(v)
    if not m:
        return None
    n = int(m.group(0))
    return n if -(1 << 31) <= n < (1 << 31) else None  # std::stoi throws out_of_range


def _stod(v: str) -> Optional[float]:
    m = _FLOAT.match(v)
    return float(m.group(0)) if m else None


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _size_t(n: int) -> int:
    return n % (1 << 64)  # stoi's int stored in a size_t: -5 becomes huge


def _mb_min(key: str) -> Callable[[str, str, Optional[str]], Optional[str]]:
    def check(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
        n = _stoi(v)
        if n is None:
            return "%s:%s is not an integer number of MB" % (key, v)
        strict = parser == "regex" or max_split == ">"
        n = _size_t(n)
        if n < 20 or (strict and n == 20):
            return "%s must be %s 20 (MB)" % (key, ">" if strict else ">=")
        return None
    return check


def _bool(key: str) -> Callable[[str, str, Optional[str]], Optional[str]]:
    def check(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
        return None if v in ("True", "False") else "%s takes True or False (exactly), not %r" % (key, v)
    return check


def _gc(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
    f = _stod(v)
    if f is None:
        return "garbage_collection_threshold:%s is not a number" % v
    return None if 0.0 < f < 1.0 else "garbage_collection_threshold must be in (0.0, 1.0)"


def _fraction(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
    f = _stod(v)
    if f is None:
        return "per_process_memory_fraction:%s is not a number" % v
    return None if 0.0 <= f <= 1.0 else "per_process_memory_fraction must be in [0.0, 1.0]"


def _backend(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
    return None if v in ("native", "cudaMallocAsync") else "backend takes native or cudaMallocAsync, not %r" % v


def _threads(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
    n = _stoi(v)
    if n is None or not _pow2(_size_t(n)):
        return "pinned_num_register_threads must be a power of 2"
    return None if _size_t(n) <= 128 else "pinned_num_register_threads must be <= 128"


def _positive(key: str) -> Callable[[str, str, Optional[str]], Optional[str]]:
    def check(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
        n = _stoi(v)
        return None if n is not None and n > 0 else "%s must be an integer > 0" % key
    return check


def _roundup(v: str, parser: str, max_split: Optional[str]) -> Optional[str]:
    if not v.startswith("["):
        n = _stoi(v)
        if n is None or not _pow2(_size_t(n)):
            return "roundup_power2_divisions must be a power of 2 (or a [SIZE:DIV,...,>:DIV] list)"
        return None
    if not v.endswith("]"):
        return "roundup_power2_divisions: unterminated [ list"
    body = v[1:-1]
    if not body:
        return None
    for part in body.split(","):
        size, sep, div = part.partition(":")
        if not sep:
            return "roundup_power2_divisions list items are SIZE:DIVISIONS, not %r" % part
        d = _stoi(div)
        if d is None or not (d == 0 or _pow2(_size_t(d))):
            return "roundup_power2_divisions: divisions %r must be 0 or a power of 2" % div
        if size != ">":
            s = _INT.match(size)
            if s is None or not _pow2(int(s.group(0)) % (1 << 64)):
                return "roundup_power2_divisions: interval %r must be a power of 2 (MB) or >" % size
    return None


# The value rules per key (keys whose rule cudafix does not know are "not checked").
VALUES: Dict[str, Callable[[str, str, Optional[str]], Optional[str]]] = {
    "max_split_size_mb": _mb_min("max_split_size_mb"),
    "max_non_split_rounding_mb": _mb_min("max_non_split_rounding_mb"),
    "garbage_collection_threshold": _gc,
    "roundup_power2_divisions": _roundup,
    "backend": _backend,
    "expandable_segments": _bool("expandable_segments"),
    "release_lock_on_cudamalloc": _bool("release_lock_on_cudamalloc"),
    "release_lock_on_hipmalloc": _bool("release_lock_on_hipmalloc"),
    "pinned_use_cuda_host_register": _bool("pinned_use_cuda_host_register"),
    "pinned_use_hip_host_register": _bool("pinned_use_hip_host_register"),
    "pinned_use_background_threads": _bool("pinned_use_background_threads"),
    "graph_capture_record_stream_reuse": _bool("graph_capture_record_stream_reuse"),
    "pinned_num_register_threads": _threads,
    "per_process_memory_fraction": _fraction,
    "pinned_reserve_segment_size_mb": _positive("pinned_reserve_segment_size_mb"),
}


def error_text(key: str, parser: str) -> str:
    """What this torch raises for a key it does not know."""
    if parser == "tokenizer":
        return "Unrecognized key '%s' in CUDA allocator config." % key
    return "Unrecognized CachingAllocator option: %s" % key


def check(value: str, parser: str, accepted: Sequence[str], rejected: Sequence[str], uncertain: Sequence[str],
          max_split: Optional[str] = None) -> List[Issue]:
    """Every item of ``value`` this torch's parser refuses (or may refuse), in order.

    ``accepted`` / ``rejected`` / ``uncertain``: the probe's answer for the names in ``value``;
    a name in none of them is reported uncertain.  torch stops at its first error; this goes on,
    so that a repair can drop every rejected key at once.
    """
    issues: List[Issue] = []
    for it in split_items(value, parser):
        if parser == "regex" and it.value is None:
            continue  # torch 1.10 skips an item without ':' (kv.size() < 2)
        if it.key in rejected or (it.key not in accepted and it.key not in uncertain and not it.key):
            issues.append(Issue(it.key, REJECTED, "torch fails with: %s" % error_text(it.key, parser)))
            continue
        if it.key not in accepted:
            issues.append(Issue(it.key, UNCERTAIN, "%r is not a name torch's parser spells out as one string; "
                                "it may fail with: %s" % (it.key, error_text(it.key, parser))))
            continue
        if it.value is None or it.value == "":
            issues.append(Issue(it.key, MALFORMED, "%s has no value (expected %s:VALUE)" % (it.key, it.key)))
            continue
        rule = VALUES.get(it.key)
        why = rule(it.value, parser, max_split) if rule else None
        if why:
            issues.append(Issue(it.key, BAD_VALUE, why))
    return issues


def without(value: str, parser: str, drop: Sequence[str]) -> str:
    """``value`` minus the items whose key is in ``drop``; the other items keep their spelling and order."""
    kept = [it.raw for it in split_items(value, parser) if it.key not in drop or (parser == "regex" and it.value is None)]
    return ",".join(kept)


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute: one each)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def nearest(key: str, names: Sequence[str], most: int = 2) -> Optional[str]:
    """The one name in ``names`` within ``most`` edits of ``key`` (a typo's real spelling), or None
    when there is none or two are equally near (no guess)."""
    scored = sorted((_distance(key.lower(), n.lower()), n) for n in set(names) if n and n != key)
    if not scored or scored[0][0] > most or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def renamed(value: str, parser: str, key: str, new: str) -> str:
    """``value`` with the items keyed ``key`` spelled ``new``; the rest as the user wrote it."""
    out = []
    for it in split_items(value, parser):
        if it.key == key:
            out.append(new if it.value is None else "%s:%s" % (new, it.value))
        else:
            out.append(it.raw)
    return ",".join(out)
