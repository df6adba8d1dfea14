"""One environment plan (cudafix/plans/environment.py), taken in part by each automatic path.

The truth for where each correction applies is the rule's own Fix (auto, applies_in, its ops),
on real recorded snapshots with stated overrides; the test checks that activation, the hook's
cache entry and the warm child each take exactly their part, in the findings' order, and that
the loader's variables never reach a running process.
"""

from __future__ import annotations

from cudafix import rules
from cudafix.activation.plan import plan_from_findings
from cudafix.cli.warm import program_env
from cudafix.hook import plan as hookplan
from cudafix.knowledge import env_vars
from cudafix.plans.environment import environment_plan
from tests.snapbuild import H200, snap
from tests.test_rules_fixtures import H200_COMPAT_FIRST

# The yolov9 image's conda torch on an H100 (every kernel JIT-compiled from compute_37 PTX, a
# generated fixture from real scans: tests/fixtures/yolov9/SOURCES.md) with its JIT cache disabled
# (FORTH-ModelBasedTracker/HandTracker#7); and the H200 recording with the image's forward-compat
# libcuda first on LD_LIBRARY_PATH (error 803, measured on the H200; tests/test_rules_fixtures.py).
YOLOV9_H100 = "yolov9/yolov9-h100-conda-cudahome.json"
CASES = {
    "cache disabled": (YOLOV9_H100, {"env.CUDA_CACHE_DISABLE": "1", "jit_cache.disabled": True}),
    "compat libcuda first": (H200, H200_COMPAT_FIRST),
}


def _findings(case):
    base, over = case
    s = snap(base, over)
    return s, rules.findings(rules.run(s))


def test_each_path_takes_its_part_of_one_plan():
    for name, case in CASES.items():
        s, found = _findings(case)
        ep = environment_plan(found)
        assert ep.fixes, name
        act = plan_from_findings(found, dict(s.env))
        after = dict(s.env)
        for sf in ep.for_activation():
            for op in sf.activation_ops:
                op.apply(after)
        want_act = {n: after.get(n) for n in set(after) | set(s.env) if after.get(n) != s.env.get(n) or (n in after) != (n in s.env)}
        assert dict(act.changes) == want_act and want_act, name
        entry = hookplan.build_entry(found, dict(s.env), [], machine=["m"])
        want_proc = [(sf.finding.rule, op.op, op.name, op.value) for sf in ep.for_process() for op in sf.process_ops]
        assert list(entry.ops) == want_proc, name
        # the rules' own Fix says where: an op of a fix that does not apply in the process never lands there
        for f in found:
            if f.fix and f.fix.auto and f.fix.applies_in == "activation":
                assert not [o for o in entry.ops if o[0] == f.rule], f.rule


def test_the_loader_variables_never_reach_a_running_process():
    s, found = _findings(CASES["compat libcuda first"])
    ep = environment_plan(found)
    assert [op for sf in ep.fixes for op in sf.activation_ops if op.name == "LD_LIBRARY_PATH"], "activation drops the entry"
    for sf in ep.fixes:
        assert not [op for op in sf.process_ops if op.name in env_vars.LOADER_VARS]


def test_the_warm_child_runs_with_the_corrections_the_hook_makes():
    s, found = _findings(CASES["cache disabled"])
    assert "jit-cache-too-small" in {f.rule for f in found}
    env = dict(s.env)
    out = program_env(s, env)
    assert env.get("CUDA_CACHE_DISABLE") == "1" and "CUDA_CACHE_DISABLE" not in out
    after = dict(env)
    for _, op, name, value in hookplan.build_entry(found, env, [], machine=["m"]).ops:
        hookplan.hookcache.apply_op(after, op, name, value)
    assert out == after  # what `import torch` would have: the same plan
