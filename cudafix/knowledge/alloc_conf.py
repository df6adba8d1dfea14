"""PYTORCH_CUDA_ALLOC_CONF keys per torch version (torch's allocator-config parser and the PRs that added each key).

"since" versions are inferred from the dates of the PRs that added them, so each key carries a range:
``earliest`` = the first release that *can* contain it (branch cut after the PR was opened or
merged) and ``latest`` = the release from which it is known/believed present.  A torch older
than ``earliest`` certainly rejects the key (that is what :func:`repair` drops); between the two
it is uncertain and only reported.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

from cudafix.knowledge import alloc_syntax
from cudafix.knowledge import (
    INFERRED,
    UNCONFIRMED,
    major_minor,
)
from cudafix.model.record import record

S = (
    "https://github.com/pytorch/pytorch/blob/main/c10/core/AllocatorConfig.cpp; "
    "https://docs.pytorch.org/docs/stable/notes/cuda.html (PYTORCH_CUDA_ALLOC_CONF)"
)


@record(frozen=True)
class AllocKey:
    """One PYTORCH_CUDA_ALLOC_CONF key: the torch versions that accept it (its value rules are
    knowledge/alloc_syntax.py's, the ones checked against torch's own parsers)."""

    name: str
    values: str  # for humans
    earliest: Optional[str]  # first release that can have it (None: unknown)
    latest: Optional[str]  # release from which it is believed present (None: unknown)
    source: str
    status: str
    removed_earliest: Optional[str] = None  # first release that can lack it again
    removed_latest: Optional[str] = None  # release from which it is certainly gone


ALLOC_KEYS: Tuple[AllocKey, ...] = (
    AllocKey("max_split_size_mb", "int MB >= 20", "1.9", "1.10",
             "PR #44742; AllocatorConfig.cpp parseMaxSplitSize; " + S, UNCONFIRMED),
    AllocKey("roundup_power2_divisions", "power of 2, or [SIZE:DIV,...,>:DIV] (2.0+)", "1.12", "1.12",
             "PR #74213 (list form PR #87290 -> 2.0); " + S, INFERRED),
    AllocKey("garbage_collection_threshold", "float in (0.0, 1.0)", "1.12", "1.12",
             "PR #74261; " + S, INFERRED),
    AllocKey("roundup_bypass_threshold_mb", "int MB", "2.0", "2.0",
             "PR #85940; absent from pytorch@01f9ef32 / @065861fb key lists; " + S, INFERRED,
             removed_earliest="2.1", removed_latest="2.9"),
    AllocKey("backend", "native | cudaMallocAsync", "2.0", "2.0",
             "PR #82682; pytorch@01f9ef32 c10/cuda/CUDAAllocatorConfig.cpp; " + S, INFERRED),
    AllocKey("expandable_segments", "True | False", "2.1", "2.1",
             "PR #96995; 2.0.x 'Unrecognized CachingAllocator option: expandable_segments' (user reports); " + S, INFERRED),
    AllocKey("release_lock_on_cudamalloc", "True | False", "2.2", "2.3",
             "PR #108367 (opened after the 2.1 cut); " + S, INFERRED),
    AllocKey("pinned_use_cuda_host_register", "True | False", "2.2", "2.3",
             "PR #108488; " + S, INFERRED),
    AllocKey("pinned_num_register_threads", "power of 2", "2.2", "2.3",
             "PR #108488; " + S, INFERRED),
    AllocKey("pinned_use_background_threads", "True | False", "2.5", "2.6",
             "PR #135524 (2024-09-09); " + S, INFERRED),
    AllocKey("max_non_split_rounding_mb", "int MB >= 20", "2.5", "2.6",
             "PR #136174 (2024-09-16); " + S, INFERRED),
    AllocKey("per_process_memory_fraction", "float", "2.9", "2.10",
             "PR #161035 (opened 2025-08-20); " + S, INFERRED),
    AllocKey("graph_capture_record_stream_reuse", "True | False", None, None,
             "present in pytorch@01f9ef32 CUDAAllocatorConfig.cpp (>= 2.9 era); " + S, UNCONFIRMED),
    AllocKey("pinned_reserve_segment_size_mb", "int > 0", None, None,
             "present in pytorch@01f9ef32 CUDAAllocatorConfig.cpp (>= 2.9 era); " + S, UNCONFIRMED),
)

_KEYS = {k.name: k for k in ALLOC_KEYS}

# The key lists read in c10's allocator config at pytorch@065861fb and @01f9ef32 are complete up to about this
# release; a key unknown to cudafix on a newer torch may be a new key, so it is only "uncertain".
KEYS_COMPLETE_UNTIL = "2.10"

UNKNOWN_KEY = "unknown-key"  # no torch version knows it
NOT_YET = "not-in-this-version"  # the key exists only in newer torch
REMOVED = "removed"  # the key was removed before this version
BAD_VALUE = "bad-value"
MALFORMED = "malformed"


@record(frozen=True)
class Problem:
    """Why one key of a PYTORCH_CUDA_ALLOC_CONF value is rejected (or may be)."""

    key: str
    kind: str  # UNKNOWN_KEY | NOT_YET | REMOVED | BAD_VALUE | MALFORMED
    reason: str  # one line, names the rule applied
    certain: bool  # False when the version boundary is only inferred
    source: str = S


def error_text(key: str, torch_version: str) -> str:
    """The error this torch prints for an unknown key (c10 AllocatorConfig.cpp / CUDAAllocatorConfig.cpp)."""
    if major_minor(torch_version) >= (2, 9):
        return "Unrecognized key '%s' in CUDA allocator config." % key
    return "Unrecognized CachingAllocator option: %s" % key


def split_conf(value: str, torch_version: Optional[str] = None) -> List[Tuple[str, Optional[str]]]:
    """(key, value) items as that torch's parser splits them (knowledge/alloc_syntax.py; the
    tokenizer's rules when the version is not given): "a:1,b:[x:1,>:2]" -> [("a", "1"), ("b", "[x:1,>:2]")]."""
    parser = parser_for(torch_version) if torch_version else "tokenizer"
    return [(it.key, it.value) for it in alloc_syntax.split_items(value or "", parser)]


