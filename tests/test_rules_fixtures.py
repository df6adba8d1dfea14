"""Every rule over transcribed snapshots (tests/fixtures/snapshots/*.json, see its SOURCES.md) and
over the real H200 recording with stated overrides (tests/snapbuild.py).

Expectations are written from the report named in each fixture's "source" field, or from what the
H200 machine did (docs/gpu.md, docs/gpu-raw/) (rule id, severity, the facts the finding must
name), not from what the code prints.  Each fixture also
asserts that NO other rule raises a problem: truthfulness (e.g. sm_89 runs sm_86 SASS, a CUDA 12
lib dir does not shadow soname-major-11 libraries).
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from cudafix import rules
from cudafix.knowledge import version_tuple
from cudafix.model.findings import OK, PROBLEM
from cudafix.model.fixes import REMOVE_PATH, SET, UNSET
from cudafix.model.snapshot import Snapshot
from tests.snapbuild import DELETE, H200, load_base, snap

SNAPS = pathlib.Path(__file__).resolve().parent / "fixtures" / "snapshots"
CACHE_MAX = str(4 * 1024 ** 3)


# The H200 recording plus overrides, each a state measured on that machine (docs/gpu.md):
# the image's cuda-compat libcuda first on LD_LIBRARY_PATH (error 803), CUDA_LAUNCH_BLOCKING=1,
# CUDA_MODULE_LOADING=EAGER.  The compat state is what `cudafix snapshot` records when the loader
# picks /usr/local/cuda-13.0/compat/libcuda.so.580.95.05 (docs/gpu-raw/compat-libcuda.json).
COMPAT_DIR = "/usr/local/cuda-13.0/compat"
COMPAT_LIBCUDA = COMPAT_DIR + "/libcuda.so.580.95.05"
OWN_LIBCUDA = "/usr/local/nvidia/lib64/libcuda.so.580.159.04"  # the recording's own libcuda
H200_COMPAT_FIRST = {
    "env.LD_LIBRARY_PATH": COMPAT_DIR + ":/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
    "libraries.ld_library_path": [COMPAT_DIR, "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"],
    "driver.libcuda_path": COMPAT_LIBCUDA,
    "driver.libcuda_version": "580.95.05",
    "driver.compat_libcuda": [COMPAT_LIBCUDA],
    "libraries.resolutions[soname=libcuda.so.1].resolved": COMPAT_LIBCUDA,
    "libraries.resolutions[soname=libcuda.so.1].resolved_version": "580.95.05",
    "libraries.resolutions[soname=libcuda.so.1].others": [OWN_LIBCUDA],
}
# The yolov9 image of issue 8: the synthetic snapshots of tests/fixtures/yolov9/ (make_snapshots.py,
# every value sourced there), with the JIT-cache states of two public reports as overrides.
YOLOV9 = "yolov9/yolov9-%s-cudahome.json"
CACHE_DISABLED = {"env.CUDA_CACHE_DISABLE": "1", "jit_cache.disabled": True}  # FORTH-ModelBasedTracker/HandTracker#7
CACHE_UNWRITABLE = {"env.CUDA_CACHE_PATH": "/.nv/ComputeCache", "jit_cache.path": "/.nv/ComputeCache",
                    "jit_cache.writable": False}  # dl-container-registry/furnari-flow#3: no writable cache dir
# The H200 recording predates the node probe: the same machine as an eth0 node (its NCCL devices stated)
H200_ON_ETH0 = dict(load_base(H200), node={"net_interfaces": ["eth0", "lo"], "ib_devices": []})
TORCHVISION_NVJPEG_READ = load_base("snapshots/ext_torchvision_h200.json")
for _m in TORCHVISION_NVJPEG_READ["extensions"]["modules"]:
    if _m["path"].endswith("/libnvjpeg.36e11081.so.13"):
        _m.update(cudart_version=13000, cudart="13")
# WSL 2 states over the H200 recording (synthetic: the layouts of tests/fixtures/wsl/SOURCES.md as
# cudafix.probes.machine.wsl reads them from tests/wsltree.py's trees; no kernel module, /dev/dxg, the
# Windows driver's libcuda; NVML still names the GPU, as it does on WSL).
_WSL_LIB = "/usr/lib/wsl/lib/"


def _wsl(files="symlink", unversioned=True, dxg=True, shadows=(), picked=_WSL_LIB + "libcuda.so.1", ld_path=None, extra=None):
    """(base, overrides): the H200 recording with a WSL section and hardware section laid in, driver fields overridden."""
    kinds = {"libcuda.so": files, "libcuda.so.1": files, "libcuda.so.1.1": "file"}
    base = json.loads(json.dumps(load_base(H200)))
    base["hardware"] = {"nvidia_pci": [], "dxg": dxg, "found_via": "/sys/bus/pci/devices" + ("; /dev/dxg present" if dxg else "")}
    base["wsl"] = {
        "probed": True, "detected": True, "dxg": dxg,
        "evidence": ["/proc/sys/kernel/osrelease: 5.15.133.1-microsoft-standard-WSL2"] + (["/dev/dxg present"] if dxg else []),
        "lib_dir": [{"path": _WSL_LIB + n, "kind": k, "role": "wsl"} for n, k in kinds.items()],
        "driver_store": ["/usr/lib/wsl/drivers/nv_dispsi.inf_amd64_7cc7738d8e428783"],
        "ld_conf": "/etc/ld.so.conf.d/ld.wsl.conf",
        "unversioned": _WSL_LIB + "libcuda.so" if unversioned else None,
        "unversioned_via": "ld.so.cache" if unversioned else "not on LD_LIBRARY_PATH, in ld.so.cache or the default dirs",
        "shadows": list(shadows),
        "found_via": {"libcuda.so.1": "%s (%s)" % (picked, "LD_LIBRARY_PATH entry " + ld_path if ld_path else "ld.so.cache")}}
    over = {"driver.kernel_version": DELETE, "driver.libcuda_version": DELETE, "driver.nvml_version": DELETE,
            "driver.wsl": True, "driver.libcuda_path": picked, "driver.found_via.wsl": _WSL_LIB + "libcuda.so.1"}
    if ld_path:
        over["env.LD_LIBRARY_PATH"] = ld_path
        over["libraries.ld_library_path"] = [ld_path]
    over.update(extra or {})
    return base, over


_LINUX_535 = {"path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "kind": "symlink", "role": "linux-driver",
              "target": "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", "on_ld_library_path": True, "version": "535.104.05"}
_CUDNN8 = {"toolkits.nvidia_wheels": [{"name": "nvidia-cudnn-cu12", "version": "8.9.2.26", "origin": "pip"}]}

_IMPORT_OK = {"probed": True, "preloader": "list", "found_via": {"preloader": "torch/__init__.py: list"}}
_CUDNN_ERR = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"


def _imported(torch_import):
    """(base, overrides): the H200 recording with a torch_import section laid in."""
    base = json.loads(json.dumps(load_base(H200)))
    base["torch_import"] = torch_import
    return base, {"source": "H200 recording + torch_import section (values measured on tests/test_broken_installs.py's views)"}

BUILT = {  # name -> (base, overrides)
    "h200 as WSL 2 (symlinked libcuda)": _wsl(),
    "h200 as WSL 2, libcuda as mapped (regular files)": _wsl(files="file", unversioned=False),
    "h200 as WSL 2 + cuDNN 8, libcuda as mapped": _wsl(files="file", unversioned=False, extra=_CUDNN8),
    "h200 as WSL 2 + a Linux driver 535 first on LD_LIBRARY_PATH": _wsl(
        shadows=[_LINUX_535], picked="/usr/lib/x86_64-linux-gnu/libcuda.so.1", ld_path="/usr/lib/x86_64-linux-gnu"),
    "h200 as WSL, no /dev/dxg": _wsl(dxg=False),
    "h200 recorded": (H200, {}),
    "h200 + compat libcuda first": (H200, H200_COMPAT_FIRST),
    "h200 + CUDA_LAUNCH_BLOCKING=1": (H200, {"env.CUDA_LAUNCH_BLOCKING": "1"}),
    "h200 + CUDA_MODULE_LOADING=EAGER": (H200, {"env.CUDA_MODULE_LOADING": "EAGER"}),
    # measured there: yolov9c then ran on the CPU, 11.7x slower (docs/gpu-raw/yolo-cpu-fallback.json)
    "h200 + CUDA_VISIBLE_DEVICES=''": (H200, {"env.CUDA_VISIBLE_DEVICES": "", "gpus.visible": []}),
    "yolov9 conda a100": (YOLOV9 % "a100-conda", {}),
    "yolov9 conda rtx4090": (YOLOV9 % "rtx4090-conda", {}),
    "yolov9 pip a100": (YOLOV9 % "a100-pip", {}),
    "yolov9 conda h100": (YOLOV9 % "h100-conda", {}),
    "yolov9 conda h200": (YOLOV9 % "h200-conda", {}),
    "yolov9 conda h100 + cache disabled": (YOLOV9 % "h100-conda", CACHE_DISABLED),
    "yolov9 conda h100 + cache unwritable": (YOLOV9 % "h100-conda", CACHE_UNWRITABLE),
    "yolov9 pip h200": (YOLOV9 % "h200-pip", {}),
    # NCCL (docs/fleet.md): interface names from NCCL's docs; the recording has no node section
    "h200 + NCCL_SOCKET_IFNAME=ens on an eth0 node": (H200_ON_ETH0, {"env.NCCL_SOCKET_IFNAME": "ens"}),
    "h200 + NCCL_P2P_DISABLE=1": (H200, {"env.NCCL_P2P_DISABLE": "1"}),
    # recorded before the static runtime's version was read: libnvjpeg's, as read from that very
    # file (CUDA 13.0; tests/test_cudart_static.py checks it against its SONAME's CUDA major)
    "torchvision + its nvjpeg's static runtime read": (TORCHVISION_NVJPEG_READ, {}),
    "h200 + NCCL_DEBUG=INFO": (H200, {"env.NCCL_DEBUG": "INFO"}),
    # issue 34: the recorded PTX-only extension, its PTX as the ISA reader saw it in a module built
    # the same way by nvcc 13.0 (9.0: it JITs on driver 580), and as nvcc 13.2 writes it (9.2: on
    # the H200's driver 580 every launch fails with 222, docs/compat.md)
    "h200 PTX-only extension, PTX ISA 9.0 (nvcc 13.0)": ("snapshots/h200_ext_ptx_jit.json", {
        "extensions.modules.0.ptx_isa": {"compute_75": "9.0"}}),
    "h200 PTX-only extension, PTX ISA 9.2 (nvcc 13.2)": ("snapshots/h200_ext_ptx_jit.json", {
        "extensions.modules.0.ptx_isa": {"compute_75": "9.2"}}),
    # a site NCCL 2.18.1 first on LD_LIBRARY_PATH of a conda-style torch (RUNPATH: LD_LIBRARY_PATH wins)
    "h200 + a site NCCL 2.18.1 shadows torch's": (H200, {
        "env.LD_LIBRARY_PATH": "/opt/nccl-2.18.1/lib:/usr/local/nvidia/lib64:/usr/local/nvidia/lib",
        "libraries.ld_library_path": ["/opt/nccl-2.18.1/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"],
        "libraries.resolutions[soname=libnccl.so.2].resolved": "/opt/nccl-2.18.1/lib/libnccl.so.2.18.1",
        "libraries.resolutions[soname=libnccl.so.2].resolved_via": "LD_LIBRARY_PATH",
        "libraries.resolutions[soname=libnccl.so.2].resolved_version": "2.18.1"}),
    # what-ifs on another fixture: the machine of siliconflow/onediff#1061 with torch 2.6.0+cu124
    # (needs CUDA 12.4, driver 535 = 12.2: minor-version compatibility), the assumed 2-GPU box with
    # a valid CUDA_VISIBLE_DEVICES, the assumed mixed-GPU workstation with CUDA_DEVICE_ORDER set
    "onediff + torch 2.6.0+cu124": ("snapshots/onediff_driver_ok.json", {
        "torch.0.version": "2.6.0+cu124", "torch.0.cuda": "12.4", "torch.0.dist.version": "2.6.0",
        "torch.0.dist.found_via": "/usr/local/lib/python3.10/dist-packages/torch-2.6.0.dist-info"}),
    "2-GPU box + CUDA_VISIBLE_DEVICES=1,0": ("snapshots/f12_visible_devices_invalid.json", {
        "env.CUDA_VISIBLE_DEVICES": "1,0", "gpus.visible": [1, 0]}),
    "mixed GPUs + CUDA_DEVICE_ORDER=PCI_BUS_ID": ("snapshots/mixed_gpus_device_order.json", {
        "env.CUDA_DEVICE_ORDER": "PCI_BUS_ID", "gpus.visible": [0, 1], "gpus.unknown.visible": DELETE}),
    # the `import torch` simulation (cudafix.probes.loader.torchload) laid onto the H200 recording (recorded
    # before that probe existed): the answers measured on real views of the torch 2.14.1+cu130 venv
    # (tests/test_broken_installs.py: no nvidia-cudnn-cu13; nvidia-nvjitlink 13.0.39), and a complete one
    "h200 + import torch simulated, complete": _imported(_IMPORT_OK),
    "h200 + nvidia-cudnn-cu13 missing": _imported(dict(_IMPORT_OK, error=_CUDNN_ERR, stage="torch._C", breaks=[{
        "kind": "missing", "wheel": "nvidia-cudnn-cu13", "requirement": "nvidia-cudnn-cu13==9.24.0.43",
        "required_by": "torch 2.11.0", "soname": "libcudnn.so.9",
        "needed_by": "/usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_python.so"}])),
    "h200 + nvidia-nvjitlink 13.0.39": _imported(dict(_IMPORT_OK, breaks=[{
        "kind": "unpinned", "wheel": "nvidia-nvjitlink", "requirement": "nvidia-nvjitlink<14,>=13.0.88",
        "required_by": "cuda-toolkit 13.0.2 [nvjitlink]", "installed": "nvidia-nvjitlink 13.0.39"}])),
}


def load(name: str) -> Snapshot:
    if name in BUILT:
        return snap(*BUILT[name])
    return Snapshot.load(str(SNAPS / name))


def problems(snap: Snapshot):
    return {f.rule: f for f in rules.findings(rules.run(snap))}


def env_ops(f):
    return {(op.op, op.name, op.value) for op in f.fix.env.ops} if f.fix else set()


# fixture -> {rule: (severity, [substrings the message+evidence must contain], auto?)}
EXPECT = {
    # native Windows, synthetic from the real torch 2.13.0 win_amd64 wheel (tests/wingen.py): c10.dll
    # removed (objdump: shm.dll -> c10.dll, the first torch\\lib DLL in load order that needs it), PyPI's CPU wheel
    "windows_torch2.13_cpu_no_c10.json": {
        "windows-dll-missing": ("error", ["c10.dll", "shm.dll", "WinError 126"], False),
        "cpu-only-torch": ("error", ["2.13.0+cpu", "PyPI serves only CPU builds"], False),
        "windows-commit-charge": ("warning", ["2 GiB commit limit", "WinError 1455"], False)},
    # WSL 2 (tests/test_wsl.py runs the same states as laid-out trees through the real ldconfig)
    "h200 as WSL 2 (symlinked libcuda)": {},
    "h200 as WSL 2, libcuda as mapped (regular files)": {
        "wsl-libcuda-not-symlink": ("info", ["/usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link"], False)},
    "h200 as WSL 2 + cuDNN 8, libcuda as mapped": {
        "wsl-libcuda-not-symlink": ("info", ["not a symbolic link"], False),
        "wsl-libcuda-unversioned": ("error", ["nvidia-cudnn-cu12 8.9.2.26", "libcuda.so"], True)},
    "h200 as WSL 2 + a Linux driver 535 first on LD_LIBRARY_PATH": {
        "wsl-libcuda-shadowed": ("error", ["535.104.05", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"], True)},
    "h200 as WSL, no /dev/dxg": {"wsl-driver": ("error", ["/dev/dxg"], False)},
    # issue 8: A100 / 4090 -> only the CUDA_HOME 12.1 vs torch 11.3 mismatch, fixed to cuda-11.3
    "yolov9 conda a100": {"cuda-home-mismatch": ("warning", ["12.1", "11.3"], True)},
    "yolov9 conda rtx4090": {"cuda-home-mismatch": ("warning", ["12.1", "11.3"], True)},
    "yolov9 pip a100": {"cuda-home-mismatch": ("warning", ["12.1", "11.3"], True)},
    # issue 8: H100/H200 + conda build -> every kernel JIT-compiled from compute_37 PTX
    "yolov9 conda h100": {"cuda-home-mismatch": ("warning", ["11.3"], True),
                               "arch-ptx-jit": ("warning", ["compute_37", "sm_90"], True)},
    "yolov9 conda h200": {"cuda-home-mismatch": ("warning", ["11.3"], True),
                               "arch-ptx-jit": ("warning", ["compute_37", "H200"], True)},
    "yolov9 conda h100 + cache disabled": {"cuda-home-mismatch": ("warning", ["11.3"], True),
                                              "arch-ptx-jit": ("warning", ["compute_37", "disabled"], False),
                                              "jit-cache-too-small": ("warning", ["CUDA_CACHE_DISABLE"], True)},
    "yolov9 conda h100 + cache unwritable": {"cuda-home-mismatch": ("warning", ["11.3"], True),
                                                "arch-ptx-jit": ("warning", ["compute_37"], True),
                                                "jit-cache-unwritable": ("warning", ["/.nv/ComputeCache"], False)},
    # issue 8: H200 + pip cu113 wheel (no PTX) -> no kernel image
    "yolov9 pip h200": {"cuda-home-mismatch": ("warning", ["11.3"], True),
                             "arch-unsupported": ("error", ["sm_90", "no kernel image"], False)},
    "f1_ragflow_nvjitlink_shadowed.json": {"lib-shadowed": ("error", ["libnvJitLink.so.12", "/usr/local/cuda-12.1/lib64", "12.1.105", "12.4.127"], True)},
    "f5_ultralytics_cpu_torch.json": {"cpu-only-torch": ("error", ["2.1.0+cpu", "RTX 3060"], False)},
    "f6_fooocus_driver_too_old.json": {"driver-too-old": ("error", ["470.86", "11.4", "12.1"], False)},
    "f7_rtx5090_arch_unsupported.json": {"arch-unsupported": ("error", ["sm_120", "no kernel image"], False)},
    "f9_cuda_home_minor.json": {"cuda-home-mismatch": ("warning", ["11.7", "11.3"], False)},
    "f12_visible_devices_hides_all.json": {"cuda-visible-devices-hides-all": ("error", ["'1'"], False)},
    "f12_visible_devices_invalid.json": {"cuda-visible-devices-invalid": ("warning", ["'2'", "1 of 3"], False)},
    "f14_driver_library_mismatch.json": {"driver-library-mismatch": ("error", ["550.90.07", "550.107.02"], False)},
    "f16_mixed_nccl.json": {"mixed-cuda-sources": ("error", ["nvidia-nccl-cu11", "nvidia-nccl-cu12"], False)},
    "f_torchvision_cuda_mismatch.json": {"torchvision-mismatch": ("error", ["11.7", "11.3"], False),
                                         "cuda-home-mismatch": ("warning", ["11.7", "11.3"], False)},
    "f_torchvision_colab_mismatch.json": {"torchvision-mismatch": ("error", ["2.0.1", "2.0.0", "11.8"], False)},
    "h200 + compat libcuda first": {"forward-compat-mismatch": ("error", ["580.95.05", "580.159.04", "803"], True)},
    "h200 + CUDA_LAUNCH_BLOCKING=1": {"launch-blocking": ("warning", ["CUDA_LAUNCH_BLOCKING=1"], False)},
    "h200 + CUDA_MODULE_LOADING=EAGER": {"module-loading-eager": ("warning", ["EAGER"], False)},
    "h200 + CUDA_VISIBLE_DEVICES=''": {"cuda-visible-devices-hides-all": ("error", ["CUDA_VISIBLE_DEVICES=''"], False)},
    "mixed_gpus_device_order.json": {"device-order": ("warning", ["RTX 3090", "RTX 4090"], False)},
    "onediff + torch 2.6.0+cu124": {"driver-minor-compat": ("warning", ["535.183.01", "12.2", "12.4"], False)},
    "birefnet_alloc_conf_invalid.json": {"alloc-conf-invalid": ("error", ["expandable_segments", "2.0.1"], True)},
    # recorded on this project's GPU-less dev box by a cudafix without the PCI probe: whether the
    # machine has an NVIDIA GPU is unknown, so no-driver says unknown (test_old_snapshot_...)
    "real_torch_cu_no_driver.json": {},
    # the same box recorded with the PCI probe: no NVIDIA device -> a note, never a warning
    "real_torch_cu_cpu_only_machine.json": {"no-driver": ("info", ["CPU-only machine", "2.14.1+cu130", "0x10de"], False)},
    # issue 12: a loaded driver that ignores the GPU on the PCI bus (open module on a Pascal Tesla P4)
    "truenas_p4_driver_ignores_gpu.json": {"driver-gpu-unsupported": ("error", ["580.178.04", "0x1bb3", "drives none"], False)},
    # issue 12: CUDA_HOME at a directory that does not exist (recorded here; a build-time finding)
    "real_cuda_home_missing.json": {"cuda-home-missing": ("warning", ["/usr/local/cuda-11.8", "does not exist", "building CUDA extensions"], False),
                                    "no-driver": ("info", ["CPU-only machine"], False)},
    "h200 + NCCL_SOCKET_IFNAME=ens on an eth0 node": {"nccl-interface-missing": ("error", ["'ens'", "eth0, lo"], False)},
    "h200 + NCCL_P2P_DISABLE=1": {"nccl-slow-path": ("warning", ["NCCL_P2P_DISABLE=1", "Debugging"], False)},
    "h200 + NCCL_DEBUG=INFO": {"nccl-debug-verbose": ("info", ["NCCL_DEBUG=INFO"], False)},
    "h200 + a site NCCL 2.18.1 shadows torch's": {"nccl-shadowed": ("error", ["libnccl.so.2", "/opt/nccl-2.18.1/lib", "2.18.1", "2.28.9"], True)},
    # issue 14: a torch extension built against torch 2.14.1 (sm_80, CUDA 13) beside torch 2.5.1+cu124 on an H200
    "ext_foreign_torch_h200.json": {"ext-torch-symbols": ("error", ["_ZNK3c1010TensorImpl15incref_pyobjectEv", "c10::TensorImpl::incref_pyobject() const"], False),
                                    "ext-cuda-major": ("warning", ["CUDA 13", "12.4", "libcudart.so.13"], False),
                                    "ext-arch-unsupported": ("error", ["sm_90", "no kernel image", "sm_80"], False),
                                    "cuda-home-mismatch": ("error", ["13.0", "12.4"], False)},
    # issue 14: recorded on the H200: a torch extension built PTX-only (TORCH_CUDA_ARCH_LIST="7.5+PTX")
    "h200_ext_ptx_jit.json": {"ext-ptx-jit": ("warning", ["compute_75", "sm_90", "1 MiB", "PTX ISA version was not read"], False)},
    "h200 PTX-only extension, PTX ISA 9.0 (nvcc 13.0)": {"ext-ptx-jit": ("warning", ["compute_75 (ISA 9.0)", "sm_90", "1 MiB"], False)},
    # one cause, one finding: the PTX cannot be JIT-compiled at all, so no stall warning beside it
    "h200 PTX-only extension, PTX ISA 9.2 (nvcc 13.2)": {"ext-ptx-unsupported": (
        "error", ["compute_75 (ISA 9.2)", "the provided PTX was compiled with an unsupported toolchain.", "CUDA 13.2", "CUDA 13.0"], False)},
    "ext_torchvision_h200.json": {},
    "torchvision + its nvjpeg's static runtime read": {},
    # healthy counterparts
    "h200 recorded": {},  # `cudafix check --strict` there: 0 errors, 0 warnings (docs/gpu-raw/h200-status.txt)
    "onediff_driver_ok.json": {},
    "2-GPU box + CUDA_VISIBLE_DEVICES=1,0": {},
    "mixed GPUs + CUDA_DEVICE_ORDER=PCI_BUS_ID": {},
    "birefnet_alloc_conf_ok.json": {},
    "h200 + import torch simulated, complete": {},
    "h200 + nvidia-cudnn-cu13 missing": {"torch-install-broken": ("error", ["nvidia-cudnn-cu13 is not installed", _CUDNN_ERR,
                                                                            "nvidia-cudnn-cu13==9.24.0.43"], False)},
    "h200 + nvidia-nvjitlink 13.0.39": {"torch-wheel-unpinned": ("warning", ["nvidia-nvjitlink 13.0.39", "nvidia-nvjitlink<14,>=13.0.88"], False)},
}


def test_every_fixture_has_a_source_and_an_expectation():
    names = sorted(p.name for p in SNAPS.glob("*.json"))
    assert sorted(set(EXPECT) - set(BUILT)) == names and set(BUILT) <= set(EXPECT)
    for n in names:
        data = json.loads((SNAPS / n).read_text())
        assert data["schema"] == "cudafix.snapshot/1"
        assert len(data.get("source", "")) > 20, n


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_fixture_findings(name):
    snap = load(name)
    runs = rules.run(snap)
    assert not [r.rule.id for r in runs if r.error], [r.error for r in runs if r.error]
    got = problems(snap)
    assert sorted(got) == sorted(EXPECT[name]), {k: v.message for k, v in got.items()}
    for rid, (sev, facts, auto) in EXPECT[name].items():
        f = got[rid]
        assert f.severity == sev, (rid, f.severity)
        text = f.message + "\n" + "\n".join(f.evidence)
        for fact in facts:
            assert fact in text, (rid, fact, text)
        assert f.auto == auto, (rid, f.fix)
        assert "\n" not in f.message


def _one(name, rid):
    return problems(load(name))[rid]


def test_yolov9_cuda_home_fix_points_at_the_installed_11_3_toolkit():
    f = _one("yolov9 conda a100", "cuda-home-mismatch")
    assert env_ops(f) == {(SET, "CUDA_HOME", "/usr/local/cuda-11.3")}


def _plan_install(name):
    """The one install command of the env's plan (cudafix.plans.planner), split into its words."""
    from cudafix.plans.planner import INSTALL, make_plan

    plan = make_plan(load(name))
    installs = [s for s in plan.steps if s.kind == INSTALL]
    assert len(installs) == 1, plan
    return plan, list(installs[0].argv)


