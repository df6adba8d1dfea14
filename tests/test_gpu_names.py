"""GPU names -> compute capability: every product on NVIDIA's CUDA GPU lists (as transcribed in
tests/fixtures/gpus/cuda-gpus.txt) resolves to the compute capability the list gives it, also in
the spellings nvidia-smi prints; names that real devices reported resolve to what those devices
reported; a typo is refused with the nearest names and the sm_XY way out.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cudafix.knowledge import gpu_names
from cudafix.knowledge.gpus import compute_capability, parse_gpu_spec
from tests.conftest import REPO

LISTS = REPO / "tests" / "fixtures" / "gpus" / "cuda-gpus.txt"


def listed():
    """(name, X.Y, section) straight from the transcription: a reader of the file sees the same."""
    out, cc, section = [], None, None
    for line in LISTS.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@source "):
            section, cc = line.split()[1], None
        elif re.fullmatch(r"\d{1,2}\.\d", line):
            cc = line
        else:
            out.append((line, cc, section))
    return out


LISTED = listed()


def test_the_transcription_covers_every_section_of_nvidias_current_list():
    ccs = {cc for _, cc, s in LISTED if s == "cuda-gpus"}
    assert ccs == {"12.1", "12.0", "11.0", "10.3", "10.0", "9.0", "8.9", "8.7", "8.6"}
    # the CC 12.0 row of the current page: 9 RTX PRO boards and the 7 GeForce RTX 50 cards
    assert len([n for n, cc, s in LISTED if s == "cuda-gpus" and cc == "12.0"]) == 16


def test_generated_table_is_what_the_generator_makes_of_the_sources():
    proc = subprocess.run([sys.executable, "-m", "tools.gpu_names", "--check"], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name,cc,section", LISTED, ids=[n for n, _, _ in LISTED])
def test_every_listed_name_resolves_to_its_compute_capability(name, cc, section):
    assert compute_capability(name) == cc
    assert compute_capability(name.upper()) == cc
    assert compute_capability(name.lower()) == cc
    # how nvidia-smi / NVML print the same product
    printed = name if name.startswith(("NVIDIA", "Jetson")) else "NVIDIA " + name
    assert compute_capability(printed) == cc
    assert parse_gpu_spec(name) == (name, cc)


# What real devices reported about themselves (name as printed, compute capability reported):
# an independent truth for names that are not on NVIDIA's list as printed.
REPORTED = [
    ("NVIDIA H200", "9.0", "tests/fixtures/h200/nvidia-smi-query.csv (recorded, nvidia-smi --query-gpu=name,compute_cap)"),
    ("NVIDIA A100-SXM4-80GB", "8.0", "https://gist.github.com/gengwg/3520df2ebf8872e5ee4818367e3a4122 (deviceQuery)"),
    ("NVIDIA T1200 Laptop GPU", "7.5", "github.com/ggml-org/llama.cpp tools/rpc/README.md (ggml_cuda_init output)"),
    ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", "12.0", "https://developer.nvidia.com/cuda-gpus (12.0 row)"),
]


@pytest.mark.parametrize("name,cc,where", REPORTED, ids=[n for n, _, _ in REPORTED])
def test_names_devices_print_resolve_to_what_the_devices_reported(name, cc, where):
    assert compute_capability(name) == cc, where


# The names issue 16 found refused, with the value their chip has on NVIDIA's list.
@pytest.mark.parametrize("name,cc", [
    ("NVIDIA RTX A6000", "8.6"), ("NVIDIA A10G", "8.6"), ("NVIDIA RTX 6000 Ada Generation", "8.9"),
    ("NVIDIA RTX A2000", "8.6"), ("NVIDIA RTX A4000", "8.6"), ("NVIDIA RTX A5000", "8.6"),
    ("Quadro RTX 8000", "7.5"), ("TITAN RTX", "7.5"), ("NVIDIA TITAN RTX", "7.5"),
    ("NVIDIA A800-SXM4-80GB", "8.0"), ("NVIDIA H20", "9.0"), ("NVIDIA H800", "9.0"),
    # short forms and laptop names
    ("a6000", "8.6"), ("A10G", "8.6"), ("rtx 4090", "8.9"), ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
    ("NVIDIA GeForce RTX 4080 Max-Q", "8.9"), ("NVIDIA GeForce RTX 2050", "8.6"), ("NVIDIA GeForce MX550", "7.5"),
    ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H100 PCIe", "9.0"), ("Tesla V100-SXM2-16GB", "7.0"),
    ("Tesla T4", "7.5"), ("NVIDIA GB10", "12.1"), ("GeForce GTX 1660 Ti", "7.5"),
])
def test_names_users_and_nvidia_smi_use(name, cc):
    assert compute_capability(name) == cc


def test_pci_ids_rows_say_how_they_got_their_compute_capability():
    rows = [r for r in gpu_names.ROWS if r[3] == "pci-ids"]
    assert rows
    for name, key, cc, src, via in rows:
        m = re.match(r"PCI device 10de:[0-9a-f]{4} (\S+) .*; (\w+) is (\d+\.\d) as ", via)
        assert m and m.group(3) == cc, via
        assert m.group(1).startswith(m.group(2)[:2]), via


@pytest.mark.parametrize("typo,expect", [
    ("RTX 4909", "GeForce RTX 4090"), ("H1OO", "NVIDIA H100"), ("NVIDIA RTX A600", "NVIDIA RTX A6000"),
    ("Jetson AGX Orn", "Jetson AGX Orin"), ("L40X", "NVIDIA L40"),
])
def test_typos_are_refused_with_a_suggestion_and_the_sm_way_out(typo, expect):
    with pytest.raises(ValueError) as exc:
        parse_gpu_spec(typo)
    msg = str(exc.value)
    assert "did you mean" in msg and repr(expect) in msg, msg
    assert "sm_XY" in msg and "\n" not in msg


def test_cli_refuses_a_typo_in_one_line_with_the_suggestion():
    proc = subprocess.run([sys.executable, "-m", "cudafix", "check", "--example", "h200-torch2.11-cu130",
                           "--assume-gpu", "RTX 4909"], cwd=str(REPO), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "'GeForce RTX 4090'" in proc.stderr, proc.stderr
