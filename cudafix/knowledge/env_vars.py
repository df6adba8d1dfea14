"""The environment variables cudafix reads, who reads them, and the ones activation may change.

One row per variable.  Everything else derives from this table:

- ``cudafix.probes.pyenv.environment.VARIABLES``: the rows read by :data:`PROBE` (recorded in the
  snapshot's ``env``; any other variable starting with one of :data:`PROBE_PREFIXES` is recorded
  too);
- ``cudafix.hook.cache.ENV_B``: the rows read by :data:`HOOK` (the startup hook's fingerprint,
  computed at ``import torch``);
- ``cudafix.activation.plan.KEY_VARS``: the rows read by :data:`ACTIVATION` (the per-user
  activation cache is keyed on their exact values: unset, empty and set differ);
- ``cudafix.activation.shells.MANAGED``: the rows with ``managed=True``, the only variables an
  activation may set or unset and a deactivation may restore.  The names are compiled into the
  shell scripts (activate.d/, deactivate.d/), so a parent environment cannot make a deactivation
  touch any other variable (docs/security.md).

docs/env-vars.md is generated from this table (``python -m tools.env_vars_doc``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Tuple

from cudafix.model.record import record

PROBE = "probe"  # recorded in the snapshot by cudafix/probes/pyenv/environment.py
HOOK = "hook"  # part of the startup hook's fingerprint (cudafix/hook/runtime.py)
ACTIVATION = "activation"  # part of the activation cache's key (cudafix/activation/runtime.py)
READERS = (PROBE, HOOK, ACTIVATION)

# Any other variable with one of these prefixes is recorded by the probe (CUDA reads more than
# it documents; CUDAFIX_* are cudafix's own settings; NCCL_*:
# https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html).
PROBE_PREFIXES = ("CUDA_", "CUDAFIX_", "PYTORCH_CUDA_", "NCCL_")

_ALL = (PROBE, HOOK, ACTIVATION)
_HA = (HOOK, ACTIVATION)

CUDA_ENV = "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
TORCH_CUDA_ENV = "https://docs.pytorch.org/docs/stable/cuda_environment_variables.html"
TORCH_ALLOC = "https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf"
TORCH_CPP_EXT = "https://docs.pytorch.org/docs/stable/cpp_extension.html"
TORCH_INIT = "https://github.com/pytorch/pytorch/blob/main/torch/__init__.py"
TORCH_CPP_EXT_SRC = "https://github.com/pytorch/pytorch/blob/main/torch/utils/cpp_extension.py"
LD_SO = "https://man7.org/linux/man-pages/man8/ld.so.8.html"
CMAKE_FINDCUDA = "https://cmake.org/cmake/help/latest/module/FindCUDA.html"
CMAKE_CUDACXX = "https://cmake.org/cmake/help/latest/envvar/CUDACXX.html"
TRITON = "https://github.com/triton-lang/triton/blob/main/README.md"
MPS = "https://docs.nvidia.com/deploy/mps/index.html"
CONTAINER = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
CONDA_ACTIVATION = "https://docs.conda.io/projects/conda/en/latest/dev-guide/deep-dives/activation.html"
CONDA_VIRTUAL = "https://docs.conda.io/projects/conda/en/latest/user-guide/tasks/manage-virtual.html"
VENV = "https://docs.python.org/3/library/venv.html"
PY_CMDLINE = "https://docs.python.org/3/using/cmdline.html#environment-variables"
POSIX_ENV = "https://pubs.opengroup.org/onlinepubs/9799919799/basedefs/V1_chap08.html"
XDG = "https://specifications.freedesktop.org/basedir-spec/latest/"
CUDAFIX_ASSUME = "cudafix/probes/machine/assume.py"


@record(frozen=True)
class EnvVar:
    """A variable cudafix reads: who reads it, why, where its meaning is documented."""

    name: str
    readers: Tuple[str, ...]
    why: str
    source: str
    managed: bool = False  # activation may set / unset it (a safe fix's EnvOp); deactivation restores it


def _v(name: str, readers: Tuple[str, ...], why: str, source: str, managed: bool = False) -> EnvVar:
    return EnvVar(name, readers, why, source, managed)


TABLE: Tuple[EnvVar, ...] = (
    # the dynamic loader
    _v("LD_LIBRARY_PATH", _ALL, "searched before the system's libraries: decides which libcuda / libcudart / "
       "nvJitLink a process loads (a safe fix removes a shadowing entry)", LD_SO, managed=True),
    _v("LD_PRELOAD", _ALL, "libraries loaded before all others (can shadow libcuda)", LD_SO),
    # where the toolkit is
    _v("CUDA_HOME", _ALL, "the toolkit torch.utils.cpp_extension builds extensions with (a safe fix points "
       "it at the toolkit matching torch)", TORCH_CPP_EXT_SRC, managed=True),
    _v("CUDA_PATH", _ALL, "fallback for CUDA_HOME in torch.utils.cpp_extension", TORCH_CPP_EXT_SRC),
    _v("CUDA_ROOT", _ALL, "toolkit location read by older build scripts", CMAKE_FINDCUDA),
    _v("CUDA_TOOLKIT_ROOT_DIR", _ALL, "toolkit location for CMake's FindCUDA", CMAKE_FINDCUDA),
    _v("CUDACXX", _ALL, "the CUDA compiler CMake uses", CMAKE_CUDACXX),
    # the CUDA driver / runtime
    _v("CUDA_VISIBLE_DEVICES", _ALL, "which GPUs CUDA enumerates; empty = none", CUDA_ENV),
    _v("CUDA_DEVICE_ORDER", _ALL, "FASTEST_FIRST or PCI_BUS_ID: how CUDA numbers GPUs", CUDA_ENV),
    _v("CUDA_LAUNCH_BLOCKING", _ALL, "synchronous kernel launches (debugging; slow)", CUDA_ENV),
    _v("CUDA_MODULE_LOADING", _ALL, "lazy or eager module loading", CUDA_ENV),
    _v("CUDA_MODULE_DATA_LOADING", _ALL, "lazy or eager module data loading", CUDA_ENV),
    _v("CUDA_CACHE_DISABLE", _ALL, "disables the PTX JIT cache (a safe fix unsets it when kernels are JIT-compiled)",
       CUDA_ENV, managed=True),
    _v("CUDA_CACHE_PATH", _ALL, "where the PTX JIT cache lives", CUDA_ENV),
    _v("CUDA_CACHE_MAXSIZE", _ALL, "the PTX JIT cache's size (a safe fix raises it to the 4 GiB maximum)",
       CUDA_ENV, managed=True),
    _v("CUDA_FORCE_PTX_JIT", _ALL, "ignore embedded SASS, JIT the PTX", CUDA_ENV),
    _v("CUDA_FORCE_JIT", _ALL, "older name of CUDA_FORCE_PTX_JIT", CUDA_ENV),
    _v("CUDA_DISABLE_PTX_JIT", _ALL, "no PTX JIT: kernels without matching SASS fail", CUDA_ENV),
    _v("CUDA_DISABLE_JIT", _ALL, "older name of CUDA_DISABLE_PTX_JIT", CUDA_ENV),
    _v("CUDA_FORCE_PRELOAD_LIBRARIES", _ALL, "preload the JIT libraries at initialisation", CUDA_ENV),
    _v("CUDA_MANAGED_FORCE_DEVICE_ALLOC", _ALL, "managed memory forced into device memory", CUDA_ENV),
    _v("CUDA_DEVICE_MAX_CONNECTIONS", _ALL, "number of hardware work queues", CUDA_ENV),
    _v("CUDA_DEVICE_MAX_COPY_CONNECTIONS", _ALL, "number of copy work queues", CUDA_ENV),
    _v("CUDA_LOG_FILE", _ALL, "where CUDA logs failing API calls", CUDA_ENV),
    _v("CUDA_MPS_PIPE_DIRECTORY", _ALL, "the MPS control daemon's pipes (MPS in use)", MPS),
    _v("CUDA_MPS_LOG_DIRECTORY", _ALL, "the MPS control daemon's logs", MPS),
    # torch
    _v("PYTORCH_CUDA_ALLOC_CONF", _ALL, "CUDA caching allocator options; a key torch rejects raises at the first "
       "allocation (a safe fix drops such keys)", TORCH_ALLOC, managed=True),
    _v("PYTORCH_ALLOC_CONF", _ALL, "device-generic name of PYTORCH_CUDA_ALLOC_CONF (a safe fix drops keys torch "
       "rejects)", TORCH_CUDA_ENV, managed=True),
    _v("PYTORCH_HIP_ALLOC_CONF", _ALL, "the ROCm allocator's options", TORCH_CUDA_ENV),
    _v("PYTORCH_NVML_BASED_CUDA_CHECK", _ALL, "torch.cuda.is_available() asks NVML instead of the CUDA runtime",
       TORCH_CUDA_ENV),
    _v("PYTORCH_NO_CUDA_MEMORY_CACHING", _ALL, "disables torch's caching allocator", TORCH_CUDA_ENV),
    _v("TORCH_CUDA_ARCH_LIST", _ALL, "the GPU architectures extensions are built for", TORCH_CPP_EXT),
    _v("TORCH_USE_CUDA_DSA", _ALL, "device-side assertions (a build-time flag; no effect on wheels)", TORCH_CUDA_ENV),
    _v("TORCH_USE_RTLD_GLOBAL", _ALL, "torch._C loaded RTLD_GLOBAL", TORCH_INIT),
    _v("TORCH_EXTENSIONS_DIR", _ALL, "where JIT-built extensions are cached", TORCH_CPP_EXT),
    # triton
    _v("TRITON_PTXAS_PATH", _ALL, "the ptxas triton uses", TRITON),
    _v("TRITON_CUOBJDUMP_PATH", _ALL, "the cuobjdump triton uses", TRITON),
    _v("TRITON_NVDISASM_PATH", _ALL, "the nvdisasm triton uses", TRITON),
    _v("TRITON_LIBCUDA_PATH", _ALL, "where triton looks for libcuda", TRITON),
    # containers
    _v("NVIDIA_VISIBLE_DEVICES", _ALL, "GPUs the NVIDIA container runtime exposes", CONTAINER),
    _v("NVIDIA_DRIVER_CAPABILITIES", _ALL, "driver libraries the NVIDIA container runtime mounts", CONTAINER),
    # which environment
    _v("CONDA_PREFIX", _ALL, "the active conda env", CONDA_ACTIVATION),
    _v("CONDA_DEFAULT_ENV", _ALL, "the active conda env's name", CONDA_ACTIVATION),
    _v("CONDA_SHLVL", _ALL, "conda's activation depth", CONDA_ACTIVATION),
    _v("CONDA_OVERRIDE_CUDA", _ALL, "the __cuda virtual package conda solves with", CONDA_VIRTUAL),
    _v("VIRTUAL_ENV", _ALL, "the active venv", VENV),
    # read, not recorded
    _v("PATH", _HA, "where the toolkit probe finds nvcc", POSIX_ENV),
    _v("PYTHONPATH", _HA, "which torch the interpreter imports", PY_CMDLINE),
    _v("HOME", _HA, "the default JIT cache (~/.nv/ComputeCache) and cudafix's caches", POSIX_ENV),
    _v("XDG_CACHE_HOME", _HA, "where cudafix's caches live", XDG),
    _v("CUDAFIX_ASSUME_DRIVER", _HA, "what-if: the driver version assumed instead of the probed one", CUDAFIX_ASSUME),
    _v("CUDAFIX_ASSUME_GPU", _HA, "what-if: the GPUs assumed instead of the probed ones", CUDAFIX_ASSUME),
    _v("CUDAFIX_ROOT", _HA, "tests: the filesystem root every probe reads the machine's paths under (/sys, /proc, /dev, /etc, /usr, ld.so.cache, LD_LIBRARY_PATH, $HOME's caches: a laid-out WSL tree, docs/wsl.md); / when unset",
       "cudafix/store/paths.py"),
)


# Read by the dynamic loader once, at exec (ld.so(8)): changing them in a running process changes
# nothing for the libraries it loads, so they are corrected at activation only (docs/hook.md).
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")


def names(reader: str) -> Tuple[str, ...]:
    """The names a reader reads, in table order."""
    if reader not in READERS:
        raise ValueError("unknown reader %r (one of: %s)" % (reader, ", ".join(READERS)))
    return tuple(v.name for v in TABLE if reader in v.readers)


MANAGED: Tuple[str, ...] = tuple(v.name for v in TABLE if v.managed)
