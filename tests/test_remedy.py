"""Behaviour of remedy.recommend: never a build that lacks the GPU, the driver or the Python."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cudafix.knowledge import arch, cuda_driver, gpus, version_tuple
from cudafix.knowledge import torch_builds as tb
from cudafix.plans.remedy import driver_gap, recommend


def test_yolov9_h100_python38_driver_r530():
    r = recommend(12010, ["9.0"], "3.8.18", conda=True, current_torch="1.10.0")
    assert r.torch == "2.4.1" and r.variant == "cu121" and not r.minor_compat
    assert r.pip_command == "pip install torch==2.4.1 torchvision==0.19.1 --index-url https://download.pytorch.org/whl/cu121"
    assert r.conda_command == "conda install pytorch==2.4.1 torchvision==0.19.1 pytorch-cuda=12.1 -c pytorch -c nvidia"
    assert any("sm_90" in e for e in r.evidence)
    assert r.alternative is None  # 1.10 has no sm_90 SASS in any variant


def test_yolov9_a100_offers_current_minor_as_alternative():
    r = recommend(12010, ["8.0"], "3.8", conda=False, current_torch="1.10.0")
    assert r.torch == "2.4.1"
    assert r.alternative is not None and r.alternative.torch.startswith("1.10.")


def test_gtx_1080_ti_never_gets_cu128_or_newer_on_2_8_plus():
    r = recommend(12080, ["6.1"], "3.11", conda=False)
    assert version_tuple(r.torch) >= (2, 8)
    assert r.variant == "cu126"
    assert arch.fit(*tb.wheel_arch_list(r.torch, r.variant), "6.1").kind == "sass"


def test_rtx_5090_never_gets_a_pre_cu128_build():
    r = recommend(12080, ["12.0"], "3.11", conda=False)
    assert version_tuple(tb.variant_cuda(r.variant)) >= (12, 8)
    r = recommend(13000, ["12.0"], "3.12", conda=False)
    assert "sm_120" in tb.wheel_arch_list(r.torch, r.variant)[0]


def test_driver_older_than_gpu_gives_no_build():
    assert driver_gap(12040, ["12.0"]) == [("12.0", "12.8")]
    assert recommend(12040, ["12.0"], "3.11", conda=False) is None


def test_no_cross_major():
    r = recommend(12080, ["9.0"], "3.12", conda=False)
    assert tb.variant_cuda(r.variant).startswith("12.")


def test_minor_compat_is_flagged():
    # driver R535 (12.2): newest releases only ship cu126+; 12.x minor compat applies (SASS wheels)
    r = recommend(12020, ["9.0"], "3.12", conda=False, driver_version="535.104.05")
    assert r.minor_compat and any("minor-version compatibility" in e for e in r.evidence)
    # a driver below the 12.x floor cannot use minor compat
    r = recommend(12000, ["9.0"], "3.12", conda=False, driver_version="525.50.01")
    assert r is None or not r.minor_compat


def test_python_range_respected():
    r = recommend(13000, ["9.0"], "3.9", conda=False)
    rel = tb.release(r.torch)
    assert version_tuple(rel.python[0]) <= (3, 9) <= version_tuple(rel.python[1])
    assert recommend(13000, ["9.0"], "3.5", conda=False) is None


def test_kepler_k80():
    r = recommend(11040, ["3.7"], "3.8", conda=False)
    assert r is not None and "sm_37" in tb.wheel_arch_list(r.torch, r.variant)[0]


def test_conda_form_only_up_to_2_5():
    r = recommend(13000, ["9.0"], "3.12", conda=True)
    assert r.conda_command is None and any("conda" in n for n in r.notes)


def test_unknown_driver_names_the_minimum():
    r = recommend(None, ["8.6"], "3.12", conda=False)
    assert any("driver unknown" in e for e in r.evidence)


CCS = sorted({row.cc for row in gpus.GPU_CC})


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([r.cuda for r in cuda_driver.DRIVER_BRANCH_CUDA] + [None]),
    st.lists(st.sampled_from(CCS), min_size=1, max_size=3),
    st.sampled_from(["3.%d" % m for m in range(6, 15)]),
    st.booleans(),
)
def test_recommendation_always_fits(driver_cuda, ccs, python, conda):
    r = recommend(driver_cuda, ccs, python, conda)
    if r is None:
        return
    rel = tb.release(r.torch)
    assert tb.python_supported(rel, python)
    sass, _ = tb.wheel_arch_list(r.torch, r.variant)
    for cc in ccs:
        assert arch.fit(sass, [], cc).kind == "sass", (r, cc)
    if driver_cuda is not None:
        need = cuda_driver.cuda_int(tb.variant_cuda(r.variant))
        assert need <= driver_cuda or (need // 1000 == driver_cuda // 1000 and r.minor_compat)
    if r.conda_command:
        csass, _ = tb.conda_arch_list(r.torch, tb.variant_cuda(r.variant))
        assert all(arch.fit(csass, [], cc).kind == "sass" for cc in ccs)
    # nothing newer fits
    for newer in tb.RELEASES:
        if version_tuple(newer.version) > version_tuple(rel.version) and tb.python_supported(newer, python):
            for v in newer.variants:
                need = cuda_driver.cuda_int(tb.variant_cuda(v))
                runs = driver_cuda is None or need <= driver_cuda or (
                    need // 1000 == driver_cuda // 1000 and driver_cuda % 1000 >= 10)
                covered = all(arch.fit(tb.wheel_arch_list(newer.latest, v)[0], [], cc).kind == "sass" for cc in ccs)
                assert not (runs and covered), (newer.version, v)


def test_same_version_as_installed_pins_the_local_version():
    # PEP 440: `torch==2.14.1` is satisfied by an installed 2.14.1+cpu, so pip would change nothing.
    rec = recommend(13000, ["9.0"], "3.11.7", False, current_torch="2.14.1+cpu")
    assert rec.torch == "2.14.1"
    assert "torch==2.14.1+cu130 torchvision==0.29.1+cu130" in rec.pip_command
    other = recommend(13000, ["9.0"], "3.11.7", False, current_torch="2.13.0+cpu")
    assert "torch==2.14.1 " in other.pip_command  # a different version: the plain pin upgrades
    assert "torch==2.13.0+cu130" in other.alternative.pip_command
