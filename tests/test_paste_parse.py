"""cudafix.paste: pasted text -> facts (with their lines) -> partial snapshot -> findings.

The dumps in tests/fixtures/paste/ are transcribed from public issues (each names its URL); the
expected values are read off those texts by hand.  The few inline texts below are synthetic
(written here to exercise one format variation each) and say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from cudafix.paste import diagnosis
from cudafix.paste import facts as F
from cudafix.paste.build import NEEDS_ENV

PASTE = Path(__file__).resolve().parent / "fixtures" / "paste"


def paste(name: str) -> str:
    return (PASTE / name).read_text(encoding="utf-8").split("# ---\n", 1)[1]


def facts(text: str) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    for f in diagnosis.read_report(text).facts:
        out.setdefault(f.name, []).append(f.value)
    return out


def lines_of(text: str, name: str) -> List[int]:
    return [f.line for f in diagnosis.read_report(text).facts if f.name == name]


# -- collect_env of several torch releases -------------------------------------------------


def test_collect_env_1_3_driver_older_than_the_wheel_is_certain() -> None:
    # pytorch/pytorch#30071: torch 1.3.1 (CUDA 10.1) on driver 410.48 (CUDA 10.0); the thread's
    # sibling #31243 was answered "update it to at least 418.39" (peterjc123)
    text = paste("collect_env-1.3-pytorch-30071.txt")
    got = facts(text)
    assert got[F.TORCH_VERSION] == ["1.3.1"]
    assert got[F.TORCH_CUDA] == ["10.1"]
    assert got[F.DRIVER_VERSION] == ["410.48"]
    assert got[F.CUDA_AVAILABLE] == ["false"]
    assert got[F.NVCC] == ["10.0"]
    assert got[F.GPU] == ["%d|TITAN Xp" % i for i in range(8)]
    assert lines_of(text, F.DRIVER_VERSION) == [23]  # the fence is line 1
    d = diagnosis.read(text)
    f = next(f for f in d.findings if f.rule == "driver-too-old")
    assert f.severity == "error" and d.certainty["driver-too-old"] == diagnosis.CERTAIN
    assert "from report lines 2, 4, 23" in f.evidence
    assert any("418.39" in b for b in d.plan.blockers)


def test_collect_env_conda_lines_pick_the_stated_torch_and_say_two_installs() -> None:
    # pytorch/pytorch#28321: [pip3] torch==1.2.0 and [conda] pytorch 1.3.0 in one env
    text = paste("collect_env-1.3-conda-pytorch-28321.txt")
    d = diagnosis.read(text)
    t = d.snapshot.torch[0]
    assert t.dist.origin == "conda" and t.dist.conda_build == "py3.7_cuda10.1.243_cudnn7.6.3_0"
    assert t.dist.conda_channel == "pytorch" and t.cuda == "10.1"
    assert any("two torch versions (1.3.0, 1.2.0)" in n for n in d.report.notes)
    assert "driver-too-old" in {f.rule for f in d.findings if f.severity == "error"}


def test_collect_env_copy_without_colon_and_full_width_colons() -> None:
    # pytorch/pytorch#37320: "PyTorch version 1.5.0", "Os:", "GPU 0： Tesla P100-PCIE-16GB"
    got = facts(paste("collect_env-1.5-pytorch-37320.txt"))
    assert got[F.TORCH_VERSION] == ["1.5.0"]
    assert got[F.OS] == ["Ubuntu 18.04.3 LTS"]
    assert got[F.GPU] == ["%d|Tesla P100-PCIE-16GB" % i for i in range(4)]
    assert got[F.DRIVER_VERSION] == ["410.104"]


def test_collect_env_2x_format_synthetic() -> None:
    # synthetic (this file): the torch >= 1.13 layout, GPUs below the key, "No CUDA" values
    text = ("PyTorch version: 2.1.0+cu121\nIs debug build: False\nCUDA used to build PyTorch: 12.1\n"
            "ROCM used to build PyTorch: N/A\n\nPython version: 3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)\n"
            "Python platform: Linux-5.15.90.1-microsoft-standard-WSL2-x86_64-with-glibc2.35\nIs CUDA available: True\n"
            "CUDA runtime version: No CUDA\nCUDA_MODULE_LOADING set to: LAZY\nGPU models and configuration: \n"
            "GPU 0: NVIDIA GeForce RTX 4090\nGPU 1: NVIDIA GeForce RTX 4090\n\nNvidia driver version: 537.13\n"
            "cuDNN version: Could not collect\n\nVersions of relevant libraries:\n[pip3] numpy==1.26.0\n"
            "[pip3] torch==2.1.0+cu121\n[pip3] nvidia-cublas-cu12==12.1.3.1\n[conda] torch 2.1.0 pypi_0 pypi\n")
    got = facts(text)
    assert got[F.PYTHON_VERSION] == ["3.10.12"]
    assert got[F.WSL] == ["true"] and got[F.PLATFORM] == ["linux-x86_64"]
    assert got[F.MODULE_LOADING] == ["LAZY"]
    assert F.NVCC not in got  # "No CUDA" is no fact
    assert got[F.GPU] == ["0|NVIDIA GeForce RTX 4090", "1|NVIDIA GeForce RTX 4090"]
    assert "nvidia-cublas-cu12|12.1.3.1|pip||" in got[F.PACKAGE]
    assert "torch|2.1.0|pip|pypi_0|pypi" in got[F.PACKAGE]
    d = diagnosis.read(text)
    assert d.snapshot.driver.wsl and [w.name for w in d.snapshot.toolkits.nvidia_wheels] == ["nvidia-cublas-cu12"]
    assert not [f for f in d.findings if f.severity == "error"]  # 537 runs CUDA 12.2 >= 12.1


def test_cpu_build_reads_as_cpu_and_an_unstated_cuda_stays_unknown() -> None:
    # synthetic: "CUDA used to build PyTorch: None" is a CPU build; a bare pip version says nothing
    cpu = diagnosis.read("PyTorch version: 2.2.1+cpu\nCUDA used to build PyTorch: None\nNvidia driver version: 535.104.05\n"
                         "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 3060\n")
    assert "cpu-only-torch" in {f.rule for f in cpu.findings if f.severity == "error"}
    bare = diagnosis.read("torch 2.1.0\nNvidia driver version: 535.104.05\n")
    assert bare.snapshot.torch[0].cuda is None and "torch" in bare.snapshot.probe_errors
    assert "cpu-only-torch" in bare.undecided and "driver-too-old" in bare.undecided


# -- the other tools -------------------------------------------------------------------------


def test_detectron2_collect_env_states_the_extension_toolkit() -> None:
    # facebookresearch/detectron2#570: CUDA_HOME /usr/local/cuda-8.0 (nvcc 8.0), torch's CUDA Runtime 10.1
    text = paste("detectron2-collect_env-570.txt")
    got = facts(text)
    assert got[F.TORCH_VERSION] == ["1.3.1"] and got[F.TORCH_CUDA] == ["10.1"]
    assert got[F.GPU] == ["0|GeForce RTX 2080 Ti", "1|GeForce RTX 2080 Ti", "2|GeForce GTX 1080 Ti", "3|GeForce GTX 1080 Ti"]
    assert got[F.CUDA_HOME] == ["/usr/local/cuda-8.0"] and got[F.NVCC] == ["8.0"] and got[F.EXT_CUDA] == ["8.0"]
    d = diagnosis.read(text)
    assert d.snapshot.toolkits.cuda_home == "/usr/local/cuda-8.0" and "toolkits" not in d.snapshot.probe_errors
    assert d.certainty.get("cuda-home-mismatch") == diagnosis.CERTAIN


def test_mmdet_collect_env() -> None:
    # open-mmlab/mmdetection#3195
    got = facts(paste("mmdet-collect_env-3195.txt"))
    assert got[F.TORCH_VERSION] == ["1.5.0"] and got[F.CUDA_HOME] == ["/usr/local/cuda"] and got[F.NVCC] == ["10.2"]
    assert got[F.GPU] == ["0|GeForce RTX 2080 Ti", "1|GeForce GTX 1080 Ti"]
    assert got[F.PYTHON_VERSION] == ["3.7.7"]


def test_nvidia_smi_table_linux_and_windows() -> None:
    # pytorch/pytorch#45028 (Linux, On/Off) and #68611 (Windows, WDDM, a name cut with "...")
    got = facts(paste("nvidia-smi-a100-45028.txt"))
    assert got[F.DRIVER_VERSION] == ["450.119.03"] and got[F.DRIVER_CUDA] == ["11.0"]
    assert got[F.GPU] == ["0|A100-SXM4-40GB"]
    win = facts(paste("nvidia-smi-windows-68611.txt"))
    assert win[F.DRIVER_VERSION] == ["461.72"] and win[F.DRIVER_CUDA] == ["11.2"]
    assert win[F.GPU] == ["0|GeForce GTX 105..."]


def test_nvidia_smi_q_synthetic() -> None:
    # synthetic: the -q layout ("Key   : value")
    got = facts("==============NVSMI LOG==============\nDriver Version                            : 550.54.15\n"
                "CUDA Version                              : 12.4\nAttached GPUs                             : 1\n"
                "GPU 00000000:01:00.0\n    Product Name                          : NVIDIA A100-SXM4-80GB\n")
    assert got[F.DRIVER_VERSION] == ["550.54.15"] and got[F.DRIVER_CUDA] == ["12.4"]
    assert got[F.GPU] == ["0|NVIDIA A100-SXM4-80GB"]


def test_yolo_checks_windows() -> None:
    # SunOner/sunone_aimbot#36: banner + rows + the torch check line
    text = paste("yolo-checks-windows-sunone-36.txt")
    got = facts(text)
    assert got[F.TORCH_VERSION] == ["2.1.1+cu121"] and got[F.TORCH_CUDA] == ["12.1"]
    assert got[F.GPU] == ["0|NVIDIA GeForce GTX 1650 SUPER"]
    assert got[F.PLATFORM] == ["win-amd64"] and got[F.PYTHON_VERSION] == ["3.11.6", "3.11.6"]
    assert "torch|2.1.1+cu121|pip||" in got[F.PACKAGE]
    d = diagnosis.read(text)
    assert not [f for f in d.findings if f.severity == "error"]


def test_conda_list_pip_freeze_pip_list_pip_show() -> None:
    # guo-pu/NanoDet-PyTorch#4 (conda list) and synthetic pip lines
    got = facts(paste("conda-list-nanodet-4.txt"))
    assert "cudatoolkit|10.2.89|conda|hfd86e86_1|defaults" in got[F.PACKAGE]
    assert "cudnn|7.6.5|conda|cuda10.2_0|defaults" in got[F.PACKAGE]
    got = facts("torch==2.3.0+cu118\ntorchvision==0.18.0+cu118\nnumpy==1.26.4\n"
                "Package    Version\n---------- -------\ntorchaudio 2.3.0+cu118\n"
                "Name: xformers\nVersion: 0.0.26.post1\n")
    assert got[F.PACKAGE] == ["torch|2.3.0+cu118|pip||", "torchvision|0.18.0+cu118|pip||",
                              "torchaudio|2.3.0+cu118|pip||", "xformers|0.0.26.post1|pip||"]


def test_nvcc_and_prose_lines_are_not_packages() -> None:
    got = facts("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.1, V12.1.105\n"
                "I installed torch==2.1.0 yesterday\n    pip install torch==1.8.1+cu111 -f https://x\n")
    assert got == {F.NVCC: ["12.1"]}


# -- what people paste ---------------------------------------------------------------------


def test_fences_quotes_crlf_colours_and_details_synthetic() -> None:
    text = ("<details><summary>env</summary>\r\n\r\n```text\r\n> PyTorch version: 1.13.1+cu117\r\n"
            "> \x1b[1mCUDA used to build PyTorch: 11.7\x1b[0m\r\n```Nvidia driver version: 450.80.02```\r\n</details>\r\n")
    got = facts(text)
    assert got[F.TORCH_VERSION] == ["1.13.1+cu117"] and got[F.TORCH_CUDA] == ["11.7"]
    assert got[F.DRIVER_VERSION] == ["450.80.02"]
    assert lines_of(text, F.DRIVER_VERSION) == [6]


def test_two_machines_are_said_and_the_first_is_judged() -> None:
    # synthetic: two nvidia-smi headers of different drivers
    d = diagnosis.read("| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4 |\n"
                       "...\n| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |\n")
    assert d.snapshot.driver.kernel_version == "470.82.01"
    assert any("two driver versions (470.82.01, 535.104.05)" in n and "two machines" in n for n in d.report.notes)


def test_missing_facts_stay_unknown_never_ok() -> None:
    d = diagnosis.read("Nvidia driver version: 535.104.05\n")
    for need in ("torch", "gpus", "libraries", "extensions", "env", "toolkits"):
        assert need in d.snapshot.probe_errors and NEEDS_ENV in d.snapshot.probe_errors[need]
    verdicts = {r.rule.id: r.verdict for r in d.runs}
    for rid in ("cpu-only-torch", "arch-unsupported", "lib-shadowed", "cuda-home-mismatch", "torchvision-mismatch"):
        assert verdicts[rid] == "unknown", rid
    assert d.snapshot.driver.libcuda_path is None and "not searched" in d.snapshot.driver.unknown["libcuda_path"]


def test_nothing_readable_is_one_note() -> None:
    d = diagnosis.read("hello\nworld\n")
    assert d.report.facts == [] and any("nothing in the text" in n for n in d.report.notes)
    assert not [f for f in d.findings if f.severity in ("error", "warning")]


def test_symptom_confirms_a_certain_finding_and_names_others_as_likely() -> None:
    text = ("PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\nNvidia driver version: 470.82.01\n"
            "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).\n"
            "RuntimeError: The detected CUDA version (11.8) mismatches the version that was used to compile\n"
            "PyTorch (12.1). Please make sure to use the same CUDA versions.\n")
    d = diagnosis.read(text)
    too_old = next(f for f in d.findings if f.rule == "driver-too-old")
    assert any("error at line 4 is a symptom" in e for e in too_old.evidence)
    home = next(f for f in d.findings if f.rule == "cuda-home-mismatch")
    assert d.certainty["cuda-home-mismatch"] == diagnosis.LIKELY and home.severity == "warning" and home.subject == "report line 5"


@pytest.mark.parametrize("data", [b"\xff\xfeP\x00y\x00T\x00o\x00r\x00c\x00h\x00", "\ufeffPyTorch version: 2.0.1\n".encode("utf-8")])
def test_bytes_utf16_and_bom(data: bytes) -> None:
    diagnosis.read(data)  # no exception


def test_conda_owner_from_the_paste_installs_into_the_active_env() -> None:
    # synthetic: a conda pytorch (pytorch channel, cuda12.1 build) on driver 470 (CUDA 11.4)
    d = diagnosis.read("PyTorch version: 2.1.0\nCUDA used to build PyTorch: 12.1\nPython version: 3.10.12\n"
                       "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 3090\nNvidia driver version: 470.82.01\n"
                       "[conda] pytorch                   2.1.0           py3.10_cuda12.1_cudnn8.9.2_0    pytorch\n")
    assert d.certainty["driver-too-old"] == diagnosis.CERTAIN
    assert d.plan.owner == "conda"
    argv = d.plan.steps[0].argv
    assert argv[:2] == ("conda", "install") and "-p" not in argv  # the paste names no prefix: the activated env
    assert any(a.startswith("pytorch==") for a in argv)