def _v(s: Optional[str]) -> Tuple[int, ...]:
    return major_minor(s) if s else ()


def parser_for(torch_version: str) -> str:
    """The parser generation of a torch release (knowledge/alloc_syntax.py): regex before 2.0,
    the lexer from 2.0 to 2.8, the tokenizer from 2.9 (the probe reads it from the libraries;
    this is the fallback for a snapshot without that scan)."""
    tv = major_minor(torch_version)
    return "regex" if tv < (2, 0) else "lexer" if tv < (2, 9) else "tokenizer"


def check_alloc_conf(value: str, torch_version: str) -> List[Problem]:
    """Problems this torch has with a PYTORCH_CUDA_ALLOC_CONF value (empty list: fine)."""
    tv = major_minor(torch_version)
    problems: List[Problem] = []
    for key, val in split_conf(value, torch_version):
        spec = _KEYS.get(key)
        if spec is None:
            certain = tv <= _v(KEYS_COMPLETE_UNTIL)
            problems.append(Problem(key, UNKNOWN_KEY, "no torch release up to %s knows the key %r; torch %s %s: %s"
                                    % (KEYS_COMPLETE_UNTIL, key, torch_version, "fails with" if certain else "may fail with",
                                       error_text(key, torch_version)), certain))
            continue
        if spec.earliest and tv < _v(spec.earliest):
            problems.append(Problem(key, NOT_YET, "%s exists only from torch %s on; torch %s fails with: %s"
                                    % (key, spec.earliest, torch_version, error_text(key, torch_version)), True, spec.source))
            continue
        if spec.latest and tv < _v(spec.latest):
            problems.append(Problem(key, NOT_YET, "%s appeared in torch %s or %s (not confirmed which); torch %s may reject it"
                                    % (key, spec.earliest, spec.latest, torch_version), False, spec.source))
            continue
        if spec.removed_latest and tv >= _v(spec.removed_latest):
            problems.append(Problem(key, REMOVED, "%s is gone by torch %s; torch %s fails with: %s"
                                    % (key, spec.removed_latest, torch_version, error_text(key, torch_version)), True, spec.source))
            continue
        if spec.removed_earliest and tv >= _v(spec.removed_earliest):
            problems.append(Problem(key, REMOVED, "%s was removed between torch %s and %s (not confirmed when); torch %s may reject it"
                                    % (key, spec.removed_earliest, spec.removed_latest, torch_version), False, spec.source))
            continue
        if val is None or val == "":
            problems.append(Problem(key, MALFORMED, "%s has no value (expected %s:<%s>)" % (key, key, spec.values), True, spec.source))
            continue
        check = alloc_syntax.VALUES.get(key)
        why = check(val, parser_for(torch_version), None) if check is not None else None
        if why:
            problems.append(Problem(key, BAD_VALUE, "%s:%s is invalid: %s" % (key, val, why), True, spec.source))
    return problems


def repair(value: str, torch_version: str) -> Optional[str]:
    """``value`` without the keys this torch certainly rejects as unknown; None if nothing to drop.

    Only whole keys this torch does not know are dropped (never a bad value of a known key:
    that needs the user).  An empty result means "unset the variable".
    """
    drop = {p.key for p in check_alloc_conf(value, torch_version)
            if p.certain and p.kind in (UNKNOWN_KEY, NOT_YET, REMOVED)}
    if not drop:
        return None
    kept = [(k, v) for k, v in split_conf(value, torch_version) if k not in drop]
    return ",".join(k if v is None else "%s:%s" % (k, v) for k, v in kept)


# Every option name some torch release's parser compares keys with (the table above, plus the
# names in torch 2.14.1's libc10 / libc10_cuda that the table lacks; docs/alloc-conf.md).  The
# probe looks each of them up in the installed torch's libraries, with the keys the user set.
KNOWN_NAMES: Tuple[str, ...] = tuple(k.name for k in ALLOC_KEYS) + (
    "release_lock_on_hipmalloc",
    "pinned_use_hip_host_register",
    "large_segment_size_mb",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "pinned_free_catch_all",
    "throw_on_cudamalloc_oom",
)
