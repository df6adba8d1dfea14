"""Allocator-config advice a user can act on (issue 27, point 6), judged by torch's OWN parser
(torch.cuda.memory._set_allocator_settings in the real torch 2.14.1 venv, no GPU needed):

- a key a letter off a real option gets "did you mean `<real>`?", and the printed command, pasted
  into a real sh, leaves a value torch's parser accepts (while it rejects the typo);
- a repair is said as the command itself (`unset NAME`), never "use unset NAME".
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.conftest import VENVS, require, run_cudafix

SETTER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
out = []
for s in json.loads(sys.argv[1]):
    try:
        torch.cuda.memory._set_allocator_settings(s)
        out.append("ok")
    except Exception as e:
        out.append(str(e).splitlines()[0])
print(json.dumps(out))
"""


def _py():
    py = VENVS / "torch-cu" / "bin" / "python"
    require(py.exists(), "test venv torch-cu (tests/make_venvs.sh)")
    return py


def torch_says(values):
    p = subprocess.run([str(_py()), "-c", SETTER, json.dumps(values)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CUDAFIX_DISABLE="1"), cwd="/")
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _finding(tmp_path, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTORCH", "CUDA"))}
    env.update(PYTORCH_CUDA_ALLOC_CONF=value, XDG_CACHE_HOME=str(tmp_path / "c"))
    r = run_cudafix(_py(), "status", "--json", "--only", "alloc-conf-invalid", env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (f,) = json.loads(r.stdout)["findings"]
    return f


def _paste(cmd, value):
    """Run the printed command in a real sh with the variable set as the user had it."""
    p = subprocess.run(["sh", "-c", 'PYTORCH_CUDA_ALLOC_CONF="$1"; export PYTORCH_CUDA_ALLOC_CONF; %s\n'
                        'printf "%%s" "${PYTORCH_CUDA_ALLOC_CONF-<unset>}"' % cmd, "sh", value],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("typo,real", [
    ("expandable_segment:True", "expandable_segments"),
    ("garbage_collection_treshold:0.6,expandable_segments:True", "garbage_collection_threshold"),
])
def test_a_key_one_letter_off_gets_did_you_mean_the_real_option(typo, real, tmp_path):
    f = _finding(tmp_path, typo)
    assert "did you mean `%s`?" % real in f["message"], f["message"]
    assert "check " not in f["fix"]["summary"] and "did you mean `%s`?" % real in f["fix"]["summary"]
    (cmd,) = f["fix"]["commands"]
    after = _paste(cmd, typo)
    verdict_typo, verdict_fixed = torch_says([typo, after])
    assert verdict_typo.startswith("Unrecognized key"), verdict_typo  # torch's own parser rejects the typo
    assert verdict_fixed == "ok", (after, verdict_fixed)  # and accepts what the pasted command leaves
    assert real in after


def test_a_far_off_key_gets_no_guess(tmp_path):
    f = _finding(tmp_path, "bogus_key:1")
    assert "did you mean" not in f["message"]


def test_a_repair_is_said_as_a_command(tmp_path):
    value = "bogus_key:1,expandable_segments:True"
    f = _finding(tmp_path, value)
    s = f["fix"]["summary"]
    assert not s.startswith("use "), s
    cmd = re.match(r"^`([^`]+)`", s)
    assert cmd, s
    assert subprocess.run(["sh", "-n", "-c", cmd.group(1)]).returncode == 0
    after = _paste(cmd.group(1), value)
    before_v, after_v = torch_says([value, after])
    assert before_v.startswith("Unrecognized key 'bogus_key'") and after_v == "ok", (before_v, after, after_v)
    f = _finding(tmp_path, "bogus_key:1")
    assert f["fix"]["summary"].startswith("`unset PYTORCH_CUDA_ALLOC_CONF`")
    assert _paste("unset PYTORCH_CUDA_ALLOC_CONF", "bogus_key:1") == "<unset>"
