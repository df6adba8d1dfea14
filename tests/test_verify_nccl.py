"""`cudafix verify --nccl`: the children's environment, NCCL's log, the verdicts, the no-GPU paths.

No machine of several GPUs (nor, this session, of one) was lent: the verdicts on GPUs are judged
from child outputs built here (synthetic, each case's expectation from the link arithmetic of
cudafix/knowledge/interconnect.py's cited figures, not from what the code prints), and the NCCL
log lines are synthetic in the shape NCCL prints them (as in public logs, e.g.
https://github.com/NVIDIA/nccl/issues/1189).  What runs for real: the rank launch and its
environment (a real wrapper interpreter records it), and the CPU-only / no-torch verdicts on this
project's real torch venvs.
"""

from __future__ import annotations

import json
import os
import stat
import sys

from cudafix.verify import nccl
from tests.conftest import run_cudafix, run_dev_cudafix

LOG = """\
node1:101:201 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>
node1:101:201 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
node1:101:230 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
node1:102:231 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM
node1:101:230 [0] NCCL INFO Channel 01/0 : 2[0] -> 0[0] [receive] via NET/IB/3/GDRDMA
node1:101:201 [0] NCCL INFO Using network IB
node1:102:231 [1] NCCL WARN Cuda failure 'out of memory'
"""


def test_parse_log():
    got = nccl.parse_log(LOG)
    assert got["version"] == "2.27.3+cuda12.9"
    assert got["transports"] == ["P2P/CUMEM", "NET/IB/3/GDRDMA"]
    assert got["network"] == "IB"
    assert got["warnings"] == ["Cuda failure 'out of memory'"]


def _rank(rank, world, busbw=None, **extra):
    r = {"rank": rank, "world_size": world, "torch": "2.11.0+cu130", "torch_cuda": "13.0", "cuda_available": True,
         "device_count": world, "init_s": 1.2, "self_all_reduce_ok": True, "rc": 0}
    if busbw is not None:
        r["sizes"] = [{"bytes": 128 << 20, "all_reduce_ms": 1.0, "all_reduce_algbw_gbs": busbw, "all_reduce_busbw_gbs": busbw,
                       "all_gather_ms": 1.0, "all_gather_algbw_gbs": busbw, "all_gather_busbw_gbs": busbw}]
    r.update(extra)
    return r


NVLINK18 = {"gpus": [{"index": i, "nvlinks_up": 18, "pcie_gen": 5, "pcie_width": 16} for i in range(2)]}
PCIE5 = {"gpus": [{"index": i, "nvlinks_up": 0, "pcie_gen": 5, "pcie_width": 16} for i in range(2)]}


def test_single_gpu_path():
    rep = nccl.judge([_rank(0, 1)], ["x NCCL INFO NCCL version 2.27.3+cuda13.0\n"], {}, 9)
    assert rep["verdict"] == nccl.SINGLE and nccl.EXIT_CODES[rep["verdict"]] == 0
    assert "were not checked" in rep["reasons"][0] and "2.27.3+cuda13.0" in rep["reasons"][0]


def test_nvlink_fast_path_and_degraded_by_a_setting():
    # 18 NVLink-4 links x 25 GB/s = 450 GB/s per direction; 360 GB/s is 80% of it, 20 GB/s is 4%
    fast = nccl.judge([_rank(0, 2, 360.0, topology=NVLINK18), _rank(1, 2)], ["a via P2P/CUMEM\n"], {}, 9)
    assert fast["verdict"] == nccl.FAST and fast["link"] == {"kind": "NVLink", "links": 18, "gbs": 450.0}
    slow = nccl.judge([_rank(0, 2, 20.0, topology=NVLINK18), _rank(1, 2)], ["a via SHM/direct/direct\n"],
                      {"NCCL_P2P_DISABLE": "1"}, 9)
    assert slow["verdict"] == nccl.DEGRADED and nccl.EXIT_CODES[slow["verdict"]] == 1
    text = " ".join(slow["reasons"])
    assert "under 50% of the NVLink link's 450 GB/s" in text
    assert "NCCL took SHM/direct/direct although the GPUs have NVLink" in text and "NCCL_P2P_DISABLE=1" in text


