"""What a pasted report says, fact by fact, each with the line it came from.

A pasted report (an issue's `python -m torch.utils.collect_env`, `nvidia-smi`, `pip list`, an
error...) is not a machine: cudafix keeps every fact it reads with its 1-based line number and
the tool that printed it, so the diagnosis can say what is certain from the text and what is
not.  Nothing here defaults a value: a fact the text lacks is absent.
"""

from __future__ import annotations

import dataclasses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional

from cudafix.model.record import record

# Fact names (the keys the parsers emit and the snapshot builder reads)
TORCH_VERSION = "torch.version"  # "2.1.0+cu121"
TORCH_CUDA = "torch.cuda"  # "12.1", or "none" for a CPU build
TORCH_HIP = "torch.hip"
CUDA_AVAILABLE = "torch.cuda_available"  # "true" | "false"
DRIVER_VERSION = "driver.version"  # "535.104.05"
DRIVER_CUDA = "driver.cuda"  # "12.2" (nvidia-smi's CUDA Version: what the driver supports)
GPU = "gpu"  # "0|NVIDIA GeForce RTX 4090" (index|name); index "" when not printed
NVCC = "toolkit.nvcc"  # "11.8" (nvcc --version, collect_env's CUDA runtime version)
CUDNN = "cudnn"
PYTHON_VERSION = "python.version"  # "3.10.12"
PLATFORM = "platform"  # "linux-x86_64" | "linux-aarch64" | "win-amd64" | "darwin"
WSL = "wsl"  # "true" when the kernel string says WSL 2
OS = "os"
MODULE_LOADING = "env.CUDA_MODULE_LOADING"
CUDA_HOME = "toolkit.cuda_home"  # torch.utils.cpp_extension.CUDA_HOME (detectron2 / mmcv collect_env)
EXT_CUDA = "extension.cuda"  # the CUDA detectron2 / mmcv's own ops were compiled with
PACKAGE = "package"  # "name|version|origin|build|channel"


@record
class Fact:
    """One fact read from the report."""

    name: str
    value: str
    line: int  # 1-based line number in the pasted text
    source: str  # the tool that printed it: "collect_env", "nvidia-smi", "pip list", ...
    text: str = ""  # the line itself (trimmed)


@record
class Symptom:
    """An error text in the report that a rule lists among its symptoms."""

    line: int
    text: str  # the line as read (trimmed)
    rules: List[str] = dataclasses.field(default_factory=list)  # rule ids it is a symptom of


@record
class Report:
    """Everything read from one pasted text."""

    facts: List[Fact] = dataclasses.field(default_factory=list)
    symptoms: List[Symptom] = dataclasses.field(default_factory=list)
    sources: List[str] = dataclasses.field(default_factory=list)  # tools recognised, in order of first line
    notes: List[str] = dataclasses.field(default_factory=list)  # what could not be read, conflicts
    lines: int = 0
    # name -> the conflicting facts after the first (two machines or envs in one paste)
    conflicts: Dict[str, List[Fact]] = dataclasses.field(default_factory=dict)

    def first(self, name: str) -> Optional[Fact]:
        for f in self.facts:
            if f.name == name:
                return f
        return None

    def all(self, name: str) -> List[Fact]:
        return [f for f in self.facts if f.name == name]

    def to_dict(self) -> Dict[str, object]:
        return {
            "lines": self.lines,
            "sources": list(self.sources),
            "facts": [dataclasses.asdict(f) for f in self.facts],
            "symptoms": [dataclasses.asdict(s) for s in self.symptoms],
            "notes": list(self.notes),
        }
