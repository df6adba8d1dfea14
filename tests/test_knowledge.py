"""Invariants over the knowledge tables, and behaviour of their lookup functions."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudafix.knowledge import (
    STATUSES,
    alloc_conf,
    arch,
    cuda_driver,
    gpu_peaks,
    gpus,
    version_tuple,
)
from cudafix.knowledge import torch_builds as tb
from cudafix.model import cuda as cudaver

ALL_ROWS = (
    list(cuda_driver.TOOLKIT_DRIVERS) + list(cuda_driver.MINOR_COMPAT_FLOOR_ROWS) + list(cuda_driver.DRIVER_BRANCH_CUDA)
    + list(gpus.GPU_CC) + list(gpus.SM_SUPPORT) + list(tb.RELEASES)
    + [w for r in tb.RELEASES for w in r.wheel_arch] + [c for r in tb.RELEASES for c in r.conda]
    + list(alloc_conf.ALLOC_KEYS) + list(gpu_peaks.GPU_PEAKS)
)


@pytest.mark.parametrize("row", ALL_ROWS, ids=lambda r: type(r).__name__)
def test_every_row_has_a_source_and_a_status(row):
    assert len(row.source.strip()) > 10
    assert row.status in STATUSES


# -- cuda_driver --------------------------------------------------------------------------


def test_parse_cuda_int():
    assert cudaver.version_text(13000) == "13.0"
    assert cudaver.version_text(12010) == "12.1"
    assert cudaver.version_text(9020) == "9.2"
    with pytest.raises(ValueError):
        cudaver.version_text(12)


@given(st.integers(min_value=9, max_value=20), st.integers(min_value=0, max_value=9))
def test_cuda_int_round_trip(major, minor):
    assert cudaver.version_text(cudaver.version_int("%d.%d" % (major, minor))) == "%d.%d" % (major, minor)


def test_min_driver_grows_with_cuda_version():
    rows = sorted(cuda_driver.TOOLKIT_DRIVERS, key=lambda r: (version_tuple(r.cuda), r.update))
    for os_ in ("linux", "windows"):
        values = [getattr(r, os_) for r in rows if getattr(r, os_)]
        for a, b in zip(values, values[1:]):
            assert cuda_driver.compare_driver_versions(a, b) <= 0, (os_, a, b)


def test_every_cuda_minor_has_a_ga_row():
    minors = {r.cuda for r in cuda_driver.TOOLKIT_DRIVERS}
    for m in minors:
        assert cuda_driver.toolkit_driver(m) is not None, m
    assert "12.7" not in minors  # no CUDA 12.7 toolkit exists


def test_min_driver_examples():
    assert cuda_driver.min_driver("12.1") == "530.30.02"
    assert cuda_driver.min_driver("12.1.1") == "530.30.02"  # the GA of that major.minor
    assert cuda_driver.min_driver("12.8", "windows") == "570.65"
    assert cuda_driver.min_driver("13.0", "windows") is None
    assert cuda_driver.min_driver("12.7") is None


def test_minor_compat_floors():
    assert cuda_driver.MINOR_COMPAT_FLOORS == {11: "450.80.02", 12: "525.60.13", 13: "580"}
    assert cuda_driver.minor_compat_floor(12) == "525.60.13"
    assert cuda_driver.minor_compat_floor(10) is None
    assert cuda_driver.minor_compat_floor_row(12).status == "secondary"
    # the floor of a major is never above the GA driver of that major's first minor
    for major, floor in cuda_driver.MINOR_COMPAT_FLOORS.items():
        assert cuda_driver.compare_driver_versions(floor, cuda_driver.min_driver("%d.1" % major) or "9999") <= 0


def test_branch_table_is_monotonic_and_matches_toolkit_table():
    rows = cuda_driver.DRIVER_BRANCH_CUDA
    for a, b in zip(rows, rows[1:]):
        assert a.branch < b.branch and a.cuda < b.cuda
    for r in rows:
        ga = cuda_driver.toolkit_driver(cudaver.version_text(r.cuda))
        if ga is not None and r.status in ("primary", "derived"):
            assert cuda_driver.driver_branch(ga.linux) == r.branch, r


def test_cuda_for_driver():
    assert cuda_driver.cuda_for_driver("580.95.05") == 13000
    assert cuda_driver.cuda_for_driver("530.30.02") == 12010
    assert cuda_driver.cuda_for_driver("565.57.01") == 12070
    assert cuda_driver.branch_row("565.57.01").status == "secondary"
    assert cuda_driver.cuda_for_driver("999.1") is None
    assert cuda_driver.cuda_for_driver("garbage") is None
    assert cuda_driver.cuda_at_least_for_driver("999.1") == 13040
    assert cuda_driver.cuda_at_least_for_driver("566.03") == 12060  # 565 row is secondary, skipped


def test_compare_driver_versions():
    assert cuda_driver.compare_driver_versions("570.26", "570.124.06") == -1
    assert cuda_driver.compare_driver_versions("580", "580.0.0") == 0
    assert cuda_driver.compare_driver_versions("580.95.05", "580.65.06") == 1


# -- gpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cc", [
    ("NVIDIA H200", "9.0"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GH200 480GB", "9.0"),
    ("NVIDIA GeForce RTX 4090", "8.9"), ("Tesla V100-SXM2-16GB", "7.0"), ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("NVIDIA A10", "8.6"), ("NVIDIA L4", "8.9"), ("NVIDIA L40S", "8.9"), ("Tesla T4", "7.5"),
    ("NVIDIA B200", "10.0"), ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
    ("Tesla K80", "3.7"), ("NVIDIA GeForce RTX 3090", "8.6"), ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"),
    ("NVIDIA B300", "10.3"),
])
def test_compute_capability(name, cc):
    assert gpus.compute_capability(name) == cc


# (Quadro P4000 and RTX A2000 are on NVIDIA's lists: tests/test_gpu_names.py.)
@pytest.mark.parametrize("name", ["", "Quadro FX 5800", "Intel UHD 620", "AMD Radeon RX 7900 XTX"])
def test_compute_capability_unknown(name):
    assert gpus.compute_capability(name) is None


def test_gpu_rows_have_known_sm():
    for row in gpus.GPU_CC:
        major, minor = arch.parse_cc(row.cc)
        assert major * 10 + minor in gpus.KNOWN_SM, row


def test_parse_gpu_spec():
    assert gpus.parse_gpu_spec("NVIDIA H200") == ("NVIDIA H200", "9.0")
    assert gpus.parse_gpu_spec("H100") == ("H100", "9.0")
    assert gpus.parse_gpu_spec("sm_90") == (None, "9.0")
    assert gpus.parse_gpu_spec("sm_120") == (None, "12.0")
    assert gpus.parse_gpu_spec("9.0") == (None, "9.0")
    assert gpus.parse_gpu_spec("My Card=8.9") == ("My Card", "8.9")
    for bad in ("sm_9x", "sm_99", "42.0", "Foo", ""):
        with pytest.raises(ValueError):
            gpus.parse_gpu_spec(bad)


def test_sm_support_table():
    for row in gpus.SM_SUPPORT:
        if row.last_cuda:
            assert version_tuple(row.first_cuda) <= version_tuple(row.last_cuda), row
    assert gpus.cuda_supports_sm("12.1", 90) is True
    assert gpus.cuda_supports_sm("11.7", 90) is False
    assert gpus.cuda_supports_sm("12.0", 37) is False
    assert gpus.cuda_supports_sm("11.8", 37) is True
    assert gpus.cuda_supports_sm("13.0", 61) is False
    assert gpus.cuda_supports_sm("12.9.1", 61) is True
    assert gpus.cuda_supports_sm("13.0", 101) is False and gpus.cuda_supports_sm("13.0", 110) is True
    assert gpus.cuda_supports_sm("12.0", 99) is None


# -- arch ---------------------------------------------------------------------------------


def test_parse_arch():
    assert arch.parse_arch("sm_90") == arch.Arch("sass", 9, 0)
    assert arch.parse_arch("sm_90a") == arch.Arch("sass", 9, 0, "a")
    assert arch.parse_arch("sm_100f") == arch.Arch("sass", 10, 0, "f")
    assert arch.parse_arch("compute_37") == arch.Arch("ptx", 3, 7)
    assert str(arch.parse_arch("sm_121a")) == "sm_121a"
    for bad in ("sm90", "sm_9", "compute_x", "9.0"):
        with pytest.raises(ValueError):
            arch.parse_arch(bad)


def test_sass_runs_on():
    assert arch.sass_runs_on("sm_80", "8.6")
    assert arch.sass_runs_on("sm_86", "8.9")
    assert not arch.sass_runs_on("sm_86", "8.0")
    assert not arch.sass_runs_on("sm_86", "9.0")  # never across majors
    assert arch.sass_runs_on("sm_90a", "9.0")
    assert not arch.sass_runs_on("sm_100a", "10.3")  # arch-specific: exactly that arch
    assert arch.sass_runs_on("sm_100f", "10.3")  # family-specific: same family
    assert not arch.sass_runs_on("sm_103f", "10.0")


def test_ptx_runs_on():
    assert arch.ptx_runs_on("compute_37", "9.0")
    assert arch.ptx_runs_on("compute_90", "12.0")
    assert not arch.ptx_runs_on("compute_90", "8.9")
    assert not arch.ptx_runs_on("compute_90a", "10.0")


def test_fit():
    conda_110 = arch.parse_arch_list(tb.C11)
    assert arch.fit(*conda_110, "9.0") == ("ptx", "compute_37")
    assert arch.fit(*conda_110, "8.9") == ("sass", "sm_86")
    assert arch.fit(*conda_110, "8.0") == ("sass", "sm_80")
    assert arch.fit(["sm_75", "sm_80"], [], "9.0") == ("none", None)
    assert arch.fit(["sm_90", "sm_90a"], [], "9.0").kind == "sass"


@given(st.sampled_from(sorted(gpus.KNOWN_SM)), st.sampled_from(sorted(gpus.KNOWN_SM)))
def test_sass_rule_is_same_major_and_lower_minor(code, gpu):
    cc = "%d.%d" % (gpu // 10, gpu % 10)
    expected = code // 10 == gpu // 10 and code % 10 <= gpu % 10
    assert arch.sass_runs_on("sm_%d" % code, cc) == expected
    assert arch.ptx_runs_on("compute_%d" % code, cc) == (code <= gpu)


def test_parse_arch_list():
    assert arch.parse_arch_list("3.7+PTX;5.0;6.0") == (["sm_37", "sm_50", "sm_60"], ["compute_37"])
    assert arch.parse_arch_list("9.0a 10.0") == (["sm_90a", "sm_100"], [])
    with pytest.raises(ValueError):
        arch.parse_arch_list("9.0;sm_90")


# -- torch builds -------------------------------------------------------------------------


def test_releases_cover_1_8_to_2_14():
    versions = [r.version for r in tb.RELEASES]
    expected = ["1.%d" % m for m in range(8, 14)] + ["2.%d" % m for m in range(0, 15)]
    assert versions == expected


@pytest.mark.parametrize("rel", tb.RELEASES, ids=lambda r: r.version)
def test_release_row_invariants(rel):
    t = version_tuple(rel.version)
    assert version_tuple(rel.latest)[:2] == t
    # torchvision: 0.(minor+15) for 2.x, 0.(minor+1) for 1.x
    assert rel.torchvision == ("0.%d" % (t[1] + 15) if t[0] == 2 else "0.%d" % (t[1] + 1))
    assert version_tuple(rel.torchvision_latest)[:2] == version_tuple(rel.torchvision)
    assert tb.torchvision_for(rel.latest) == rel.torchvision_latest
    assert rel.pypi_default in rel.variants
    assert version_tuple(rel.python[0]) <= version_tuple(rel.python[1])
    assert all(re.match(r"^cu\d{3}$", v) for v in rel.variants)
    for v in rel.variants:  # every variant has a parseable wheel arch list
        sass, _ptx = tb.wheel_arch_list(rel.latest, v)
        assert sass
        cuda = tb.variant_cuda(v)
        for s in sass:  # the toolkit of that variant can build every listed SM
            a = arch.parse_arch(s)
            assert gpus.cuda_supports_sm(cuda, a.number) is not False, (rel.version, v, s)
    for w in rel.wheel_arch:
        assert w.variant in rel.variants
    assert rel.pytorch_channel == (t <= (2, 5))
    for c in rel.conda:
        if c.arch_list:
            tb.parse_arch_list(c.arch_list)
        assert c.package == ("cudatoolkit" if t <= (1, 12) else "pytorch-cuda")


def test_python_ranges_never_shrink_at_the_top():
    tops = [version_tuple(r.python[1]) for r in tb.RELEASES]
    assert tops == sorted(tops)


def test_wheel_arch_list_examples():
    assert tb.wheel_arch_list("2.4.1", "cu121") == (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], [])
    assert tb.wheel_arch_list("1.10.0", "cu113") == (["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], [])
    assert tb.wheel_arch_list("2.13.0", "cu130")[1] == ["compute_120"]  # shipped with PTX by mistake
    assert tb.wheel_arch_list("2.13.1", "cu130")[1] == []
    assert tb.wheel_arch_list("2.14.1+cu130", "13.0")[0] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert tb.wheel_arch_list("2.8.0", "cu124") is None
    assert tb.wheel_arch_list("3.0", "cu130") is None
    # sm_61 only through sm_60 SASS; cu128 >= 2.8 has none
    assert arch.fit(*tb.wheel_arch_list("2.8.0", "cu128"), "6.1").kind == "none"
    assert arch.fit(*tb.wheel_arch_list("2.8.0", "cu126"), "6.1") == ("sass", "sm_60")


def test_conda_arch_lists_differ_from_wheels():
    sass, ptx = tb.conda_arch_list("1.10.0", "11.3")
    assert "sm_61" in sass and ptx == ["compute_37"]
    assert tb.conda_arch_list("2.6.0", "12.4") is None  # no pytorch channel after 2.5
    assert tb.conda_arch_list("2.4.1", "cu121") == tb.parse_arch_list(tb.C12)


def test_unconfirmed_rows_are_flagged():
    assert tb.wheel_arch_row("1.10.0", "cu113").status == "secondary"
    assert tb.wheel_arch_row("2.9.0", "cu130").status == "unconfirmed"
    assert tb.wheel_arch_row("2.6.0", "cu118").status == "inferred"


def test_torchvision_for():
    assert tb.torchvision_for("2.4") == "0.19"
    assert tb.torchvision_for("2.4.1") == "0.19.1"
    assert tb.torchvision_for("2.0.0") == "0.15.1"
    assert tb.torchvision_for("1.10.1") == "0.11.2"
    assert tb.torchvision_for("1.10") == "0.11"
    assert tb.torchvision_for("1.7.0") is None


def test_index_url():
    # the commands themselves are the planner's (cudafix/plans/commands.py, tests/test_plan_matrix.py)
    assert tb.index_url("cu130") == "https://download.pytorch.org/whl/cu130"


# -- alloc conf ---------------------------------------------------------------------------


def test_alloc_conf_ok():
    assert alloc_conf.check_alloc_conf("expandable_segments:True", "2.4.1") == []
    assert alloc_conf.check_alloc_conf("max_split_size_mb:128, garbage_collection_threshold:0.6", "1.13.1") == []
    assert alloc_conf.check_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8],backend:cudaMallocAsync", "2.4") == []
    assert alloc_conf.check_alloc_conf("", "2.4") == []


def test_alloc_conf_problems():
    (p,) = alloc_conf.check_alloc_conf("expandable_segments:True", "2.0.1")
    assert p.key == "expandable_segments" and p.kind == alloc_conf.NOT_YET and p.certain
    assert "Unrecognized CachingAllocator option: expandable_segments" in p.reason
    (p,) = alloc_conf.check_alloc_conf("max_split_size_mb:10", "2.4")
    assert p.kind == alloc_conf.BAD_VALUE and ">= 20" in p.reason
    (p,) = alloc_conf.check_alloc_conf("expandable_segments:true", "2.4")
    assert p.kind == alloc_conf.BAD_VALUE
    (p,) = alloc_conf.check_alloc_conf("garbage_collection_threshold:1.5", "2.4")
    assert p.kind == alloc_conf.BAD_VALUE
    (p,) = alloc_conf.check_alloc_conf("backend:cudaMalloc", "2.4")
    assert p.kind == alloc_conf.BAD_VALUE
    (p,) = alloc_conf.check_alloc_conf("roundup_power2_divisions:3", "2.4")
    assert p.kind == alloc_conf.BAD_VALUE
    (p,) = alloc_conf.check_alloc_conf("no_such_key:1", "2.11")
    assert p.kind == alloc_conf.UNKNOWN_KEY and "Unrecognized key 'no_such_key' in CUDA allocator config." in p.reason
    (p,) = alloc_conf.check_alloc_conf("no_such_key:1", "2.14")
    assert not p.certain  # newer than the key lists cudafix has read
    (p,) = alloc_conf.check_alloc_conf("release_lock_on_cudamalloc:True", "2.2")
    assert p.kind == alloc_conf.NOT_YET and not p.certain  # 2.2 vs 2.3 not confirmed
    (p,) = alloc_conf.check_alloc_conf("roundup_bypass_threshold_mb:100", "2.10")
    assert p.kind == alloc_conf.REMOVED and p.certain


def test_alloc_conf_repair():
    assert alloc_conf.repair("expandable_segments:True,max_split_size_mb:128", "2.0.1") == "max_split_size_mb:128"
    assert alloc_conf.repair("expandable_segments:True", "2.0.1") == ""
    assert alloc_conf.repair("expandable_segments:True", "2.1.0") is None
    assert alloc_conf.repair("max_split_size_mb:10", "2.4") is None  # bad values are not "repaired"
    assert alloc_conf.repair("release_lock_on_cudamalloc:True", "2.2") is None  # uncertain: kept


@given(st.lists(st.sampled_from([k.name for k in alloc_conf.ALLOC_KEYS] + ["bogus"]), max_size=5),
       st.sampled_from([r.latest for r in tb.RELEASES]))
def test_repair_result_has_no_certain_key_problems(keys, version):
    value = ",".join("%s:1" % k for k in keys)
    fixed = alloc_conf.repair(value, version)
    after = fixed if fixed is not None else value
    assert not [p for p in alloc_conf.check_alloc_conf(after, version)
                if p.certain and p.kind in (alloc_conf.UNKNOWN_KEY, alloc_conf.NOT_YET, alloc_conf.REMOVED)]


# -- peaks --------------------------------------------------------------------------------


def test_gpu_peaks():
    assert gpu_peaks.peak_for("NVIDIA H200").mem_bw_gbps > gpu_peaks.peak_for("NVIDIA H100 80GB HBM3").mem_bw_gbps
    assert gpu_peaks.peak_for("NVIDIA L4") is None  # no cited figure: no row
    assert gpu_peaks.peak_for("NVIDIA H100 PCIe") is None
    for row in gpu_peaks.GPU_PEAKS:
        assert row.status == "secondary" and row.source
        assert row.bf16_tflops == row.fp16_tflops
