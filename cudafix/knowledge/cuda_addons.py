"""CUDA packages outside torch whose wheel name carries the CUDA major (cupy, jax's plugins,
onnxruntime-gpu), and how the same release is named for another major.

The planner (cudafix.plans.addons) moves them with torch when the driver cannot run their CUDA
major: one plan, and another package never blocks torch's.  A family is *known* when the name of
its other-major wheel and the driver that major needs are both cited; otherwise the plan lists the
package ``open`` with the reason and the command to run by hand.

Minimum driver of a CUDA major: the floor of NVIDIA's minor-version compatibility table ("CUDA
12.x >= 525", "CUDA 13.x >= 580", Table 1 of
https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html; the exact
point releases are cudafix.knowledge.cuda_driver.MINOR_COMPAT_FLOOR_ROWS).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Tuple

from cudafix.knowledge import PRIMARY, UNCONFIRMED


@dataclasses.dataclass(frozen=True)
class AddonFamily:
    """Wheels of one project that differ only by the CUDA major in their name."""

    pattern: str  # regex on the PEP 503 name; group "major" is the CUDA major
    template: str  # the name for another major: template % major
    majors: Tuple[int, ...]  # majors the project publishes wheels for
    same_version: bool  # the same release number exists for every major (so `==version` is right)
    source: str
    status: str = PRIMARY
    note: str = ""


FAMILIES: Tuple[AddonFamily, ...] = (
    AddonFamily(
        r"^cupy-cuda(?P<major>1[1-9])x$", "cupy-cuda%dx", (11, 12, 13), True,
        "https://docs.cupy.dev/en/stable/install.html (one package per CUDA major: cupy-cuda13x for CUDA 13.x, "
        "cupy-cuda12x for CUDA 12.x, cupy-cuda11x for CUDA 11.2 ~ 11.x; CuPy v14: CUDA v12.0 .. v13.1)",
        note="CuPy releases every version as one wheel per CUDA major; v14 has no CUDA 11 wheel",
    ),
    AddonFamily(
        r"^jax-cuda(?P<major>1[1-9])-(?P<part>plugin|pjrt)$", "jax-cuda%d-{part}", (12, 13), False,
        "https://docs.jax.dev/en/latest/installation.html (pip install \"jax[cuda12]\" / \"jax[cuda13]\")",
        UNCONFIRMED,
        note="whether a jax release publishes CUDA 12 plugins next to its CUDA 13 ones is not in cudafix's data",
    ),
)

# Packages with CUDA code whose name does not say the major: cudafix cannot name the other build.
UNNAMED = {
    "onnxruntime-gpu": "onnxruntime-gpu's PyPI wheel is built for one CUDA major per release "
                       "(https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements); "
                       "which one a version targets is not in cudafix's data",
}


def family_of(name: str) -> Optional[Tuple[AddonFamily, int, str]]:
    """(family, its CUDA major, the name for another major as a %-template) for a wheel name."""
    for fam in FAMILIES:
        m = re.match(fam.pattern, name)
        if m:
            part = m.groupdict().get("part") or ""
            return fam, int(m.group("major")), fam.template.replace("{part}", part)
    return None
