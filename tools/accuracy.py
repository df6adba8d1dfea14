"""Generate docs/accuracy.md: every rule x the real environments buildable here, each verdict of
cudafix next to the expected verdict and its ground truth (a command independent of cudafix).

    python -m tools.accuracy            # re-run everything, rewrite docs/accuracy.md
    python -m tools.accuracy --check    # exit 1 if the file is out of date or a row disagrees

tests/test_accuracy.py runs ``--check``: every case's cudafix run and every ground-truth command
are executed again, so the table can never go stale silently.  The environments are the test
venvs of tests/make_venvs.sh (~/.cache/cudafix-venvs or $CUDAFIX_TEST_VENVS), the real CUDA 13.0
toolkit under /usr/local, what-if flags, and the snapshot recorded on the H200 device machine
(tests/fixtures/h200/, whose raw command outputs are the ground truth for that row).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from tools.docfile import write_or_check

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS = os.environ.get("CUDAFIX_TEST_VENVS") or os.path.join(os.path.expanduser("~"), ".cache", "cudafix-venvs")
H200 = "tests/fixtures/h200"

# Variables that would change verdicts: removed from the environment of every run, then each
# case sets its own.
_SCRUB = ("CUDA", "PYTORCH", "LD_LIBRARY_PATH", "LD_PRELOAD", "CUDAFIX_ASSUME", "CONDA_PREFIX", "VIRTUAL_ENV", "PYTHONPATH")


@dataclasses.dataclass(frozen=True)
class Truth:
    """A command independent of cudafix and the lines of its output that show the fact."""

    id: str
    command: str  # bash; {VENVS} and {H200} are substituted
    expect: Tuple[str, ...]  # regexes that must all match the output
    shows: str  # the fact, in words
    env: Tuple[Tuple[str, str], ...] = ()
    reject: Tuple[str, ...] = ()  # regexes that must not match
    doc: str = ""  # for what-if rows: the public document that is the truth (no command can be)


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    title: str
    args: Tuple[str, ...]  # cudafix status arguments ({VENVS} substituted)
    env: Tuple[Tuple[str, str], ...] = ()
    expected: Tuple[Tuple[str, str], ...] = ()  # rule -> verdict where it is not "ok"
    truths: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # fact group -> truth ids
    healthy: bool = False  # a healthy env: no error or warning may appear


def _py(venv: str) -> str:
    return "{VENVS}/%s/bin/python" % venv


NO_HW = "no PCI function of vendor 0x10de"
_JUDGED = "(CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|CUDA_LAUNCH_BLOCKING|CUDA_MODULE_(DATA_)?LOADING|CUDA_CACHE_[A-Z]+|PYTORCH_CUDA_ALLOC_CONF|NCCL_(SOCKET_IFNAME|IB_HCA|P2P_DISABLE|SHM_DISABLE|IB_DISABLE|DEBUG))"
# binutils' readelf over every shared object of the venv outside torch/ and nvidia/ (what the
# extension rules judge): device code (.nv_fatbin), the CUDA runtime it needs, torch linkage
_EXT_SCAN = ("site=$(%s -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'); "
             "find \"$site\" -name '*.so*' -type f -not -path '*/torch/*' -not -path '*/nvidia/*' | while read -r f; do "
             "readelf -S \"$f\" 2>/dev/null | grep -q nv_fatbin && echo \"device code: $f\"; "
             "readelf -d \"$f\" 2>/dev/null | grep -q 'NEEDED.*libcudart' && echo \"cudart: $f\"; "
             "readelf -d \"$f\" 2>/dev/null | grep -qE 'NEEDED.*(libc10|libtorch)' && echo \"torch-linked: $f\"; done; echo scanned")
_TORCH_Q = "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"
_MAPS_Q = ("import torch, re; m = sorted({l.split()[-1] for l in open('/proc/self/maps') if '.so' in l}); "
           "c = [p for p in m if re.search(r'/lib(cudart|cublas|cudnn|nvJitLink|cusparse|nccl|cufft|curand|cusolver)', p)]; "
           "print(len(c), 'CUDA libraries loaded; outside site-packages:', [p for p in c if '/site-packages/' not in p])")
_WHEELS_Q = ("import importlib.metadata as m; print('CUDA-suffixed nvidia wheels:', sorted({d.metadata['Name'] for d in m.distributions() "
             "if (d.metadata['Name'] or '').startswith('nvidia-') and re.search(r'-cu1[0-9]$', d.metadata['Name'])}))")

TRUTHS: Tuple[Truth, ...] = (  # (the WSL / Windows rows' truths are appended below)
    Truth("hw", "grep -l 0x10de /sys/bus/pci/devices/*/vendor || echo '%s'; ls /sys/module/nvidia 2>&1 | head -1" % NO_HW,
          (NO_HW, "No such file or directory"), "no NVIDIA GPU on the PCI bus and no NVIDIA kernel module: nothing for a driver to drive"),
    Truth("env", "env | grep -E '^%s=' || echo 'none of the judged variables is set'" % _JUDGED,
          ("none of the judged variables is set",), "none of the variables the env rules judge is set"),
    Truth("nvcc", "nvcc --version | grep -o 'release [0-9.]*'", ("release 13\\.0",),
          "extension builds find nvcc 13.0 on PATH (cpp_extension's pick without CUDA_HOME / CUDA_PATH)"),
    Truth("cu-torch", "%s -c '%s'" % (_py("torch-cu"), _TORCH_Q), ("^2\\.14\\.1\\+cu130 13\\.0 False$",),
          "torch 2.14.1 is a CUDA 13.0 build; without NVIDIA hardware it runs on the CPU (is_available() False)"),
    Truth("cu-maps", "%s -c \"%s\"" % (_py("torch-cu"), _MAPS_Q), ("[1-9][0-9]* CUDA libraries loaded; outside site-packages: \\[\\]",),
          "every CUDA library `import torch` loads is torch's own copy (nvidia-* wheels in site-packages)"),
    Truth("cu-wheels", "%s -c \"import re; %s\"" % (_py("torch-cu"), _WHEELS_Q), ("-cu13'",), "one CUDA major among the nvidia-* wheels (cu13)",
          reject=("-cu1[0-2]'",)),
    Truth("cu-arch", "%s -c 'import torch; print(torch._C._cuda_getArchFlags())'" % _py("torch-cu"), ("sm_90",),
          "torch's own compiled arch list holds sm_90 SASS (an H200 / H100 runs it without PTX JIT)", reject=("compute_",)),
    Truth("cu-home-gone", "d=$(mktemp -d) && cd $d && printf '__global__ void k() {}\\n' > k.cu && "
          "printf 'from setuptools import setup\\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\\n"
          "setup(name=\"k\", ext_modules=[CUDAExtension(\"k\", [\"k.cu\"])], cmdclass={\"build_ext\": BuildExtension.with_options(use_ninja=False)})\\n' > setup.py && "
          "%s setup.py -q build_ext 2>&1 | grep -o \"error: nvcc not found at .*\"; rm -rf $d" % _py("torch-cu"),
          ("error: nvcc not found at '/usr/local/cuda-11\\.8/bin/nvcc'",), "building a CUDA extension fails: nvcc is not where CUDA_HOME points",
          env=(("CUDA_HOME", "/usr/local/cuda-11.8"),)),
    Truth("cu-home-ok", "ls $CUDA_HOME/bin/nvcc && $CUDA_HOME/bin/nvcc --version | grep -o 'release [0-9.]*'",
          ("/usr/local/cuda-13\\.0/bin/nvcc", "release 13\\.0"), "CUDA_HOME holds nvcc 13.0, torch's CUDA",
          env=(("CUDA_HOME", "/usr/local/cuda-13.0"),)),
    Truth("cpu-torch", "%s -c 'import torch; print(torch.__version__, torch.version.cuda)'" % _py("torch-cpu"), ("^2\\.13\\.0\\+cpu None$",),
          "torch 2.13.0 is a CPU build: no CUDA requirement of any kind"),
    Truth("cpu-wheels", "%s -c \"import re; %s\"" % (_py("torch-cpu"), _WHEELS_Q), ("wheels: \\[\\]",), "no nvidia-* CUDA wheels"),
    Truth("t251-torch", "%s -c '%s'" % (_py("torch-251"), _TORCH_Q), ("^2\\.5\\.1\\+cu124 12\\.4 False$",),
          "torch 2.5.1 is a CUDA 12.4 build; runs on the CPU here"),
    Truth("t251-maps", "%s -c \"%s\"" % (_py("torch-251"), _MAPS_Q), ("[1-9][0-9]* CUDA libraries loaded; outside site-packages: \\[\\]",),
          "every CUDA library `import torch` loads is torch's own copy"),
    Truth("t251-wheels", "%s -c \"import re; %s\"" % (_py("torch-251"), _WHEELS_Q), ("-cu12'",), "one CUDA major among the nvidia-* wheels (cu12)",
          reject=("-cu1[013]'",)),
    Truth("t251-build", "d=$(mktemp -d) && cd $d && printf '__global__ void k() {}\\n' > k.cu && "
          "printf 'from setuptools import setup\\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\\n"
          "setup(name=\"k\", ext_modules=[CUDAExtension(\"k\", [\"k.cu\"])], cmdclass={\"build_ext\": BuildExtension.with_options(use_ninja=False)})\\n' > setup.py && "
          "%s setup.py -q build_ext 2>&1 | tr '\\n' ' ' | grep -o 'The detected CUDA version (13.0) mismatches the version that was used to compile *PyTorch (12.4)'; rm -rf $d" % _py("torch-251"),
          ("The detected CUDA version \\(13\\.0\\) mismatches the version that was used to compile +PyTorch \\(12\\.4\\)",),
          "building a CUDA extension with the nvcc 13.0 on PATH fails against torch's CUDA 12.4"),
    Truth("py38-notorch", "%s -c 'import torch' 2>&1 | tail -1" % _py("py38"), ("No module named 'torch'",),
          "no torch in this env: nothing torch-related to judge"),
    Truth("ext-cu", _EXT_SCAN % _py("torch-cu"), ("^scanned$",),
          "no shared object outside torch and the nvidia wheels carries device code, needs libcudart or links torch",
          reject=("device code:", "cudart:", "torch-linked:")),
    Truth("ext-cpu", _EXT_SCAN % _py("torch-cpu"), ("^scanned$",),
          "no shared object outside torch carries device code, needs libcudart or links torch",
          reject=("device code:", "cudart:", "torch-linked:")),
    Truth("ext-251", _EXT_SCAN % _py("torch-251"), ("^scanned$", "torch-linked: .*/functorch/_C"),
          "outside torch and the nvidia wheels: no device code, no libcudart; one module links torch (functorch/_C)",
          reject=("device code:", "cudart:")),
    Truth("ext-251-import", "%s -c 'import torch, functorch._C; print(\"functorch._C imports\")'" % _py("torch-251"),
          ("^functorch\\._C imports$",), "the torch-linked module imports: every torch symbol it needs is there"),
    Truth("ext-py38", _EXT_SCAN % _py("py38"), ("^scanned$",), "no shared object carries device code or links torch",
          reject=("device code:", "cudart:", "torch-linked:")),
    Truth("h200-noext", "grep -c '\"extensions\"' {H200}/snapshot.json || true", ("^0$",),
          "the recording predates the extension scan: nothing to judge the extension rules on"),
    # What-if rows: no command on this machine can show what another driver would do; the truth is
    # NVIDIA's documentation (the same rows cudafix's tables cite).
    Truth("doc-hopper-r520", "", (), "Hopper (sm_90) is first supported by CUDA 11.8, whose minimum Linux driver is 520.61.05: an R470 driver cannot drive an H100",
          doc="https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html (Hopper | 9.0 | CUDA 11.8); "
              "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (CUDA 11.8 GA >= 520.61.05)"),
    Truth("doc-580-cuda13", "", (), "driver 580.95.05 (R580) supports CUDA 13.0 (minimum 580.65.06): it runs torch's CUDA 13.0 and drives Hopper",
          doc="https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (CUDA 13.0 GA >= 580.65.06); "
              "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html (580+ = CUDA 13.0)"),
    Truth("doc-535-cuda12", "", (), "driver 535.183.01 (R535) supports CUDA 12.2; minor-version compatibility never crosses a major: CUDA 13.0 torch cannot start",
          doc="https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (CUDA 12.2 GA >= 535.54.03; CUDA 13.0 GA >= 580.65.06); "
              "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"),
    Truth("launch-blocking", "env | grep -E '^%s='; grep -h 'CUDA_LAUNCH_BLOCKING=1.: yolov9c' docs/gpu.md" % _JUDGED,
          ("^CUDA_LAUNCH_BLOCKING=1$", "2\\.97"), "CUDA_LAUNCH_BLOCKING=1 is set; measured on the H200: yolov9c 2.97x slower with it (docs/gpu.md)",
          env=(("CUDA_LAUNCH_BLOCKING", "1"),)),
    # The H200 recording: raw outputs of real commands on that machine (tests/fixtures/h200/README.md).
    Truth("h200-smi", "grep -E 'Driver Version|H200' {H200}/nvidia-smi.txt | head -2", ("Driver Version: 580\\.159\\.04", "H200"),
          "recorded `nvidia-smi`: an H200 driven by driver 580.159.04 (CUDA 13.0)"),
    Truth("h200-torch", "grep -E \"^(__version__|cuda)\" {H200}/torch_version_py.txt", ("2\\.11\\.0\\+cu130", "^cuda.*'13\\.0'"),
          "recorded torch/version.py: torch 2.11.0+cu130"),
    Truth("h200-elf", "grep -c 'sm_90' {H200}/cuobjdump-list-elf.txt; grep -c . {H200}/cuobjdump-list-ptx.txt || true",
          ("^[1-9][0-9]*$",), "recorded `cuobjdump --list-elf libtorch_cuda.so`: sm_90 SASS present (and its PTX list)"),
    Truth("h200-maps", "grep -oE '/[^ ]*/(libcudart|libcublas)[^ ]*' {H200}/maps.txt | sort -u | head -2", ("site-packages/nvidia/",),
          "recorded /proc/self/maps after `import torch`: torch's own CUDA libraries"),
    Truth("h200-env", "grep -E '^%s=' {H200}/env.txt || echo 'none of the judged variables is set'" % _JUDGED,
          ("none of the judged variables is set",), "recorded environment: none of the variables the env rules judge is set"),
    Truth("h200-build", "grep -E '^CUDA_(HOME|VERSION)=' {H200}/env.txt", ("^CUDA_HOME=/usr/local/cuda$", "^CUDA_VERSION=13\\.0"),
          "recorded environment: CUDA_HOME is the image's CUDA 13.0 toolkit, torch's CUDA"),
)

TRUTHS += (
    Truth("not-wsl", "cat /proc/sys/kernel/osrelease; uname -s; ls -d /dev/dxg /usr/lib/wsl/lib 2>&1",
          ("^Linux$", "/dev/dxg': No such file or directory", "/usr/lib/wsl/lib': No such file or directory"),
          "a Linux kernel (so not native Windows) that is not WSL's (no 'microsoft' in its release), no /dev/dxg, no /usr/lib/wsl/lib",
          reject=("(?i)microsoft", "WSL")),
    Truth("h200-not-wsl", "cat {H200}/uname.txt; cat {H200}/ld.so.conf.d.txt; head -1 {H200}/proc_driver_nvidia_version.txt",
          ("^Linux vm 6\\.18", "^NVRM version: NVIDIA UNIX Open Kernel Module"),
          "recorded: a Linux kernel that is not WSL's, a loaded NVIDIA kernel module, no /usr/lib/wsl/lib in ld.so.conf.d",
          reject=("(?i)microsoft", "/usr/lib/wsl")),
)

BY_ID = {t.id: t for t in TRUTHS}

# Which facts each rule is judged on: the ground truth of a row is the case's truth for them.
RULE_FACTS: Dict[str, Tuple[str, ...]] = {
    "no-driver": ("hw", "torch"), "driver-gpu-unsupported": ("hw", "driver-doc"), "driver-library-mismatch": ("hw",),
    "driver-too-old": ("hw", "torch", "driver-doc"), "driver-minor-compat": ("hw", "torch", "driver-doc"),
    "forward-compat-mismatch": ("hw", "libs"),
    "cpu-only-torch": ("torch", "hw"), "torchvision-mismatch": ("torch",), "mixed-cuda-sources": ("wheels",),
    "alloc-conf-invalid": ("env",),
    "arch-unsupported": ("hw", "arch"), "arch-ptx-jit": ("hw", "arch"), "jit-cache-too-small": ("hw", "arch"),
    "jit-cache-unwritable": ("hw", "arch"),
    "lib-shadowed": ("libs",),
    "cuda-home-mismatch": ("build",), "cuda-home-missing": ("build",),
    "cuda-visible-devices-hides-all": ("env",), "cuda-visible-devices-invalid": ("env",), "device-order": ("env", "hw"),
    "launch-blocking": ("env",), "module-loading-eager": ("env",),
    "nccl-shadowed": ("libs",), "nccl-interface-missing": ("env",), "nccl-slow-path": ("env",), "nccl-debug-verbose": ("env",),
    # `import torch` itself (the "torch" truths import it for real) and the installed wheels
    "torch-install-broken": ("torch", "wheels"), "torch-wheel-unpinned": ("torch", "wheels"),
    "ext-arch-unsupported": ("ext",), "ext-ptx-jit": ("ext",), "ext-ptx-unsupported": ("ext",), "ext-cuda-major": ("ext",), "ext-torch-symbols": ("ext", "ext-torch"),
    # WSL / Windows rules answer "not WSL" / "not native Windows" on these Linux cases (docs/wsl.md, docs/windows.md)
    "wsl-driver": ("os",), "wsl-libcuda-not-symlink": ("os",), "wsl-libcuda-unversioned": ("os",), "wsl-libcuda-shadowed": ("os",),
    "windows-dll-missing": ("os",), "windows-commit-charge": ("os",),
}

_CU = (("hw", ("hw",)), ("torch", ("cu-torch",)), ("libs", ("cu-maps",)), ("wheels", ("cu-wheels",)), ("env", ("env",)),
       ("build", ("nvcc", "cu-torch")), ("arch", ("hw",)), ("ext", ("ext-cu",)), ("ext-torch", ("ext-cu",)))
_WHATIF_H200 = (("hw", ("cu-arch",)), ("torch", ("cu-torch",)), ("libs", ("cu-maps",)), ("wheels", ("cu-wheels",)), ("env", ("env",)),
                ("build", ("nvcc", "cu-torch")), ("arch", ("cu-arch",)), ("driver-doc", ("doc-580-cuda13",)),
                ("ext", ("ext-cu",)), ("ext-torch", ("ext-cu",)))


def _with(base, **over):
    d = dict(base)
    d.update(over)
    return tuple(d.items())


CASES: Tuple[Case, ...] = (
    Case("cu", "torch 2.14.1+cu130 (PyPI, with nvidia-* wheels) on this CPU-only machine: no NVIDIA GPU, no driver",
         ("--python", _py("torch-cu")), expected=(("no-driver", "note"),), truths=_CU, healthy=True),
    Case("cpu", "torch 2.13.0+cpu on this CPU-only machine",
         ("--python", _py("torch-cpu")), truths=(("hw", ("hw",)), ("torch", ("cpu-torch",)), ("libs", ("cpu-torch",)),
                                               ("wheels", ("cpu-wheels",)), ("env", ("env",)), ("build", ("cpu-torch",)),
                                               ("arch", ("cpu-torch",)), ("ext", ("ext-cpu",)), ("ext-torch", ("ext-cpu",))), healthy=True),
    Case("t251", "torch 2.5.1+cu124 on this CPU-only machine, the real CUDA 13.0 toolkit's nvcc on PATH",
         # a build would fail (t251-build), but this env builds no extension: a warning (rules/toolkit.py severity_basis)
         ("--python", _py("torch-251")), expected=(("no-driver", "note"), ("cuda-home-mismatch", "warning")),
         truths=(("hw", ("hw",)), ("torch", ("t251-torch",)), ("libs", ("t251-maps",)), ("wheels", ("t251-wheels",)), ("env", ("env",)),
                 ("build", ("nvcc", "t251-build")), ("arch", ("hw",)), ("ext", ("ext-251",)), ("ext-torch", ("ext-251", "ext-251-import")))),
    Case("cu-home-ok", "torch-cu with CUDA_HOME=/usr/local/cuda-13.0 (the real toolkit, torch's CUDA)",
         ("--python", _py("torch-cu")), env=(("CUDA_HOME", "/usr/local/cuda-13.0"),), expected=(("no-driver", "note"),),
         truths=_with(_CU, build=("cu-home-ok",), env=("cu-home-ok",)), healthy=True),
    Case("cu-home-gone", "torch-cu with CUDA_HOME=/usr/local/cuda-11.8, a directory that does not exist",
         ("--python", _py("torch-cu")), env=(("CUDA_HOME", "/usr/local/cuda-11.8"),),
         expected=(("no-driver", "note"), ("cuda-home-missing", "warning")), truths=_with(_CU, build=("cu-home-gone",), env=("cu-home-gone",))),
    Case("cu-h200", "torch-cu, what if: driver 580.95.05 and an H200 (`--assume-driver 580.95.05 --assume-gpu \"NVIDIA H200\"`)",
         ("--python", _py("torch-cu"), "--assume-driver", "580.95.05", "--assume-gpu", "NVIDIA H200"), truths=_WHATIF_H200, healthy=True),
    Case("cu-535", "torch-cu, what if: driver 535.183.01 and an H200",
         ("--python", _py("torch-cu"), "--assume-driver", "535.183.01", "--assume-gpu", "NVIDIA H200"),
         expected=(("driver-too-old", "error"),), truths=_with(_WHATIF_H200, **{"driver-doc": ("doc-535-cuda12",)})),
    Case("cu-h200-blocking", "torch-cu, what if: an H200 with driver 580.95.05, and CUDA_LAUNCH_BLOCKING=1",
         ("--python", _py("torch-cu"), "--assume-driver", "580.95.05", "--assume-gpu", "NVIDIA H200"),
         env=(("CUDA_LAUNCH_BLOCKING", "1"),), expected=(("launch-blocking", "warning"),),
         truths=_with(_WHATIF_H200, env=("launch-blocking",))),
    Case("py38-h100", "a Python 3.8 venv without torch, what if: driver 470.57.02 and an H100 "
                      "(`cudafix check --assume-driver 470.57.02 --assume-gpu \"NVIDIA H100\"`)",
         ("--python", _py("py38"), "--assume-driver", "470.57.02", "--assume-gpu", "NVIDIA H100"),
         expected=(("driver-gpu-unsupported", "error"),),
         truths=(("hw", ("doc-hopper-r520",)), ("driver-doc", ("doc-hopper-r520",)), ("torch", ("py38-notorch",)), ("libs", ("py38-notorch",)),
                 ("wheels", ("py38-notorch",)), ("env", ("env",)), ("build", ("py38-notorch",)), ("arch", ("py38-notorch",)),
                 ("ext", ("ext-py38",)), ("ext-torch", ("ext-py38", "py38-notorch")))),
    Case("h200", "the snapshot recorded on the H200 device machine (driver 580.159.04, torch 2.11.0+cu130; `--from %s/snapshot.json`)" % H200,
         ("--from", H200 + "/snapshot.json"),
         # recorded before the extension scan and the `import torch` simulation existed
         expected=tuple((r, "unknown") for r in ("ext-arch-unsupported", "ext-ptx-jit", "ext-ptx-unsupported", "ext-cuda-major",
                                                 "ext-torch-symbols", "torch-install-broken", "torch-wheel-unpinned")),
         truths=(("hw", ("h200-smi",)), ("driver-doc", ("h200-smi",)), ("torch", ("h200-torch",)), ("libs", ("h200-maps",)),
                 ("wheels", ("h200-maps",)), ("env", ("h200-env",)), ("build", ("h200-build", "h200-torch")), ("arch", ("h200-elf",)),
                 ("ext", ("h200-noext",)), ("ext-torch", ("h200-noext",))), healthy=True),
)
CASES = tuple(dataclasses.replace(c, truths=c.truths + (("os", ("h200-not-wsl",) if c.id == "h200" else ("not-wsl",)),))
              for c in CASES)


def alloc_rows() -> str:
    """The allocator-key proof, summarised from docs/alloc-conf.md (generated from a real run of
    torch's own parsers by tools/alloc_conf_proof.py; tests/test_alloc_conf_real.py
    re-runs it): each cell is "torch's verdict / cudafix's verdict"."""
    path = os.path.join(REPO, "docs", "alloc-conf.md")
    with open(path, encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.startswith("| `")]
    same = uncertain = differ = 0
    for ln in lines:
        for cell in ln.strip("|").split("|")[1:]:
            torch_v, _, ours = cell.strip().partition(" / ")
            ours = ours.split(" (")[0].strip()
            if ours == "uncertain":
                uncertain += 1
            elif ours == torch_v.strip():
                same += 1
            else:
                differ += 1
    return ("| allocator keys (`alloc-conf-invalid`): %d strings x torch 1.10.2, 2.0.1, 2.5.1, 2.13.0 (CPU), 2.14.1 "
            "| torch's own parser vs cudafix: %d equal, %d uncertain (cudafix says \"may be rejected\" and repairs nothing), "
            "%d different | docs/alloc-conf.md | `tests/test_alloc_conf_real.py` |" % (len(lines), same, uncertain, differ))


def _sub(text: str) -> str:
    return text.replace("{VENVS}", VENVS).replace("{H200}", os.path.join(REPO, H200))


def _show(text: str) -> str:
    """Paths as a reader sees them: the venv root and the checkout shortened."""
    return text.replace(VENVS, "~/.cache/cudafix-venvs").replace(REPO + "/", "").replace("{VENVS}", "~/.cache/cudafix-venvs").replace("{H200}", H200)


def _env(extra: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env["CUDAFIX_DISABLE"] = "1"  # ground truths run without cudafix's hook
    env.update(dict(extra))
    return env


@dataclasses.dataclass
class TruthResult:
    truth: Truth
    lines: List[str]
    ok: bool
    why: str = ""


def run_truth(t: Truth, timeout: float = 600) -> TruthResult:
    if t.doc:
        return TruthResult(t, ["(document) " + t.doc], True)
    p = subprocess.run(["bash", "-c", _sub(t.command)], capture_output=True, text=True, env=_env(t.env), timeout=timeout, cwd=REPO)
    out = p.stdout + p.stderr
    shown: List[str] = []
    missing = []
    for rx in t.expect:
        hit = [ln for ln in out.splitlines() if re.search(rx, ln)] or ([out] if re.search(rx, out) else [])
        if not hit:
            missing.append(rx)
        for ln in hit[:1]:
            ln = " ".join(ln.split())
            if ln not in shown:
                shown.append(ln)
    bad = [rx for rx in t.reject if re.search(rx, out)]
    why = ("missing %s" % missing if missing else "") + (" rejected %s" % bad if bad else "")
    return TruthResult(t, [_show(s) for s in shown], not missing and not bad, why.strip())


def run_cudafix(case: Case, timeout: float = 600) -> Dict[str, str]:
    """rule -> verdict label: ok | unknown | note | warning | error (the worst finding)."""
    args = [_sub(a) for a in case.args]
    p = subprocess.run([sys.executable, "-m", "cudafix", "status", "--json"] + args, capture_output=True, text=True,
                       env=dict(_env(case.env), PYTHONPATH=REPO), timeout=timeout, cwd=REPO)
    if p.returncode != 0:
        raise RuntimeError("cudafix status %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.strip()[-500:]))
    doc = json.loads(p.stdout)
    out: Dict[str, str] = {}
    order = {"error": 3, "warning": 2, "info": 1}
    for rid, verdict in doc["verdicts"].items():
        if verdict != "problem":
            out[rid] = verdict
            continue
        sev = max((f["severity"] for f in doc["findings"] if f["rule"] == rid), key=lambda s: order.get(s, 0))
        out[rid] = "note" if sev == "info" else sev
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(results: Dict[str, Dict[str, str]], truths: Dict[str, TruthResult]) -> Tuple[str, List[str]]:
    """(markdown, disagreements)."""
    from cudafix.rules import REGISTRY

    problems: List[str] = []
    rows = 0
    agree = 0
    false_alarms = 0
    body: List[str] = []
    for case in CASES:
        got = results[case.id]
        expected = dict(case.expected)
        groups = dict(case.truths)
        body += ["", "### %s: %s" % (case.id, _cell(case.title)), "",
                 "`cudafix status %s`%s" % (_show(" ".join(case.args)),
                                            " with " + ", ".join("`%s=%s`" % kv for kv in case.env) if case.env else ""), "",
                 "| rule | expected | cudafix | ground truth |", "| --- | --- | --- | --- |"]
        for rule in REGISTRY:
            want = expected.get(rule.id, "ok")
            have = got.get(rule.id, "(not run)")
            ids: List[str] = []
            for fact in RULE_FACTS.get(rule.id, ()):
                for tid in groups.get(fact, ()):
                    if tid not in ids:
                        ids.append(tid)
            if not ids:
                problems.append("%s/%s: no ground truth" % (case.id, rule.id))
            for tid in ids:
                if not truths[tid].ok:
                    problems.append("%s/%s: ground truth %s does not hold: %s" % (case.id, rule.id, tid, truths[tid].why))
            rows += 1
            if want == have:
                agree += 1
            else:
                problems.append("%s/%s: expected %s, cudafix %s" % (case.id, rule.id, want, have))
            if case.healthy and have in ("error", "warning"):
                false_alarms += 1
            mark = "" if want == have else " **(differs)**"
            body.append("| `%s` | %s | %s%s | %s |" % (rule.id, want, have, mark, ", ".join("[%s](#truth-%s)" % (t, t) for t in ids)))
    healthy = [c.id for c in CASES if c.healthy]
    head = [
        "# Accuracy: cudafix's verdicts against ground truth",
        "",
        "Generated by `python -m tools.accuracy` (do not edit by hand); `tests/test_accuracy.py` re-runs every",
        "cudafix run and every ground-truth command and fails when this file is not what they print, or when a row disagrees.",
        "",
        "Each row: the verdict expected for a rule in a real environment, the command independent of cudafix that shows it",
        "(run on this machine; for what-if rows NVIDIA's documentation, since no command here can show another driver; for the",
        "H200 row the raw outputs recorded on that machine in `%s/`), and cudafix's verdict. `note` is an info finding" % H200,
        "(never warned about, never fails `check --strict`); `unknown` would mean a rule could not decide.",
        "",
        "**%d rows, %d agree; false alarms (an error or warning where the environment is healthy: %s): %d.**" % (
            rows, agree, ", ".join(healthy), false_alarms),
        "",
        "Environments: the test venvs of `tests/make_venvs.sh` (real wheels from PyPI), the real CUDA 13.0 toolkit in",
        "`/usr/local/cuda-13.0` (nvcc also on PATH), this machine's PCI bus (no NVIDIA device: a CPU-only machine),",
        "what-if flags, and the snapshot recorded on the H200 device machine.",
        "",
        "## Allocator configuration",
        "",
        "| what | result | where | re-run by |",
        "| --- | --- | --- | --- |",
        alloc_rows(),
        "",
        "## Cases",
    ]
    tail = ["", "## Ground truth", "", "| id | command | output that shows it | what it shows |", "| --- | --- | --- | --- |"]
    for t in TRUTHS:
        r = truths[t.id]
        cmd = "`%s`" % _show(t.command) if t.command else "(document)"
        env = " with " + ", ".join("`%s=%s`" % kv for kv in t.env) if t.env else ""
        tail.append("| <a id=\"truth-%s\"></a>%s | %s%s | %s | %s |" % (
            t.id, t.id, _cell(cmd), env, _cell("<br>".join(r.lines)) or "(no output)", _cell(t.shows)))
    return "\n".join(head + body + tail) + "\n", problems


def generate() -> Tuple[str, List[str]]:
    truths = {t.id: run_truth(t) for t in TRUTHS}
    results = {c.id: run_cudafix(c) for c in CASES}
    return render(results, truths)


def default_path() -> str:
    return os.path.join(REPO, "docs", "accuracy.md")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.accuracy", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is out of date or a row disagrees")
    ap.add_argument("--output", default=default_path())
    args = ap.parse_args(argv)
    text, problems = generate()
    for p in problems:
        print("accuracy: %s" % p, file=sys.stderr)
    stale = write_or_check(args.output, text, args.check, "python -m tools.accuracy")
    return 1 if stale or problems else 0


if __name__ == "__main__":
    sys.exit(main())
