"""Reading what users paste into issues: collect_env, nvidia-smi, nvcc, pip/conda lists, yolo
checks and errors -> a partial Snapshot, the same rules and planner (docs/from-report.md).

`cudafix.paste.diagnose(text) -> (findings, plan)`; `cudafix.paste.read(text)` gives the whole
Diagnosis (facts with their lines, certainty, what needs the env).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, Optional, Tuple, Union


def diagnose(data: "Union[str, bytes]") -> "Tuple[List[Any], Optional[Any]]":
    """(findings, plan) for a pasted report (cudafix.paste.diagnosis.diagnose)."""
    from cudafix.paste import diagnosis as _d

    return _d.diagnose(data)


def read(data: "Union[str, bytes]") -> "Any":
    """The whole Diagnosis of a pasted report (cudafix.paste.diagnosis.read)."""
    from cudafix.paste import diagnosis as _d

    return _d.read(data)
