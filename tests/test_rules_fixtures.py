"""Every rule over recorded / transcribed snapshots (tests/fixtures/snapshots/*.json).

Expectations are written from the report named in each fixture's "source" field (rule id,
severity, the facts the finding must name), not from what the code prints.  Each fixture also
asserts that NO other rule raises a problem: truthfulness (e.g. sm_89 runs sm_86 SASS, a CUDA 12
lib dir does not shadow soname-major-11 libraries).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from cudafix import rules
from cudafix.model.findings import OK, PROBLEM
from cudafix.model.fixes import REMOVE_PATH, SET, UNSET
from cudafix.model.snapshot import Snapshot

SNAPS = pathlib.Path(__file__).resolve().parent / "fixtures" / "snapshots"
CACHE_MAX = str(4 * 1024 ** 3)


def load(name: str) -> Snapshot:
    return Snapshot.load(str(SNAPS / name))


def problems(snap: Snapshot):
    return {f.rule: f for f in rules.findings(rules.run(snap))}


def env_ops(f):
    return {(op.op, op.name, op.value) for op in f.fix.env.ops} if f.fix else set()


# fixture -> {rule: (severity, [substrings the message+evidence must contain], auto?)}
EXPECT = {
    # issue 8: A100 / 4090 -> only the CUDA_HOME 12.1 vs torch 11.3 mismatch, fixed to cuda-11.3
    "yolov9_conda_a100.json": {"cuda-home-mismatch": ("error", ["12.1", "11.3"], True)},
    "yolov9_conda_rtx4090.json": {"cuda-home-mismatch": ("error", ["12.1", "11.3"], True)},
    "yolov9_pip_a100.json": {"cuda-home-mismatch": ("error", ["12.1", "11.3"], True)},
    # issue 8: H100/H200 + conda build -> every kernel JIT-compiled from compute_37 PTX
    "yolov9_conda_h100.json": {"cuda-home-mismatch": ("error", ["11.3"], True),
                               "arch-ptx-jit": ("warning", ["compute_37", "sm_90", "4 GiB"], True)},
    "yolov9_conda_h200.json": {"cuda-home-mismatch": ("error", ["11.3"], True),
                               "arch-ptx-jit": ("warning", ["compute_37", "H200"], True)},
    "yolov9_conda_h100_cache_disabled.json": {"cuda-home-mismatch": ("error", ["11.3"], True),
                                              "arch-ptx-jit": ("warning", ["compute_37", "disabled"], False),
                                              "jit-cache-too-small": ("warning", ["CUDA_CACHE_DISABLE"], True)},
    "yolov9_conda_h100_cache_unwritable.json": {"cuda-home-mismatch": ("error", ["11.3"], True),
                                                "arch-ptx-jit": ("warning", ["compute_37"], True),
                                                "jit-cache-unwritable": ("warning", ["/.nv/ComputeCache"], False)},
    # issue 8: H200 + pip cu113 wheel (no PTX) -> no kernel image
    "yolov9_pip_h200.json": {"cuda-home-mismatch": ("error", ["11.3"], True),
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
    "h200_forward_compat_803.json": {"forward-compat-mismatch": ("error", ["580.95.05", "580.159.04", "803"], True)},
    "h200_launch_blocking.json": {"launch-blocking": ("warning", ["CUDA_LAUNCH_BLOCKING=1"], False)},
    "h200_module_loading_eager.json": {"module-loading-eager": ("warning", ["EAGER"], False)},
    "mixed_gpus_device_order.json": {"device-order": ("warning", ["RTX 3090", "RTX 4090"], False)},
    "onediff_cu124_minor_compat.json": {"driver-minor-compat": ("warning", ["535.183.01", "12.2", "12.4"], False)},
    "birefnet_alloc_conf_invalid.json": {"alloc-conf-invalid": ("error", ["expandable_segments", "2.0.1"], True)},
    # recorded on this project's GPU-less dev box: CUDA torch, no driver -> warning (no GPU seen)
    "real_torch_cu_no_driver.json": {"no-driver": ("warning", ["2.14.1+cu130"], False)},
    # issue 14: a torch extension built against torch 2.14.1 (sm_80, CUDA 13) beside torch 2.5.1+cu124 on an H200
    "ext_foreign_torch_h200.json": {"ext-torch-symbols": ("error", ["_ZNK3c1010TensorImpl15incref_pyobjectEv", "c10::TensorImpl::incref_pyobject() const"], False),
                                    "ext-cuda-major": ("warning", ["CUDA 13", "12.4", "libcudart.so.13"], False),
                                    "ext-arch-unsupported": ("error", ["sm_90", "no kernel image", "sm_80"], False),
                                    "cuda-home-mismatch": ("error", ["13.0", "12.4"], False)},
    # issue 14: recorded on the H200: a torch extension built PTX-only (TORCH_CUDA_ARCH_LIST="7.5+PTX")
    "h200_ext_ptx_jit.json": {"ext-ptx-jit": ("warning", ["compute_75", "sm_90", "1 MiB"], False)},
    # healthy counterparts
    "ext_torchvision_h200.json": {},
    "h200_healthy.json": {},
    "onediff_driver_ok.json": {},
    "f12_visible_devices_ok.json": {},
    "mixed_gpus_pci_order.json": {},
    "birefnet_alloc_conf_ok.json": {},
}


def test_every_fixture_has_a_source_and_an_expectation():
    names = sorted(p.name for p in SNAPS.glob("*.json"))
    assert sorted(EXPECT) == names
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
    f = _one("yolov9_conda_a100.json", "cuda-home-mismatch")
    assert env_ops(f) == {(SET, "CUDA_HOME", "/usr/local/cuda-11.3")}


def test_yolov9_h100_jit_fix_raises_cache_and_names_a_native_sm90_build_for_py38():
    f = _one("yolov9_conda_h100.json", "arch-ptx-jit")
    assert env_ops(f) == {(SET, "CUDA_CACHE_MAXSIZE", CACHE_MAX)}
    assert f.fix.commands, "an exact install command is required"
    # the recommended build must carry sm_90 SASS, fit driver CUDA 12.1 and Python 3.8
    from cudafix.knowledge import arch, torch_builds
    pip = [c for c in f.fix.commands if c.startswith("pip ")][0]
    ver = pip.split("torch==")[1].split()[0]
    variant = pip.rsplit("/", 1)[1]
    rel = torch_builds.release(ver)
    assert torch_builds.python_supported(rel, "3.8")
    assert int(variant[2:]) <= 121
    sass, _ = torch_builds.wheel_arch_list(ver, variant)
    assert arch.fit(sass, [], "9.0").kind == "sass"


def test_yolov9_ld_library_path_to_cuda_12_1_is_not_shadowing():
    # libcublas.so.11 vs libcublas.so.12: different soname majors never collide
    for name in ("yolov9_pip_a100.json", "yolov9_conda_a100.json"):
        run = [r for r in rules.run(load(name)) if r.rule.id == "lib-shadowed"][0]
        assert run.verdict == OK


def test_lib_shadowed_fix_preloads_torchs_copy_and_drops_the_entry():
    f = _one("f1_ragflow_nvjitlink_shadowed.json", "lib-shadowed")
    assert [(p.soname, p.path) for p in f.fix.preload] == [
        ("libnvJitLink.so.12", "/home/mit/kxyRAG/ragflow/.venv/lib/python3.12/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12")]
    assert env_ops(f) == {(REMOVE_PATH, "LD_LIBRARY_PATH", "/usr/local/cuda-12.1/lib64")}


def test_forward_compat_fix_drops_compat_dir_and_preloads_the_kernel_matching_libcuda():
    f = _one("h200_forward_compat_803.json", "forward-compat-mismatch")
    assert env_ops(f) == {(REMOVE_PATH, "LD_LIBRARY_PATH", "/usr/local/cuda-13.0/compat")}
    assert [p.path for p in f.fix.preload] == ["/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"]


def test_alloc_conf_fix_drops_the_unknown_key():
    f = _one("birefnet_alloc_conf_invalid.json", "alloc-conf-invalid")
    assert env_ops(f) == {(UNSET, "PYTORCH_CUDA_ALLOC_CONF", None)}


def test_cache_disabled_fix_reenables_it():
    f = _one("yolov9_conda_h100_cache_disabled.json", "jit-cache-too-small")
    assert env_ops(f) == {(UNSET, "CUDA_CACHE_DISABLE", None)}


def test_driver_fixes_carry_exact_commands():
    for name, rid in (("f6_fooocus_driver_too_old.json", "driver-too-old"), ("f7_rtx5090_arch_unsupported.json", "arch-unsupported"),
                      ("f5_ultralytics_cpu_torch.json", "cpu-only-torch")):
        f = _one(name, rid)
        assert any(c.startswith("pip install torch==") and "--index-url https://download.pytorch.org/whl/cu" in c for c in f.fix.commands), (rid, f.fix)


def test_driver_too_old_command_fits_the_driver():
    f = _one("f6_fooocus_driver_too_old.json", "driver-too-old")
    variant = [c for c in f.fix.commands if c.startswith("pip ")][0].rsplit("/", 1)[1]
    assert variant.startswith("cu11"), variant  # driver 470 = CUDA 11.4: only a CUDA 11 build can run


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
    run = [r for r in rules.run(load("h200_healthy.json")) if r.rule.id == "lib-shadowed"][0]
    assert run.verdict == "unknown"
    # GPUs assumed without a driver -> no-driver is unknown, not ok and not a problem
    snap = load("h200_healthy.json")
    snap.driver.kernel_version = snap.driver.libcuda_path = None
    snap.assumed = {"gpus": {"values": ["NVIDIA H200"]}}
    run = [r for r in rules.run(snap) if r.rule.id == "no-driver"][0]
    assert run.verdict == "unknown"


def test_registry_explain_material_is_complete():
    for r in rules.REGISTRY:
        assert r.cause and r.symptoms and r.evidence_used and r.fix_text and r.sources, r.id
        assert r.severity in ("error", "warning", "info")
        assert r.id == r.id.lower() and " " not in r.id


def test_ext_ptx_jit_fix_warms_first_then_names_the_native_rebuild():
    f = _one("h200_ext_ptx_jit.json", "ext-ptx-jit")
    assert f.fix.commands[0] == "cudafix warm"
    assert 'TORCH_CUDA_ARCH_LIST="9.0"' in f.fix.summary
