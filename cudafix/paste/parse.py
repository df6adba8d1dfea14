"""Pasted text -> facts: collect_env (torch 1.6 .. 2.11), nvidia-smi (table, -L, -q), nvcc
--version, pip list / pip freeze / conda list, ultralytics' `yolo checks` and banners.

One pass over the lines, in any order and with anything between them: each line is matched by
what it says, not by where it stands, so several dumps concatenated with log noise around them
read the same as one.  A value a tool prints for "not known" (``Could not collect``, ``N/A``,
``No CUDA``) is no fact at all.  Pure: text in, facts out.

The formats, from the tools' own source:
- collect_env: https://github.com/pytorch/pytorch/blob/main/torch/utils/collect_env.py (its
  env_info_fmt; `CUDA_MODULE_LOADING set to` since 1.13, `[pip3]`/`[conda]` library lines since
  1.2; "GPU models and configuration" one line per GPU, "GPU 0: name (UUID: ...)")
- nvidia-smi: the header `NVIDIA-SMI x  Driver Version: y  CUDA Version: z`, one table row per
  GPU `| 0  name  Off | 00000000:01:00.0 Off | ...`, `-L` (`GPU 0: name (UUID: ...)`), `-q`
  (`Driver Version : y`, `Product Name : name`)
- pip show: `Name: torch` then `Version: 2.4.0+cu121`
- ultralytics: `Ultralytics YOLOv8.0.196 Python-3.10.12 torch-2.1.0+cu121 CUDA:0 (name, 24268MiB)`
  (yolov5 / yolov9's `torch-1.13.1+cu117 CUDA:0 (...)` / `torch 1.10.0+cu102 CUDA:0 (...)`)
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

from cudafix.paste import facts as F
from cudafix.paste.facts import Fact

NOT_KNOWN = ("could not collect", "n/a", "no cuda", "none", "", "unknown", "not available")
_VER = r"\d+(?:\.\d+)+"

_CE_KEYS = (
    "PyTorch version", "CUDA used to build PyTorch", "ROCM used to build PyTorch", "Is CUDA available",
    "CUDA runtime version", "CUDA_MODULE_LOADING set to", "GPU models and configuration", "Nvidia driver version",
    "cuDNN version", "Python version", "Python platform", "OS",
)
# the key as collect_env prints it; a reporter's copy may lose the colon or change the case
# ("PyTorch version 1.5.0", "Os: Ubuntu"): the colon may go except after the short "OS"
_CE = re.compile(r"^\s*[-*]?\s*(?:(%s)\s*:?|(OS)\s*:)\s*(.*?)\s*$" % "|".join(re.escape(k) for k in _CE_KEYS if k != "OS"), re.I)
_CE_CANON = {k.lower(): k for k in _CE_KEYS}
_GPU_LINE = re.compile(r"^\s*GPU\s+(\d{1,3})\s*:\s*(.+?)\s*(?:\(UUID:.*)?$")
_SMI_HEAD = re.compile(r"Driver Version\s*:\s*(%s)" % _VER)
_SMI_CUDA = re.compile(r"CUDA Version\s*:\s*(\d+\.\d+)")
_SMI_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC)\s*\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_SMI_Q_NAME = re.compile(r"^\s*Product Name\s*:\s*(.+?)\s*$")
_NVCC = re.compile(r"Cuda compilation tools, release (\d+\.\d+)")
_YOLO_TORCH = re.compile(r"(?:Python-(\d+\.\d+\.\d+)\s+)?torch[- ](\d+\.\d+(?:\.\d+)?[\w.+]*)(?:\s+(?:CUDA:|CPU\b)|\s*$)")
# detectron2's and mmcv's collect_env: "KEY   value" (tabulate) or "KEY: value"
_D2_KEYS = ("PyTorch", "torchvision", "TorchVision", "GPU available", "CUDA available", "Driver version", "CUDA_HOME",
            "sys.platform", "Python", "MMCV", "mmcv", "detectron2", "MMCV CUDA Compiler", "CUDA compiler", "Detectron2 CUDA Compiler")
_D2 = re.compile(r"^\s*(%s)\s*(?::\s*|\s{2,})(\S.*?)\s*$" % "|".join(re.escape(k) for k in sorted(_D2_KEYS, key=len, reverse=True)))
_D2_GPU = re.compile(r"^\s*GPU\s+(\d{1,3}(?:\s*,\s*\d{1,3})*)\s*(?::\s*|\s{2,})(.+?)\s*(?:\(arch=[\d.]+\))?\s*$")
_RUNTIME = re.compile(r"^\s*-\s*CUDA Runtime\s+(\d+\.\d+)")  # torch.__config__.show(): torch's own CUDA
_YOLO_GPU = re.compile(r"CUDA:(\d+)\s*\(([^,()]+(?:\([^)]*\))?[^,()]*),\s*\d+\s*MiB\)")
_YOLO_ROW = re.compile(r"^(CUDA|Python|Install|OS)\s{2,}(\S.*?)\s*$")
_YOLO_PKG = re.compile(r"^(torch|torchvision)\s+\S*\s*(\d+\.\d+(?:\.\d+)?(?:\+\w+)?)(?:[<>=!]=?\S*)?\s*$")
_PKG = re.compile(
    r"^\s*(?:\[(pip3?|conda)\]\s+)?([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s*==\s*|\s+)(\d[\w.+!-]*)"
    r"(?:\s+(\S+))?(?:\s+(\S+))?\s*$")
# the distributions whose versions matter to a CUDA stack (others in a pip list are skipped)
_PKG_NAMES = re.compile(
    r"^(torch|pytorch|torchvision|torchaudio|pytorch-cuda|cudatoolkit|cuda-version|cuda-toolkit|cuda-runtime|cuda-nvcc|"
    r"cuda-cudart|cuda-bindings|cuda-python|nvidia-[a-z0-9-]+|xformers|triton|pytorch-triton|ultralytics|mmcv|mmcv-full|"
    r"detectron2|cupy-cuda\w+|onnxruntime-gpu|cudnn|nccl)$")


def _known(v: str) -> bool:
    return v.strip().lower() not in NOT_KNOWN and not v.strip().lower().startswith("could not")


def _norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _platform_of(text: str) -> Optional[str]:
    t = text.lower()
    if "windows" in t or t.startswith("win"):
        return "win-amd64"
    if "macos" in t or "darwin" in t or "mac os" in t:
        return "darwin"
    if "linux" in t or "ubuntu" in t or "debian" in t or "centos" in t or "rhel" in t or "fedora" in t:
        if "aarch64" in t or "arm64" in t:
            return "linux-aarch64"
        if "x86_64" in t or "amd64" in t:
            return "linux-x86_64"
        return "linux"
    return None


class _Reader:
    """The state of one pass: facts so far, and which multi-line block a line belongs to."""

    def __init__(self) -> None:
        self.facts: List[Fact] = []
        self.sources: List[str] = []
        self.in_gpu_block = False  # after "GPU models and configuration:" with the GPUs on the next lines
        self.q_gpus = 0  # -q "Product Name" lines seen (their GPU index)
        self.show_name = ""  # `pip show`: the "Name:" its "Version:" belongs to

    def add(self, name: str, value: str, n: int, source: str, line: str) -> None:
        self.facts.append(Fact(name, value, n, source, line.strip()[:200]))
        if source not in self.sources:
            self.sources.append(source)


def _collect_env(r: _Reader, key: str, value: str, n: int, line: str) -> None:
    src = "collect_env"
    if key == "PyTorch version":
        if _known(value) and re.match(r"^\d", value):
            r.add(F.TORCH_VERSION, value.split()[0], n, src, line)
    elif key == "CUDA used to build PyTorch":
        if value.strip().lower() == "none":
            r.add(F.TORCH_CUDA, "none", n, src, line)  # torch.version.cuda is None: a CPU (or ROCm) build
        elif re.match(r"^\d+\.\d+", value):
            r.add(F.TORCH_CUDA, re.match(r"^\d+\.\d+", value).group(0), n, src, line)
    elif key == "ROCM used to build PyTorch":
        if _known(value) and re.match(r"^\d", value):
            r.add(F.TORCH_HIP, value.split()[0], n, src, line)
    elif key == "Is CUDA available":
        v = value.strip().lower()
        if v in ("true", "yes", "false", "no"):
            r.add(F.CUDA_AVAILABLE, "true" if v in ("true", "yes") else "false", n, src, line)
    elif key == "CUDA runtime version":
        m = re.match(r"^(\d+\.\d+)", value)
        if m:
            r.add(F.NVCC, m.group(1), n, src, line)  # collect_env runs `nvcc --version` for it
    elif key == "CUDA_MODULE_LOADING set to":
        if _known(value):
            r.add(F.MODULE_LOADING, value.strip(), n, src, line)
    elif key == "GPU models and configuration":
        r.in_gpu_block = True
        m = _GPU_LINE.match(value)
        if m:
            r.add(F.GPU, "%s|%s" % (m.group(1), m.group(2)), n, src, line)
        elif _known(value) and not value.lower().startswith("gpu "):
            r.add(F.GPU, "|%s" % value.strip(), n, src, line)  # torch <= 1.7: the device name alone
            r.in_gpu_block = False
    elif key == "Nvidia driver version":
        m = re.match(r"^(%s)" % _VER, value)
        if m:
            r.add(F.DRIVER_VERSION, m.group(1), n, src, line)
    elif key == "cuDNN version":
        if _known(value):
            r.add(F.CUDNN, value.strip(), n, src, line)
    elif key == "Python version":
        m = re.match(r"^(\d+\.\d+(?:\.\d+)?)", value)
        if m:
            r.add(F.PYTHON_VERSION, m.group(1), n, src, line)
    elif key == "Python platform":
        p = _platform_of(value)
        if p:
            r.add(F.PLATFORM, p, n, src, line)
        if "microsoft" in value.lower() or "wsl" in value.lower():
            r.add(F.WSL, "true", n, src, line)
    elif key == "OS":
        if _known(value):
            r.add(F.OS, value.strip(), n, src, line)
            p = _platform_of(value)
            if p in ("win-amd64", "darwin"):
                r.add(F.PLATFORM, p, n, src, line)


def _package(r: _Reader, m: "re.Match[str]", n: int, line: str) -> None:
    tag, name, version, c4, c5 = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    name = _norm_name(name)
    if not _PKG_NAMES.match(name):
        return
    build, channel = "", ""
    if tag == "conda" or (c4 and not c4.startswith("/") and not re.match(r"^[A-Za-z]:\\", c4) and tag is None and "==" not in line):
        # conda list: name version build [channel]; pip's own lines in it say pypi_0 / pypi
        build = c4 or ""
        channel = c5 or ("" if tag == "conda" else "defaults")
        origin = "pip" if (channel == "pypi" or build.startswith("pypi_")) else "conda"
        source = "conda list" if tag is None else "collect_env"
    elif tag:
        origin, source = "pip", "collect_env"
    else:
        origin = "pip"
        source = "pip freeze" if "==" in line else "pip list"
    if c4 and tag is None and "==" in line:
        return  # `name==1.0 something`: not a freeze line
    r.add(F.PACKAGE, "|".join((name, version, origin, build, channel)), n, source, line)


def _yolo(r: _Reader, line: str, n: int) -> bool:
    m = _YOLO_TORCH.search(line)
    if not m:
        return False
    src = "ultralytics"
    if m.group(1):
        r.add(F.PYTHON_VERSION, m.group(1), n, src, line)
    r.add(F.TORCH_VERSION, m.group(2), n, src, line)
    for g in _YOLO_GPU.finditer(line):
        r.add(F.GPU, "%s|%s" % (g.group(1), g.group(2).strip()), n, src, line)
    return True


def _yolo_row(r: _Reader, key: str, value: str, n: int, line: str) -> bool:
    """`yolo checks` rows, in their exact shape (a bare version; detectron2's "Python  3.7.4
    (default, ...)" row is not one)."""
    src = "yolo checks"
    if key == "CUDA" and re.match(r"^\d+\.\d+$", value):
        r.add(F.TORCH_CUDA, value, n, src, line)  # torch.version.cuda, printed when CUDA is available
        return True
    if key == "Python" and re.match(r"^\d+\.\d+\.\d+$", value):
        r.add(F.PYTHON_VERSION, value, n, src, line)
        return True
    if key == "OS" and "-" in value and _platform_of(value):
        r.add(F.PLATFORM, _platform_of(value) or "", n, src, line)
        return True
    return key == "Install" and value in ("pip", "git", "conda", "docker")


def _d2(r: _Reader, key: str, value: str, n: int, line: str) -> None:
    """detectron2 / mmcv collect_env rows (their own formats, around torch's)."""
    src = "detectron2/mmcv collect_env"
    low = key.lower()
    v = value.split(" @")[0].strip()
    if key == "PyTorch" and re.match(r"^\d+\.\d+", v):
        r.add(F.TORCH_VERSION, v.split()[0], n, src, line)
    elif low == "torchvision" and re.match(r"^\d+\.\d+", v):
        r.add(F.PACKAGE, "torchvision|%s|unknown||" % v.split()[0], n, src, line)
    elif key == "Driver version":
        m = re.match(r"^(%s)" % _VER, v)
        if m:
            r.add(F.DRIVER_VERSION, m.group(1), n, src, line)
    elif key in ("GPU available", "CUDA available"):
        t = v.lower().split()[0] if v else ""
        if t in ("true", "yes", "false", "no"):
            r.add(F.CUDA_AVAILABLE, "true" if t in ("true", "yes") else "false", n, src, line)
    elif key == "CUDA_HOME":
        r.add(F.CUDA_HOME, v, n, src, line)
    elif key == "sys.platform":
        p = "win-amd64" if v.startswith("win") else ("darwin" if v == "darwin" else None)
        if p:
            r.add(F.PLATFORM, p, n, src, line)
    elif key == "Python":
        m = re.match(r"^(\d+\.\d+\.\d+)", v)
        if m:
            r.add(F.PYTHON_VERSION, m.group(1), n, src, line)
    elif key in ("MMCV CUDA Compiler", "CUDA compiler", "Detectron2 CUDA Compiler"):
        m = re.search(r"(\d+\.\d+)", v)
        if m:
            r.add(F.EXT_CUDA, m.group(1), n, src, line)


def read(lines: List[str]) -> Tuple[List[Fact], List[str]]:
    """(facts, tools recognised) from the paste's lines."""
    r = _Reader()
    for i, raw in enumerate(lines):
        n = i + 1
        line = raw.strip()
        if not line:
            r.in_gpu_block = False
            continue
        m = _CE.match(line)
        if m:
            r.in_gpu_block = False
            _collect_env(r, _CE_CANON[(m.group(1) or m.group(2)).lower()], m.group(3), n, raw)
            continue
        if "GPU" in line:
            g = _GPU_LINE.match(line)
            if g:
                r.add(F.GPU, "%s|%s" % (g.group(1), g.group(2)), n, "collect_env" if r.in_gpu_block else "GPU list", raw)
                continue
            g = _D2_GPU.match(line)
            if g:
                for idx in re.split(r"\s*,\s*", g.group(1)):
                    r.add(F.GPU, "%s|%s" % (idx, g.group(2)), n, "detectron2/mmcv collect_env", raw)
                continue
        if line.startswith("Name:"):
            r.show_name = _norm_name(line[5:].strip())
            continue
        if line.startswith("Version:") and r.show_name:
            v = line[8:].strip()
            if _PKG_NAMES.match(r.show_name) and re.match(r"^\d", v):
                r.add(F.PACKAGE, "%s|%s|pip||" % (r.show_name, v.split()[0]), n, "pip show", raw)
            r.show_name = ""
            continue
        y = _YOLO_ROW.match(line)
        if y and _yolo_row(r, y.group(1), y.group(2), n, raw):
            continue
        d2 = _D2.match(line)
        if d2:
            _d2(r, d2.group(1), d2.group(2), n, raw)
            continue
        if "CUDA Runtime" in line:
            rt = _RUNTIME.match(line)
            if rt:
                r.add(F.TORCH_CUDA, rt.group(1), n, "torch.__config__.show()", raw)
                continue
        r.in_gpu_block = False
        if "Version" in line:
            h = _SMI_HEAD.search(line)
            if h:
                r.add(F.DRIVER_VERSION, h.group(1), n, "nvidia-smi", raw)
            c = _SMI_CUDA.search(line)
            if c:
                r.add(F.DRIVER_CUDA, c.group(1), n, "nvidia-smi", raw)
            if h or c:
                continue
        if line.startswith("|"):
            s = _SMI_ROW.match(line)
            if s:
                r.add(F.GPU, "%s|%s" % (s.group(1), s.group(2)), n, "nvidia-smi", raw)
            continue
        if "Product Name" in line:
            q = _SMI_Q_NAME.match(line)
            if q:
                r.add(F.GPU, "%d|%s" % (r.q_gpus, q.group(1)), n, "nvidia-smi -q", raw)
                r.q_gpus += 1
                continue
        if "compilation tools" in line:
            v = _NVCC.search(line)
            if v:
                r.add(F.NVCC, v.group(1), n, "nvcc --version", raw)
                continue
        if "torch" in line and ("CUDA:" in line or "CPU" in line or "Python-" in line) and _yolo(r, line, n):
            continue
        if "CUDA:" in line and "MiB)" in line:  # yolo's further GPUs on their own lines
            for g in _YOLO_GPU.finditer(line):
                r.add(F.GPU, "%s|%s" % (g.group(1), g.group(2).strip()), n, "ultralytics", raw)
            continue
        y = _YOLO_PKG.match(line)
        if y and ("\u2705" in line or "\u274c" in line):
            r.add(F.PACKAGE, "%s|%s|pip||" % (y.group(1), y.group(2)), n, "yolo checks", raw)
            continue
        p = _PKG.match(line)
        if p:
            _package(r, p, n, raw)
    return r.facts, r.sources