def test_yolov9_h100_jit_fix_raises_cache_and_names_a_native_sm90_build_for_py38():
    f = _one("yolov9 conda h100", "arch-ptx-jit")
    assert env_ops(f) == {(SET, "CUDA_CACHE_MAXSIZE", CACHE_MAX)}
    assert f.fix.commands == ("cudafix fix --python /opt/conda/envs/yolov9/bin/python",), f.fix.commands
    # the plan's build must carry sm_90 SASS, fit driver CUDA 12.1 and Python 3.8; conda owns torch here
    from cudafix.knowledge import arch, torch_builds
    plan, argv = _plan_install("yolov9 conda h100")
    assert argv[:4] == ["conda", "install", "-p", "/opt/conda/envs/yolov9"]
    ver = next(a for a in argv if a.startswith("pytorch==")).split("==")[1]
    cuda = next(a for a in argv if a.startswith("pytorch-cuda=")).split("=")[1]
    assert argv[-4:] == ["-c", "pytorch", "-c", "nvidia"]
    assert "torchvision==%s" % torch_builds.torchvision_for(ver) in argv  # installed, so it moves too
    assert torch_builds.python_supported(torch_builds.release(ver), "3.8")
    assert version_tuple(cuda) <= (12, 1)
    sass, _ = torch_builds.conda_arch_list(ver, cuda)
    assert arch.fit(sass, [], "9.0").kind == "sass"


