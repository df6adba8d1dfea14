"""The snapshot builder: the recording, changed exactly where the overrides say and nowhere else."""

from __future__ import annotations

import json

import pytest

from tests.snapbuild import DELETE, FIXTURES, H200, build, snap


def recording():
    return json.loads((FIXTURES / H200).read_text(encoding="utf-8"))


def test_no_override_is_the_recording():
    assert build(H200) == recording()
    s = snap()
    assert s.driver.kernel_version == "580.159.04" and s.gpus.gpus[0].name == "NVIDIA H200"


def test_three_spellings_are_one_override():
    a = build(H200, {"env.CUDA_LAUNCH_BLOCKING": "1"})
    b = build(H200, env__CUDA_LAUNCH_BLOCKING="1")
    c = build(H200, env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert a == b == c
    rec = recording()
    assert a["env"] == dict(rec["env"], CUDA_LAUNCH_BLOCKING="1")  # merged, the recorded keys kept
    assert {k: v for k, v in a.items() if k not in ("env", "source")} == {
        k: v for k, v in rec.items() if k not in ("env", "source")}
    assert a["source"] == 'recorded base tests/fixtures/h200/snapshot.json + overrides: env.CUDA_LAUNCH_BLOCKING="1"'


def test_list_index_selection_and_delete():
    d = build(H200, {
        "gpus.gpus.0.name": "NVIDIA H100 80GB HBM3",
        "libraries.resolutions[soname=libcuda.so.1].resolved_version": "580.95.05",
        "env.TORCH_CUDA_ARCH_LIST": DELETE,
    })
    assert d["gpus"]["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    (cuda,) = [r for r in d["libraries"]["resolutions"] if r["soname"] == "libcuda.so.1"]
    assert cuda["resolved_version"] == "580.95.05"
    assert "TORCH_CUDA_ARCH_LIST" not in d["env"] and "TORCH_CUDA_ARCH_LIST" in recording()["env"]
    assert "env.TORCH_CUDA_ARCH_LIST=<deleted>" in d["source"]


@pytest.mark.parametrize("bad", [
    {"driver.kernel_versoin": "1"},                          # typo in a recorded key
    {"gpu.gpus.0.name": "x"},                                # typo in a section
    {"libraries.resolutions[soname=libnope.so.1].resolved": "x"},  # selects nothing
    {"env.NOT_RECORDED": DELETE},                            # nothing to delete
])
def test_a_typo_fails_loudly(bad):
    with pytest.raises(KeyError):
        build(H200, bad)


def test_the_source_says_what_the_base_is():
    d = build("snapshots/onediff_driver_ok.json", {"torch.0.version": "2.6.0+cu124"})
    assert d["source"].startswith("transcribed base tests/fixtures/snapshots/onediff_driver_ok.json + overrides: ")


def test_the_base_is_not_changed():
    before = recording()
    build(H200, {"env.CUDA_MODULE_LOADING": "EAGER", "gpus.gpus.0.name": "x"})
    assert recording() == before
