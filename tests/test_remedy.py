"""The candidate ranking (cudafix.plans.remedy): what may fit, smallest change first."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.knowledge import arch, cuda_driver, gpus, version_tuple
from cudafix.knowledge import torch_builds as tb
from cudafix.plans.remedy import MINOR_COMPAT, NATIVE, candidates, driver_gap
from cudafix.model import cuda as cudaver


def first_native(*a, **kw):
    return next(c for c in candidates(*a, **kw) if c.mode == NATIVE)


def test_same_version_other_variant_comes_first():
    # CPU torch 2.13.0 on an H200 with driver 580 (CUDA 13.0): the installed version as cu130
    c = candidates(13000, ["9.0"], "3.11.7", current_torch="2.13.0", driver_version="580.95.05")[0]
    assert (c.torch, c.variant, c.mode, c.distance) == ("2.13.0", "cu130", NATIVE, 0)


def test_yolov9_h100_python38_driver_r530_gets_the_nearest_native_sm90_build():
    c = first_native(12010, ["9.0"], "3.8.18", current_torch="1.10.0")
    assert (c.torch, c.variant) == ("2.0.1", "cu118")  # sm_90 SASS first in 2.0 cu118; nearer 1.10 than 2.4
    assert any("sm_90 SASS" in e for e in c.evidence)


def test_a100_driver_470_python38_gets_1_12_cu113_natively():
    # the example: cu118 only under minor compat; 1.12.1+cu113 runs natively on CUDA 11.4
    c = first_native(11040, ["8.0"], "3.8", current_torch="2.14.1", driver_version="470.82.01")
    assert (c.torch, c.variant) == ("1.12.1", "cu113")


def test_v100_driver_418_python38_gets_1_8_1_cu101():
    c = first_native(10010, ["7.0"], "3.8", current_torch="2.14.1", driver_version="418.87.01")
    assert (c.torch, c.variant) == ("1.8.1", "cu101")
    assert not any(x.variant == "cu101" and x.torch == "1.8.0" for x in candidates(10010, ["7.0"], "3.8", current_torch="1.8.0"))


def test_gtx_1080_driver_535_never_gets_a_minor_compat_build_first():
    cs = candidates(12020, ["6.1"], "3.11", current_torch="2.14.1", driver_version="535.104.05")
    natives = [c for c in cs if c.mode == NATIVE]
    assert natives and all(cudaver.version_int(c.cuda) <= 12020 for c in natives)
    same_release = [c for c in cs if c.torch == "2.14.1"]
    assert all(c.mode == MINOR_COMPAT for c in same_release)  # cu126 > 12.2: listed, but the planner rejects it


def test_driver_older_than_gpu_gives_no_candidate():
    assert driver_gap(12040, ["12.0"]) == [("12.0", "12.8")]
    assert candidates(12040, ["12.0"], "3.11") == []


def test_no_gpu_lists_cpu_builds_only():
    cs = candidates(None, [], "3.11", current_torch="2.13.0", want_cuda=False)
    assert cs[0].label == "torch 2.13.0+cpu" and {c.variant for c in cs} == {"cpu"}


CCS = sorted({row.cc for row in gpus.GPU_CC})


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([r.cuda for r in cuda_driver.DRIVER_BRANCH_CUDA] + [None]),
    st.lists(st.sampled_from(CCS), min_size=1, max_size=3),
    st.sampled_from(["3.%d" % m for m in range(6, 15)]),
    st.sampled_from([None, "1.10.2", "2.5.1", "2.13.0", "2.14.1"]),
)
def test_every_candidate_fits_and_order_is_by_distance(driver_cuda, ccs, python, current):
    cs = candidates(driver_cuda, ccs, python, current_torch=current)
    dists = [c.distance for c in cs]
    assert dists == sorted(dists)
    for c in cs:
        rel = tb.release(c.torch)
        assert tb.python_supported(rel, python)
        sass, ptx = tb.wheel_arch_list(c.torch, c.variant)
        assert all(arch.fit(sass, ptx, cc).kind in ("sass", "ptx") for cc in ccs)
        if driver_cuda is not None:
            need = cudaver.version_int(c.cuda)
            assert need <= driver_cuda if c.mode == NATIVE else (need // 1000 == driver_cuda // 1000)
        if current and c.distance == 0:
            assert c.torch == "%d.%d.%d" % version_tuple(current)[:3]