def test_yolov9_ld_library_path_to_cuda_12_1_is_not_shadowing():
    # libcublas.so.11 vs libcublas.so.12: different soname majors never collide
    for name in ("yolov9 pip a100", "yolov9 conda a100"):
        run = [r for r in rules.run(load(name)) if r.rule.id == "lib-shadowed"][0]
        assert run.verdict == OK


def test_lib_shadowed_fix_preloads_torchs_copy_and_drops_the_entry():
    f = _one("f1_ragflow_nvjitlink_shadowed.json", "lib-shadowed")
    assert [(p.soname, p.path) for p in f.fix.preload] == [
        ("libnvJitLink.so.12", "/home/mit/kxyRAG/ragflow/.venv/lib/python3.12/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12")]
    assert env_ops(f) == {(REMOVE_PATH, "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64")}


def test_forward_compat_fix_drops_compat_dir_and_preloads_the_kernel_matching_libcuda():
    f = _one("h200 + compat libcuda first", "forward-compat-mismatch")
    # what the fix did on the H200 itself (bench/gpu/after.sh fixes): the dir it dropped, the
    # libcuda it preloaded, after which the first CUDA op succeeded
    raw = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "gpu-raw" / "h200-fixes.txt").read_text()
    dropped = re.search(r"LD_LIBRARY_PATH \u2212(\S+) \u2014 cudafix status", raw).group(1)
    preloaded = re.search(r"cudafix: preloaded (\S+) for libcuda\.so\.1", raw).group(1)
    assert env_ops(f) == {(REMOVE_PATH, "LD_LIBRARY_PATH", dropped)}
    assert [p.path for p in f.fix.preload] == [preloaded]


