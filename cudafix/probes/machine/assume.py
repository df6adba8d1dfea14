"""What-if: replace the probed driver / GPUs of a snapshot (`--assume-driver`, `--assume-gpu`,
CUDAFIX_ASSUME_DRIVER / CUDAFIX_ASSUME_GPU), like conda's CONDA_OVERRIDE_CUDA for the whole stack.
"""

from __future__ import annotations

import copy
from typing import List, Mapping, Optional, Sequence, Tuple

from cudafix.knowledge import cuda_driver
from cudafix.knowledge.gpus import parse_gpu_spec
from cudafix.model.visible_devices import resolve_visible
from cudafix.model.snapshot import GPU, Snapshot
from cudafix.model import cuda as cudaver

VIA_DRIVER = "assumed (--assume-driver)"
VIA_GPU = "assumed (--assume-gpu)"

ENV_DRIVER = "CUDAFIX_ASSUME_DRIVER"
ENV_GPU = "CUDAFIX_ASSUME_GPU"


class AssumeError(ValueError):
    """A bad --assume-* value; the message is one line for the user."""


def parse_driver(text: str) -> Tuple[str, Optional[int]]:
    """"580.95.05" -> ("580.95.05", 13000); AssumeError for anything that is not a driver version."""
    value = str(text).strip()
    if not cuda_driver.is_driver_version(value):
        raise AssumeError("--assume-driver %r: not a driver version (e.g. 580.95.05)" % text)
    return value, cuda_driver.cuda_for_driver(value)


def parse_gpus(specs: Sequence[str]) -> List[Tuple[Optional[str], str]]:
    out = []
    for spec in specs:
        try:
            out.append(parse_gpu_spec(spec))
        except ValueError as exc:
            msg = str(exc)
            raise AssumeError("--assume-gpu %s" % msg if msg.startswith("'") else "--assume-gpu %r: %s" % (spec, msg)) from None
    return out


def visible_indices(env: Mapping[str, str], count: int) -> Tuple[Optional[List[int]], Optional[str]]:
    """CUDA's view of CUDA_VISIBLE_DEVICES for ``count`` assumed GPUs (no UUIDs, PCI order): the
    one parser of cudafix/model/visible_devices.py.  (indices, None), or (None, why)."""
    gpus = [GPU(index=i, name="assumed") for i in range(count)]
    res = resolve_visible(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    if res.indices is None:
        why = res.reason
        if any(e.strip().upper().startswith(("GPU-", "MIG-")) for e in (env.get("CUDA_VISIBLE_DEVICES") or "").split(",")):
            why = "CUDA_VISIBLE_DEVICES names UUIDs, which assumed GPUs do not have"
        return None, why
    return list(res.indices), None


def apply(snapshot: Snapshot, driver: Optional[str], gpus: Sequence[str]) -> Snapshot:
    """A NEW snapshot with the driver and/or GPUs replaced; ``snapshot.assumed`` says what was."""
    new = copy.deepcopy(snapshot)
    assumed = dict(new.assumed)
    if driver:
        version, cuda = parse_driver(driver)
        d = new.driver
        assumed["driver"] = {
            "value": version,
            "cuda_version": cuda,
            "replaced": {
                "kernel_version": d.kernel_version,
                "libcuda_version": d.libcuda_version,
                "cuda_version": d.cuda_version,
                "nvml_version": d.nvml_version,
            },
        }
        d.kernel_version = version
        d.libcuda_version = version
        d.nvml_version = version
        d.cuda_version = cuda
        for field in ("kernel_version", "libcuda_version", "nvml_version", "cuda_version"):
            d.found_via[field] = VIA_DRIVER
            d.unknown.pop(field, None)
        if cuda is None:
            d.unknown["cuda_version"] = "driver branch R%d is not in cudafix's driver table" % cuda_driver.driver_branch(version)
        else:
            row = cuda_driver.branch_row(version)
            if row is not None and row.status not in ("primary", "derived"):
                d.found_via["cuda_version"] = "%s; R%d -> %s is %s" % (
                    VIA_DRIVER, row.branch, cudaver.version_text(cuda), row.status)
    if gpus:
        parsed = parse_gpus(gpus)
        assumed["gpus"] = {
            "values": list(gpus),
            "replaced": [g.name for g in new.gpus.gpus],
        }
        new.gpus.gpus = [
            GPU(index=i, name=name or "GPU with compute capability %s" % cc, compute_capability=cc, found_via=VIA_GPU)
            for i, (name, cc) in enumerate(parsed)
        ]
        new.gpus.found_via = {"gpus": VIA_GPU}
        new.gpus.unknown = {}
        visible, why = visible_indices(new.env, len(parsed))
        new.gpus.visible = visible
        if why:
            new.gpus.unknown["visible"] = why
        else:
            new.gpus.found_via["visible"] = "CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in new.env else "all GPUs (CUDA_VISIBLE_DEVICES unset)"
    new.assumed = assumed
    return new


def from_env(env: Mapping[str, str]) -> Tuple[Optional[str], List[str]]:
    """(driver, gpus) from CUDAFIX_ASSUME_DRIVER / CUDAFIX_ASSUME_GPU (comma-separated)."""
    driver = (env.get(ENV_DRIVER) or "").strip() or None
    gpus = [g.strip() for g in (env.get(ENV_GPU) or "").split(",") if g.strip()]
    return driver, gpus
