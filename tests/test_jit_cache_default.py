"""The JIT cache's default size: 1 GiB in NVIDIA's current CUDA Programming Guide, 256 MiB in older
editions, and no NVIDIA document found that names the driver release that changed it.  So the
default is unknown for every driver: the probe records no size for it (never an assumed 256 MiB),
status says "size unknown", and the PTX-JIT rules judge a need against both bounds."""

from __future__ import annotations

from cudafix import rules
from cudafix.knowledge import jit_cache
from cudafix.probes.pyenv import environment as envp
from cudafix.render.report import render_status
from tests.snapbuild import H200, snap


def test_unset_maxsize_records_no_assumed_size(tmp_path):
    jc = envp.probe_jit_cache({"HOME": str(tmp_path)})
    assert jc.maxsize is None and jc.maxsize_via == "driver default"
    assert "size unknown" in jc.unknown["maxsize_default"]
    for drv in ("470.256.02", "535.183.01", "580.159.04"):
        assert jit_cache.default_bytes(drv)[0] is None


def test_status_says_unknown_never_a_size():
    s = snap(H200, {"jit_cache.maxsize": None})  # the recording's value came from the old assumption
    text = render_status(s, rules.run(s), verbose=True)  # issue 35: the hedge in full under -v
    line = [l for l in text.splitlines() if "JIT cache" in l][0]
    short = [l for l in render_status(s, rules.run(s)).splitlines() if "JIT cache" in l][0]
    assert "max: driver default (-v: its size)" in short and "MiB" not in short
    assert "size unknown" in line and "256 MiB per older" in line and "1 GiB per NVIDIA's current" in line
