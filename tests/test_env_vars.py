"""The one table of environment variables (cudafix/knowledge/env_vars.py) and what derives from it."""

from __future__ import annotations

import ast
import pathlib

from tools import env_vars_doc
from cudafix.hook import cache as hookcache
from cudafix.knowledge import env_vars
from cudafix.activation import plan as activation
from cudafix.probes.pyenv import environment
from cudafix.activation import shells

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_rows_are_well_formed():
    seen = set()
    for v in env_vars.TABLE:
        assert shells.NAME_RE.match(v.name) and v.name not in seen, v.name
        seen.add(v.name)
        assert v.readers and set(v.readers) <= set(env_vars.READERS), v
        assert v.why.strip(), v
        for src in v.source.split("; "):  # a public URL or a file of this repository
            assert src.startswith("https://") or (REPO / src.split(" ")[0]).exists(), (v.name, src)


def test_the_three_readers_derive_from_the_table():
    assert environment.VARIABLES == env_vars.names(env_vars.PROBE)
    assert environment.PREFIXES == env_vars.PROBE_PREFIXES
    assert activation.KEY_VARS == env_vars.names(env_vars.ACTIVATION)
    # the hook's fingerprint reads the table's HOOK rows
    assert hookcache.ENV_B == frozenset(n.encode("ascii") for n in env_vars.names(env_vars.HOOK))
    assert hookcache.ENV_NAMES == tuple(sorted(env_vars.names(env_vars.HOOK)))


def test_readers_cover_what_they_depend_on():
    probe = set(env_vars.names(env_vars.PROBE))
    # the hook and the activation cache recompute whenever something the probes record changes
    assert probe <= set(env_vars.names(env_vars.HOOK))
    assert probe <= set(env_vars.names(env_vars.ACTIVATION))
    # a managed variable is one activation changes: it must be part of the cache key
    assert set(env_vars.MANAGED) <= set(env_vars.names(env_vars.ACTIVATION))


def test_managed_excludes_what_shells_conda_and_the_loader_own():
    assert shells.MANAGED == env_vars.MANAGED
    for name in ("PATH", "LD_PRELOAD", "HOME", "IFS", "UID", "EUID", "CONDA_PREFIX", "PYTHONPATH", "_CUDAFIX_VARS"):
        assert not shells.manageable(name), name
    for name in env_vars.MANAGED:
        assert not name.startswith(("CONDA_", "_CUDAFIX", "CUDAFIX_", "BASH", "ZSH", "FISH")), name


def _env_op_names():
    """(file, name) of every EnvOp(kind, "NAME", ...) with a literal name in cudafix/rules."""
    out = []
    for path in sorted((REPO / "cudafix" / "rules").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "EnvOp" and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.append((path.name, arg.value))
    return out


def test_every_variable_a_rule_changes_is_managed():
    """A safe fix's variable that is not managed would be dropped from activation silently."""
    found = _env_op_names()
    assert {n for _f, n in found} >= {"CUDA_HOME", "LD_LIBRARY_PATH", "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_DISABLE"}
    for f, name in found:
        assert shells.manageable(name), "%s: EnvOp on %s, which is not a managed row of env_vars.py" % (f, name)
    # rules/torch.py edits the allocator config under both of its names (a loop variable)
    assert shells.manageable("PYTORCH_CUDA_ALLOC_CONF") and shells.manageable("PYTORCH_ALLOC_CONF")


def test_env_vars_md_is_up_to_date():
    current = (REPO / "docs" / "env-vars.md").read_text(encoding="utf-8")
    assert current == env_vars_doc.render(), "docs/env-vars.md is stale: run python -m tools.env_vars_doc"
    for v in env_vars.TABLE:
        assert "| `%s` |" % v.name in current


def test_doc_check_mode(tmp_path):
    out = tmp_path / "env-vars.md"
    out.write_text("stale\n")
    assert env_vars_doc.main(["--check", "--output", str(out)]) == 1
    assert env_vars_doc.main(["--output", str(out)]) == 0
    assert env_vars_doc.main(["--check", "--output", str(out)]) == 0
