"""The CUDA compatibility model (cudafix/knowledge/compat.py) against truths independent of it:

- NVIDIA's own statements, row by row (the minor-version compatibility guide's table and its
  "Application Considerations", the PTX ISA release history as cuda-python encodes it);
- the real driver: a recorded run of tools/compat_proof.py on a GPU machine
  (docs/gpu-raw/compat-proof-*.json: modules built by NVIDIA's nvcc 13.0-13.5 wheels, launched on
  driver 580.159.04) -- the model, fed what cudafix read of each module, must give what the driver
  did, error text included;
- nvcc's own PTX text for the ISA version cudafix reads from a fatbin (tests/test_fatbin.py).

And the house rule: no module outside the model decides compatibility by comparing versions.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from cudafix.knowledge import compat

REPO = pathlib.Path(__file__).resolve().parent.parent
PROOFS = sorted((REPO / "docs" / "gpu-raw").glob("compat-proof-*.json"))


def D(cuda, release=None, forward=None):
    return compat.Driver(cuda, release, forward)


# -- runtimes on drivers: NVIDIA's minor-version compatibility guide ---------------------------

@pytest.mark.parametrize("driver, runtime, state, how", [
    # "CUDA 13.x ... >= 580" (minor-version-compatibility.html, Table 1); cupy 14.2.0's 13.2 runtime on R580
    (D(13000, "580.159.04"), 13020, compat.RUNS, compat.MINOR),
    (D(13000, "580.65.06"), 13050, compat.RUNS, compat.MINOR),
    # 12.x ">= 525" (and the exact 525.60.13 of the RN's Table 2)
    (D(12020, "535.104.05"), 12040, compat.RUNS, compat.MINOR),
    (D(12000, "525.60.13"), 12080, compat.RUNS, compat.MINOR),
    (D(12000, "525.53"), 12010, compat.FAILS, compat.INSUFFICIENT_DRIVER),
    # 11.x ">= 450.80.02" ("by upgrading to ... 450.80.02 ... minor version compatibility is possible")
    (D(11000, "450.80.02"), 11080, compat.RUNS, compat.MINOR),
    (D(11000, "450.51.05"), 11010, compat.FAILS, compat.INSUFFICIENT_DRIVER),
    # never across a major
    (D(12090, "575.57.08"), 13000, compat.FAILS, compat.INSUFFICIENT_DRIVER),
    (D(11080, "520.61.05"), 12010, compat.FAILS, compat.INSUFFICIENT_DRIVER),
    # "If you are using a new CUDA 10.x minor release, then the minimum required driver version is the
    # same as the driver that's packaged as part of that toolkit release"
    (D(10010, "418.39"), 10020, compat.FAILS, compat.INSUFFICIENT_DRIVER),
    # a driver at or past the runtime's own release: native (backward compatibility)
    (D(13000, "580.159.04"), 12080, compat.RUNS, compat.NATIVE),
    (D(13000, "580.159.04"), 13000, compat.RUNS, compat.NATIVE),
    # forward compatibility: a cuda-compat libcuda of 13.2 on an R580 kernel driver runs 13.2 natively through it
    (D(12080, "570.124.06", forward=13020), 13020, compat.RUNS, compat.FORWARD),
])
def test_runtime_on_driver(driver, runtime, state, how):
    a = compat.runtime(driver, runtime)
    assert (a.state, a.how) == (state, how), a.why
    if state == compat.FAILS:
        assert a.error == "CUDA driver version is insufficient for CUDA runtime version"
    if how == compat.MINOR:
        assert any("222" in c for c in a.caveats)  # what minor compatibility cannot do is said with it


def test_a_missing_fact_is_unknown_never_runs():
    assert compat.runtime(D(None), 12040).state == compat.UNKNOWN
    assert compat.runtime(D(13000), None).state == compat.UNKNOWN
    # an R525 driver (CUDA 12.0) of unknown release may be below 525.60.13
    assert compat.runtime(D(12000), 12040).state == compat.UNKNOWN
    # PTX whose ISA was not read, or is newer than any table row
    assert compat.device_code(D(13000), "9.0", [], ["compute_90"], {}).state == compat.UNKNOWN
    assert compat.device_code(D(13000), "9.0", [], ["compute_90"], {"compute_90": "10.7"}).state == compat.UNKNOWN
    assert compat.device_code(D(13000), None, ["sm_90"], [], {}).state == compat.UNKNOWN


# -- PTX ISA: NVIDIA's release history as cuda-python encodes it --------------------------------

@pytest.mark.parametrize("isa, cuda", [
    # cuda.bindings.utils.get_minimal_required_cuda_ver_from_ptx_ver docs/examples: "8.8" -> 12090
    ("8.8", 12090), ("8.5", 12050), ("8.6", 12070), ("7.8", 11080), ("7.0", 11000), ("9.0", 13000), ("6.5", 10020),
])
def test_isa_table(isa, cuda):
    assert compat.isa_min_cuda(isa) == cuda


def test_toolkit_isa_is_the_table_inverted():
    # CUDA 12.6 writes 8.5 (no 12.6 row of its own); 13.2 writes 9.2 (nvcc 13.2.86, compat-proof)
    assert compat.toolkit_isa(12060) == "8.5"
    assert compat.toolkit_isa(13020) == "9.2"
    assert compat.toolkit_isa(11080) == "7.8"
    assert compat.toolkit_isa(13060) is None  # newer than the table: unknown, not 9.5


def test_minor_compat_does_not_lift_the_ptx_limit():
    # "Applications that compile device code to PTX will not work on older drivers" (MINOR_DOC)
    a = compat.device_code(D(13000, "580.159.04"), "9.0", [], ["compute_90"], {"compute_90": "9.2"})
    assert a.state == compat.FAILS and a.how == compat.UNSUPPORTED_PTX
    assert a.error == "the provided PTX was compiled with an unsupported toolchain."
    # "forward compatibility ... such restrictions do not apply"
    b = compat.device_code(D(13000, "580.159.04", forward=13020), "9.0", [], ["compute_90"], {"compute_90": "9.2"})
    assert b.state == compat.RUNS and b.how == compat.PTX_JIT


def test_sass_targets():
    drv = D(13000, "580.159.04")
    assert compat.device_code(drv, "9.0", ["sm_90a"], [], {}).how == compat.SASS
    # sm_90a runs on CC 9.0 only; sm_100f in the 10.x family (CUDA programming guide, "Feature Set Compiler Targets")
    assert compat.device_code(drv, "10.0", ["sm_90a"], [], {}).how == compat.NO_KERNEL_IMAGE
    assert compat.device_code(drv, "10.3", ["sm_100f"], [], {}).how == compat.SASS
    assert compat.device_code(drv, "12.0", ["sm_100f"], [], {}).how == compat.NO_KERNEL_IMAGE
    # the JIT off: PTX-only code does not load
    assert compat.device_code(drv, "9.0", [], ["compute_80"], {"compute_80": "9.0"}, jit_disabled=True).fails


# -- the real driver ------------------------------------------------------------------------------

def test_recorded_runs_exist():
    assert PROOFS, "no docs/gpu-raw/compat-proof-*.json (tools/compat_proof.py run on a GPU machine)"


@pytest.mark.parametrize("proof", PROOFS, ids=lambda p: p.name)
def test_model_matches_the_real_driver(proof):
    doc = json.loads(proof.read_text())
    drv = compat.Driver(doc["driver"]["cuda"], doc["driver"]["kernel"])
    seen = set()
    for row in doc["modules"]:
        obs = row["observed"]
        assert "error_code" in obs, row  # the launch ran
        # the ISA cudafix read is the one cuobjdump prints from the same file
        assert sorted(row["cudafix_ptx_isa"].values()) == row["cuobjdump_ptx_versions"], row["module"]
        # the static runtime's version cudafix read is what that runtime's cudaRuntimeGetVersion returned
        assert row["cudafix_static_runtime"] == obs["runtime_version"], row["module"]
        runtime = compat.runtime(drv, row["cudafix_static_runtime"])
        code = compat.device_code(drv, "9.0", row["cudafix_sass"], [p for p in row["cudafix_ptx_isa"]] or [], row["cudafix_ptx_isa"])
        if obs["error_code"] == 0:
            assert runtime.runs and code.runs, (row["module"], runtime.why, code.why)
        else:
            failed = code if code.fails else runtime
            assert failed.fails and failed.error == obs["error"], (row["module"], obs, failed.why)
            assert compat.ERROR_CODES[failed.how] == obs["error_code"]
        seen.add((runtime.how, code.how))
    # the run covers each boundary: native SASS, minor-version compat SASS, PTX JIT, PTX too new, no kernel
    assert {(compat.NATIVE, compat.SASS), (compat.MINOR, compat.SASS), (compat.NATIVE, compat.PTX_JIT),
            (compat.MINOR, compat.UNSUPPORTED_PTX), (compat.NATIVE, compat.NO_KERNEL_IMAGE)} <= seen, seen


# -- one model: nobody else compares versions to decide compatibility ---------------------------

DECIDERS = re.compile(r"\b(driver_at_least|compare_driver_versions|minor_compat_floor)\(")


def test_no_rule_or_plan_decides_compatibility_itself():
    allowed = {REPO / "cudafix" / "knowledge" / "compat.py", REPO / "cudafix" / "knowledge" / "cuda_driver.py"}
    bad = []
    for p in sorted((REPO / "cudafix").rglob("*.py")):
        if p in allowed:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if DECIDERS.search(line.split("#", 1)[0]):
                bad.append("%s:%d: %s" % (p.relative_to(REPO), n, line.strip()))
    assert bad == [], "ask cudafix.knowledge.compat instead:\n" + "\n".join(bad)


def test_docs_compat_md_is_current():
    from tools import compat_doc

    assert compat_doc.main(["--check"]) == 0, "run python -m tools.compat_doc"


def test_an_unreadable_compute_capability_is_unknown_not_a_crash():
    a = compat.device_code(D(13000, "580.159.04"), "9.0;rm", ["sm_90"], [], {})
    assert a.state == compat.UNKNOWN and "9.0;rm" in a.why


def test_warm_asks_the_model_too():
    """`cudafix warm` does not try to JIT PTX the driver cannot compile (it would fail as the
    program does): the recorded PTX-only extension, its PTX as nvcc 13.2 writes it."""
    from cudafix.warm import plan as wplan
    from tests.test_rules_fixtures import load

    (t,) = wplan.targets(load("h200 PTX-only extension, PTX ISA 9.2 (nvcc 13.2)"))
    (m,) = [m for m in t.modules if m.via == "dlopen"]
    assert not m.warmable and "cannot be JIT-compiled by this driver" in m.why_not
    (t,) = wplan.targets(load("h200 PTX-only extension, PTX ISA 9.0 (nvcc 13.0)"))
    (m,) = [m for m in t.modules if m.via == "dlopen"]
    assert "cannot be JIT-compiled" not in (m.why_not or "")
