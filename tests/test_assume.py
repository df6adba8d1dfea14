"""--assume-driver / --assume-gpu: a new snapshot with driver and GPUs replaced."""

import pytest

from cudafix.probes.machine import assume
from cudafix.model.snapshot import GPU, Snapshot


def _snap(env=None):
    s = Snapshot()
    s.driver.kernel_version = "535.104.05"
    s.driver.cuda_version = 12020
    s.driver.unknown["libcuda_version"] = "no libcuda"
    s.gpus.gpus = [GPU(index=0, name="Tesla T4", compute_capability="7.5")]
    s.env = dict(env or {})
    return s


def test_apply_replaces_driver_and_gpus_in_a_copy():
    s = _snap()
    n = assume.apply(s, "580.95.05", ["NVIDIA H200", "sm_80"])
    assert s.driver.kernel_version == "535.104.05" and s.gpus.gpus[0].name == "Tesla T4"  # untouched
    assert n.driver.kernel_version == n.driver.libcuda_version == "580.95.05"
    assert n.driver.cuda_version == 13000
    assert n.driver.found_via["cuda_version"] == "assumed (--assume-driver)"
    assert "libcuda_version" not in n.driver.unknown
    assert [(g.name, g.compute_capability) for g in n.gpus.gpus] == [
        ("NVIDIA H200", "9.0"), ("GPU with compute capability 8.0", "8.0")]
    assert n.gpus.visible == [0, 1]
    assert n.assumed["driver"]["replaced"]["kernel_version"] == "535.104.05"
    assert n.assumed["gpus"]["replaced"] == ["Tesla T4"]
    # round-trips through JSON
    assert Snapshot.from_json(n.to_json()).assumed == n.assumed


def test_apply_driver_only_keeps_gpus():
    n = assume.apply(_snap(), "530.30.02", [])
    assert n.driver.cuda_version == 12010 and n.gpus.gpus[0].name == "Tesla T4" and "gpus" not in n.assumed


def test_secondary_branch_is_marked():
    n = assume.apply(_snap(), "565.57.01", [])
    assert n.driver.cuda_version == 12070 and "secondary" in n.driver.found_via["cuda_version"]


def test_unknown_branch_is_unknown_not_guessed():
    n = assume.apply(_snap(), "999.10", [])
    assert n.driver.cuda_version is None and "cuda_version" in n.driver.unknown


@pytest.mark.parametrize("cvd,visible", [
    ("", []), ("1", [1]), ("1,0", [1, 0]), ("0,5,1", [0]), ("-1", []), ("x,0", []),
    # a duplicate entry: NVIDIA documents no meaning, so the one parser (model/visible_devices.py)
    # calls it undecidable, for probed and assumed GPUs alike
    ("0,0", None),
])
def test_cuda_visible_devices(cvd, visible):
    n = assume.apply(_snap({"CUDA_VISIBLE_DEVICES": cvd}), None, ["H100", "H100"])
    assert n.gpus.visible == visible


def test_cuda_visible_devices_uuid_is_unknown():
    n = assume.apply(_snap({"CUDA_VISIBLE_DEVICES": "GPU-8932f937"}), None, ["H100"])
    assert n.gpus.visible is None and "visible" in n.gpus.unknown


@pytest.mark.parametrize("driver,gpus,msg", [
    ("abc", [], "--assume-driver 'abc': not a driver version"),
    ("5.8", [], "--assume-driver '5.8'"),
    (None, ["sm_9x"], "--assume-gpu 'sm_9x': not a GPU name cudafix knows"),
    (None, ["Foo GPU"], "--assume-gpu 'Foo GPU': not a GPU name cudafix knows; give its compute capability as sm_XY"),
    (None, ["sm_99"], "--assume-gpu 'sm_99': no NVIDIA GPU has compute capability 9.9"),
])
def test_bad_values(driver, gpus, msg):
    with pytest.raises(assume.AssumeError) as exc:
        assume.apply(_snap(), driver, gpus)
    assert str(exc.value).startswith(msg) and "\n" not in str(exc.value)


def test_from_env():
    assert assume.from_env({}) == (None, [])
    assert assume.from_env({"CUDAFIX_ASSUME_DRIVER": " 580.95.05 ", "CUDAFIX_ASSUME_GPU": "NVIDIA H200, sm_80,"}) == (
        "580.95.05", ["NVIDIA H200", "sm_80"])
