"""The activation line names each change and each open problem (issue 27, point 6), in the six
real shells (tests/conda_replay.py): what the line says it removed is what the shell's
environment lost, and every open finding is there by rule and message, not as a count."""

from __future__ import annotations

import pytest

from cudafix.model.findings import Finding
from cudafix.model.fixes import EnvOp, EnvPatch, Fix
from tests import conda_replay as cr

ALL_SHELLS = [s for s in cr.SHELLS if cr.available(s)]
SHADOW_DIR = "/usr/local/cuda-12.1/lib64"
SHADOW_MSG = ("libnvJitLink.so.12 is shadowed: %s/libnvJitLink.so.12 12.1.105 wins over torch's "
              "/venv/nvidia/nvjitlink/lib/libnvJitLink.so.12 12.4.127" % SHADOW_DIR)
HOME_MSG = "CUDA_HOME toolkit /usr/local (CUDA 13.0) does not match torch's CUDA 12.4: CUDA extension builds fail"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = cr.make_prefix(tmp_path_factory.mktemp("summary") / "env")
    cr.set_findings(p, [
        Finding(rule="lib-shadowed", severity="error", message=SHADOW_MSG, subject="libnvJitLink.so.12",
                fix=Fix(summary="load torch's own libnvJitLink.so.12 and drop %s from LD_LIBRARY_PATH on activation" % SHADOW_DIR,
                        auto=True, applies_in="both", env=EnvPatch((EnvOp("remove-path", "LD_LIBRARY_PATH", SHADOW_DIR),)))),
        Finding(rule="cuda-home-mismatch", severity="warning", message=HOME_MSG, subject="CUDA_HOME",
                fix=Fix(summary="install a CUDA 12.4 toolkit (nvcc) and point CUDA_HOME at it")),
    ])
    return p


@pytest.mark.parametrize("shell", ALL_SHELLS)
def test_activation_line_names_each_change_and_problem(shell, prefix, tmp_path):
    assert len(ALL_SHELLS) == 6, "the six shells of tests/conda_replay.py: %s" % ALL_SHELLS
    home = tmp_path / "home"
    home.mkdir()
    env = cr.base_env(home, {"LD_LIBRARY_PATH": SHADOW_DIR + ":/opt/keep"})
    r = cr.Replay(shell, prefix, tmp_path / "w", env).snap("before").activate().snap("during")
    p, envs = r.run()
    assert p.returncode == 0, p.stderr
    # the truth, from the real shell: the entry left LD_LIBRARY_PATH, nothing else did
    assert envs["before"][b"LD_LIBRARY_PATH"] == (SHADOW_DIR + ":/opt/keep").encode()
    assert envs["during"][b"LD_LIBRARY_PATH"] == b"/opt/keep"
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("cudafix: ") and line.endswith(" \u2014 cudafix status")
    items = line[len("cudafix: "):-len(" \u2014 cudafix status")].split("; ")
    assert len(items) == 2, items  # one change, one open problem
    assert items[0] == "removed %s from LD_LIBRARY_PATH (lib-shadowed: %s)" % (SHADOW_DIR, SHADOW_MSG)
    assert items[1] == "cuda-home-mismatch: " + HOME_MSG
    assert "\u2212" not in line and "1 warning" not in line
