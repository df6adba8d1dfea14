"""The fleet's shared pieces: a finding aggregated over nodes, and how node lists are written."""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import List, Tuple


@dataclasses.dataclass
class Aggregated:
    rule: str
    severity: str
    nodes: List[str]
    messages: List[str]  # the distinct messages (at most 3)


def hostlist(names: List[str], limit: int = 12) -> str:
    """node[001-016,018] style, as Slurm prints node lists; other names as they are."""
    pat = re.compile(r"^(.*?)(\d+)$")
    runs: "collections.OrderedDict[Tuple[str, int], List[int]]" = collections.OrderedDict()
    plain: List[str] = []
    for n in names:
        m = pat.match(n)
        if m:
            runs.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
        else:
            plain.append(n)
    out = []
    for (prefix, width), nums in runs.items():
        nums = sorted(set(nums))
        spans, start, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:  # type: ignore[list-item]
            if x is not None and x == prev + 1:
                prev = x
                continue
            spans.append(("%0*d" % (width, start)) if start == prev else ("%0*d-%0*d" % (width, start, width, prev)))
            if x is not None:
                start = prev = x
        out.append(prefix + ("[%s]" % ",".join(spans) if len(nums) > 1 else spans[0]))
    out += plain
    if len(out) > limit:
        return ", ".join(out[:limit]) + ", ... (%d more)" % (len(out) - limit)
    return ", ".join(out)