def test_pcie_link_is_judged_against_pcie():
    # PCIe 5.0 x16: 3.938 GB/s per lane -> 63.0 GB/s; 40 GB/s is 63% of it
    rep = nccl.judge([_rank(0, 2, 40.0, topology=PCIE5), _rank(1, 2)], ["a via SHM/direct/direct\n"], {}, 9)
    assert rep["verdict"] == nccl.FAST and rep["link"]["kind"] == "PCIe" and rep["link"]["gbs"] == 63.01


def test_init_failure_names_nccl_warning():
    children = [_rank(0, 2, init_error="DistBackendError: NCCL error in: ProcessGroupNCCL.cpp"), _rank(1, 2, rc=1)]
    rep = nccl.judge(children, ["h:1:2 [0] NCCL WARN Bootstrap : no socket interface found\n"], {"NCCL_SOCKET_IFNAME": "nope0"}, 9)
    assert rep["verdict"] == nccl.FAILED
    assert rep["reasons"][0].startswith("DistBackendError")
    assert "NCCL WARN: Bootstrap : no socket interface found" in rep["reasons"]


def test_ranks_get_loopback_rendezvous_and_nvls_off(tmp_path):
    """Two real ranks through a wrapper interpreter that records each child's environment."""
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\nenv > "%s/env.$RANK"\nexec %s "$@"\n' % (tmp_path, sys.executable))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    children, logs = nccl.run_ranks(str(wrapper), 2, timeout=120)
    envs = []
    for r in (0, 1):
        lines = (tmp_path / ("env.%d" % r)).read_text().splitlines()
        envs.append(dict(ln.split("=", 1) for ln in lines if "=" in ln))
    for r, e in enumerate(envs):
        assert e["RANK"] == str(r) and e["WORLD_SIZE"] == "2" and e["MASTER_ADDR"] == "127.0.0.1"
        assert e["NCCL_NVLS_ENABLE"] == "0" and e["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert e["NVSHMEM_DISABLE_NVLS"] == "1" and e["NCCL_DEBUG"] == "INFO"
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"] and int(envs[0]["MASTER_PORT"]) > 0
    assert "NCCL_DEBUG" not in os.environ or os.environ["NCCL_DEBUG"] != "INFO"  # only the children
    assert [c["rank"] for c in children] == [0, 1]


def test_cpu_only_torch_says_what_it_could_not_check(torch_cpu_python):
    proc = run_cudafix(torch_cpu_python, "verify", "--nccl", "--json", timeout=300)
    assert proc.returncode == 3, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["verdict"] == "CPU fallback"
    assert "NCCL init, the collectives and the link bandwidth were not checked" in rep["reasons"][0]


def test_cuda_torch_without_driver(torch_cu_python):
    proc = run_cudafix(torch_cu_python, "verify", "--nccl", timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "sees no GPU" in proc.stdout


def test_no_torch_is_exit_4(no_torch_python):
    proc = run_dev_cudafix("verify", "--nccl", "--python", str(no_torch_python), timeout=120)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "No module named 'torch'" in proc.stdout


def test_nccl_log_is_read_from_stdout_where_nccl_writes_it(tmp_path):
    """NCCL's debug log goes to stdout by default (NVIDIA/nccl src/debug.cc, `ncclDebugFile = stdout`):
    a real rank process whose stdout carries NCCL's lines, as the H200 run's did, must give its
    version and transport; the child's JSON line stays the result, not the log."""
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\necho "h200:7:7 [0] NCCL INFO NCCL version 2.28.9+cuda13.0"\n'
                       'echo "h200:7:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM" >&2\n'
                       'exec %s "$@"\n' % sys.executable)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    children, logs = nccl.run_ranks(str(wrapper), 1, timeout=120)
    parsed = nccl.parse_log("\n".join(logs))
    assert parsed["version"] == "2.28.9+cuda13.0" and parsed["transports"] == ["P2P/CUMEM"]
    assert children[0]["rank"] == 0 and not any(ln.startswith("{") for ln in "\n".join(logs).splitlines())