def test_alloc_conf_fix_drops_the_unknown_key():
    f = _one("birefnet_alloc_conf_invalid.json", "alloc-conf-invalid")
    assert env_ops(f) == {(UNSET, "PYTORCH_CUDA_ALLOC_CONF", None)}


def test_cache_disabled_fix_reenables_it():
    f = _one("yolov9 conda h100 + cache disabled", "jit-cache-too-small")
    assert env_ops(f) == {(UNSET, "CUDA_CACHE_DISABLE", None)}


def test_driver_fixes_point_at_the_plan_and_the_plan_has_the_exact_command():
    for name, rid in (("f6_fooocus_driver_too_old.json", "driver-too-old"), ("f7_rtx5090_arch_unsupported.json", "arch-unsupported"),
                      ("f5_ultralytics_cpu_torch.json", "cpu-only-torch")):
        f = _one(name, rid)
        assert f.fix.commands == ("cudafix fix --python /usr/bin/python3",), (rid, f.fix)
        _plan, argv = _plan_install(name)
        assert argv[:4] == ["/usr/bin/python3", "-m", "pip", "install"], argv
        assert argv[4].startswith("torch==") and any(a.startswith("https://download.pytorch.org/whl/") for a in argv), argv


def test_driver_too_old_plan_fits_the_driver():
    _plan, argv = _plan_install("f6_fooocus_driver_too_old.json")
    variant = argv[-1].rsplit("/", 1)[1]
    assert variant.startswith("cu11"), variant  # driver 470 = CUDA 11.4: only a CUDA 11 build can run
    assert int(variant[2:]) <= 114  # natively, not under minor-version compatibility


