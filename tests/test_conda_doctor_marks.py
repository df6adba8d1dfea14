"""`conda doctor`'s mark is the user's outcome (issue 27, point 5), on real snapshots of the real
torch 2.14.1 venv: ✅ for a healthy env (a note is no problem: a CUDA torch on this CPU-only
machine runs on the CPU, `import torch` works) and for one whose every error and warning cudafix's
installed hooks correct; ❌ only while something is left for the user."""

from __future__ import annotations

import os
import subprocess

from cudafix import rules
from cudafix.plugins import conda as conda_plugin
from cudafix.probes import take_snapshot
from tests.conftest import VENVS, require


def _runs(**extra):
    py = VENVS / "torch-cu" / "bin" / "python"
    require(py.exists(), "test venv torch-cu (tests/make_venvs.sh)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "PYTORCH", "LD_"))}
    env.update(extra)
    return py, env, rules.run(take_snapshot(python=str(py), env=env))


def _severities(runs):
    return sorted({f.severity for r in runs for f in r.findings()})


def test_healthy_env_with_a_note_is_a_check_mark():
    py, env, runs = _runs()
    require(_severities(runs) == ["info"], "an env whose only findings are notes (here: a CUDA torch, no NVIDIA GPU)")
    # the truth: the env works -- torch imports and runs a CPU op
    p = subprocess.run([str(py), "-c", "import torch; print(torch.ones(2).sum().item())"], capture_output=True, text=True,
                       env=dict(env, CUDAFIX_DISABLE="1"), cwd="/", timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("2.0"), p.stderr[-2000:]
    for hooks in (True, False, None):
        text = conda_plugin.render_health(runs, ok_mark="OK!", x_mark="BAD!", hooks=hooks)
        assert text.startswith("OK! ") and "BAD!" not in text, text


def test_everything_corrected_by_the_hooks_is_a_check_mark():
    _py, _env, runs = _runs(PYTORCH_CUDA_ALLOC_CONF="bogus_key:1")  # alloc-conf-invalid: dropped by the hooks
    serious = [f for r in runs for f in r.findings() if f.severity in ("error", "warning")]
    assert serious and all(f.auto for f in serious), [(f.rule, f.auto) for f in serious]
    assert any(f.severity == "info" for r in runs for f in r.findings())  # a note beside it changes nothing
    ok = conda_plugin.render_health(runs, ok_mark="OK!", x_mark="BAD!", hooks=True)
    assert ok.startswith("OK! ") and "BAD!" not in ok, ok
    bad = conda_plugin.render_health(runs, ok_mark="OK!", x_mark="BAD!", hooks=False)
    assert bad.startswith("BAD! "), bad  # hooks missing: nothing corrects it yet