def test_every_rule_has_a_problem_and_an_ok_fixture():
    seen_problem, seen_ok = set(), set()
    for name in EXPECT:
        for run in rules.run(load(name)):
            if run.verdict == PROBLEM:
                seen_problem.add(run.rule.id)
            elif run.verdict == OK:
                seen_ok.add(run.rule.id)
    ids = {r.id for r in rules.REGISTRY}
    assert ids - seen_problem == set()
    assert ids - seen_ok == set()


def test_unknown_is_not_ok_when_data_is_missing():
    # no library resolutions recorded for a CUDA torch -> lib-shadowed cannot say "ok"
    run = [r for r in rules.run(snap(H200, {"libraries.resolutions": []})) if r.rule.id == "lib-shadowed"][0]
    assert run.verdict == "unknown"
    # GPUs assumed without a driver -> no-driver is unknown, not ok and not a problem
    s = snap(H200, {"driver.kernel_version": None, "driver.libcuda_path": None,
                    "assumed.gpus": {"values": ["NVIDIA H200"]}})
    run = [r for r in rules.run(s) if r.rule.id == "no-driver"][0]
    assert run.verdict == "unknown"


def test_registry_explain_material_is_complete():
    for r in rules.REGISTRY:
        assert r.cause and r.symptoms and r.evidence_used and r.fix_text and r.sources, r.id
        assert r.severity in ("error", "warning", "info")
        assert r.id == r.id.lower() and " " not in r.id


def test_a_rule_fixes_automatically_only_where_its_record_says_so():
    """Rule.auto is the policy (docs/rules.md's auto-fix column); each Fix.auto a rule emits must
    agree with it, and a rule declared automatic shows an automatic fix on some fixture."""
    auto_seen = set()
    for name in EXPECT:
        for run in rules.run(load(name)):
            for o in run.outcomes:
                if o.fix is not None and o.fix.auto:
                    assert run.rule.auto, "%s emits an automatic fix on %r but its record says advice" % (run.rule.id, name)
                    auto_seen.add(run.rule.id)
    declared = {r.id for r in rules.REGISTRY if r.auto}
    assert declared - auto_seen == set(), "declared automatic, never seen fixing automatically"


def test_ext_ptx_jit_fix_warms_first_then_names_the_native_rebuild():
    f = _one("h200_ext_ptx_jit.json", "ext-ptx-jit")
    assert f.fix.commands[0] == "cudafix warm"
    assert 'TORCH_CUDA_ARCH_LIST="9.0"' in f.fix.summary
