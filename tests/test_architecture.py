"""The package's structure, checked: the pipeline's stages import one way (docs/architecture.md).

probes -> model <- rules -> knowledge; plans / render / cli / hook sit above.  Read from the
source with ast (every import statement, at module level or inside a function), so a lazy
import cannot hide a dependency that points the wrong way.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "cudafix"

# stage -> the cudafix stages its modules may import (itself always allowed)
ALLOWED: Dict[str, Set[str]] = {
    "model": set(),
    "knowledge": {"model"},
    "store": set(),
    "forks": set(),  # cudafix/forks.py: the one fork primitive, imports nothing of cudafix
    "probes": {"model", "knowledge", "store", "forks"},
    "rules": {"model", "knowledge"},
    "plans": {"model", "knowledge", "rules", "probes", "store"},
    "render": {"model", "knowledge", "rules", "plans"},
    # the two automatic paths, each one home: activation (its plan, its run-time behind activate.d,
    # one renderer per shell) and the PTX warm-up (what to warm, the detached job)
    "warm": {"model", "knowledge", "store"},
    "activation": {"model", "knowledge", "probes", "rules", "plans", "store", "warm"},
    # the import-torch path only
    "hook": {"model", "knowledge", "probes", "rules", "plans", "render", "store"},
    "verify": {"model", "knowledge", "probes", "rules", "store"},
    # what users paste (collect_env, nvidia-smi, pip/conda lists, errors) -> a partial snapshot, the
    # same rules and planner, rendered with render's toolkit
    "paste": {"model", "knowledge", "rules", "plans", "render"},
    "cli": {"model", "knowledge", "probes", "rules", "plans", "render", "store", "verify", "hook", "fleet",
            "activation", "warm", "paste"},
    # render: the text toolkit's escaping; store: the one trusted runner (srun); forks: the one fork primitive
    "fleet": {"model", "knowledge", "rules", "probes", "render", "store", "forks"},
    "plugins": {"model", "knowledge", "probes", "rules", "plans", "render", "store", "cli"},
}
TOP = {"__init__", "__main__"}  # cudafix/__init__.py (the version) and `python -m cudafix`
MAX_LINES = 500


def _modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _imports(path: Path, module: str) -> List[Tuple[str, bool]]:
    """(imported cudafix module, at module level?) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(n) for n in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` / `try:` blocks at the top count as module level
        if isinstance(node, (ast.If, ast.Try)):
            top_level |= {id(n) for n in ast.walk(node)}
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [mod] + ["%s.%s" % (mod, a.name) for a in node.names]
        for n in names:
            if n == "cudafix" or n.startswith("cudafix.") or n == "_cudafix_startup":
                out.append((n, id(node) in top_level))
    return out


def _known(name: str, modules: Set[str]) -> str:
    """The module an imported name refers to (``from cudafix.x import y``: y may be a name in x)."""
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = dict(_modules())


def test_stages_import_one_way():
    bad = []
    for mod, path in MODULES.items():
        stage = _stage(mod)
        if stage in TOP or stage not in ALLOWED and mod != "cudafix":
            continue
        for name, _ in _imports(path, mod):
            target = _known(name, set(MODULES))
            tstage = _stage(target)
            if target == "cudafix" or tstage == stage:
                continue
            if name == "_cudafix_startup" and stage == "hook":
                continue
            if tstage not in ALLOWED.get(stage, set()):
                bad.append("%s imports %s (%s -> %s)" % (mod, name, stage, tstage))
    assert not bad, "\n".join(bad)


def _dependencies(path: Path, module: str, modules: Set[str]) -> Set[str]:
    """The cudafix modules ``module`` needs, from every import statement (lazy ones included):
    ``from pkg import name`` needs pkg.name where that is a module, else pkg's __init__ itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(_known(a.name, modules) for a in node.names if a.name.split(".")[0] == "cudafix")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([mod] if mod else []))
            if mod.split(".")[0] == "cudafix":
                out.update(mod + "." + a.name if mod + "." + a.name in modules else _known(mod, modules) for a in node.names)
    out.discard(module)
    return out & modules


def test_no_import_cycles():
    """No module needs itself through others, lazy imports included: a cycle that only a lazy
    import keeps from failing at import time is still two modules that cannot be read apart."""
    modules = set(MODULES)
    graph = {m: _dependencies(p, m, modules) for m, p in MODULES.items()}
    cycles: List[str] = []
    state: Dict[str, int] = {}

    def visit(m: str, stack: List[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(" -> ".join(stack[stack.index(n):] + [n]))
            elif not state.get(n):
                visit(n, stack + [n])
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m, [m])
    assert not cycles, "\n".join(cycles)


PROBE_SECTIONS = {"machine", "pyenv", "loader", "binfmt"}  # docs/architecture.md, "Adding a probe"


def test_probes_are_split_into_sections():
    """cudafix/probes/ holds take_snapshot (__init__.py), what one snapshot runs (sections.py), the
    children the CLI starts for it (ahead.py) and the four sections; every other probe module
    lives in a section, whose __init__.py is a docstring and imports nothing (importing one module
    of a section does not import the rest of it)."""
    top = PKG / "probes"
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py", "ahead.py", "sections.py"]
    dirs = {p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert dirs == PROBE_SECTIONS, dirs
    for section in sorted(PROBE_SECTIONS):
        init = top / section / "__init__.py"
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), init
        assert len(tree.body) == 1, "%s: a docstring only, no code" % init
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))], init
        assert not [p for p in (top / section).iterdir() if p.is_dir() and p.name != "__pycache__"], section
        mods = [m for m in MODULES if m.startswith("cudafix.probes.%s." % section)]
        assert mods and all(_stage(m) == "probes" for m in mods + ["cudafix.probes." + section]), section


def test_one_fork_primitive():
    """Child processes are made in one place (cudafix/forks.py, which imports nothing of cudafix);
    take_snapshot stays a short list of steps (issue 37: it had grown to 155 lines)."""
    forking = [mod for mod, path in MODULES.items() if re.search(r"\bos\.fork\(", path.read_text(encoding="utf-8"))]
    assert forking == ["cudafix.forks"], forking
    assert not _imports(MODULES["cudafix.forks"], "cudafix.forks")
    tree = ast.parse(MODULES["cudafix.probes"].read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "take_snapshot")
    assert fn.end_lineno - fn.lineno + 1 <= 60, fn.end_lineno - fn.lineno + 1


def test_one_request_and_no_claim_or_hand_over():
    """A snapshot is one frozen request run as sections (cudafix/probes/sections.py): the children
    are forked for that request and the process that asked assembles their answers -- no per-job
    keys to claim, no answers handed to another child (issue 37).  The names of the old protocol
    are gone from the product, and the request cannot be changed once made."""
    for mod, path in MODULES.items():
        src = path.read_text(encoding="utf-8")
        for word in ("def claim(", "def hand_over(", "def snapshot_job(", ".claim(", ".hand_over("):
            assert word not in src, "%s: %s" % (mod, word)
    from cudafix.probes import sections

    req = sections.request(env={"A": "1"}, root="/")
    with pytest.raises(AttributeError):
        req.root = "/elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        req.env["A"] = "2"  # type: ignore[index]
    assert list(sections.ORDER) == sorted(sections.FIELDS, key=list(sections.ORDER).index) == list(sections.STEPS)


def test_the_startup_module_is_stdlib_only():
    path = REPO / "_cudafix_startup.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for n in names:
            top = n.split(".")[0]
            assert top in sys.stdlib_module_names or top == "cudafix", "_cudafix_startup imports %s" % n


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_module_size(mod):
    n = len(MODULES[mod].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, "%s has %d lines (> %d): split it by what it does" % (mod, n, MAX_LINES)


def test_developer_tools_are_outside_the_package():
    """tools/ (generators, the channel builder, the proofs) is not shipped: nothing in the package
    imports it, and the wheel's package list (setup.cfg: cudafix, cudafix.*) cannot pick it up."""
    assert not (PKG / "devtools").exists()
    bad = []
    for mod, path in MODULES.items():
        src = path.read_text(encoding="utf-8")
        if re.search(r"^\s*(from|import)\s+tools\b", src, re.M):
            bad.append(mod)
    assert not bad, "the package imports the developer tools: %s" % bad
    assert (REPO / "tools" / "__init__.py").exists()


# Rules decide and renderers write: neither reads the machine.  What they need from the
# filesystem is a probe's typed result in the Snapshot (docs/architecture.md).
FS_CALLS = {
    ("os", "stat"), ("os", "lstat"), ("os", "listdir"), ("os", "scandir"), ("os", "walk"), ("os", "open"),
    ("os", "access"), ("os", "readlink"), ("os", "getcwd"),
    ("path", "realpath"), ("path", "exists"), ("path", "lexists"), ("path", "isfile"), ("path", "isdir"),
    ("path", "islink"), ("path", "getsize"), ("path", "getmtime"), ("path", "samefile"), ("path", "abspath"),
    ("glob", "glob"), ("glob", "iglob"), ("shutil", "which"), ("subprocess", "run"), ("subprocess", "Popen"),
}
PATH_METHODS = {"exists", "is_file", "is_dir", "is_symlink", "resolve", "stat", "lstat", "read_text", "read_bytes",
                "iterdir", "glob", "rglob", "open"}


def filesystem_calls(path: Path) -> List[str]:
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            bad.append("%s:%d open()" % (path.name, node.lineno))
        elif isinstance(f, ast.Attribute):
            owner = f.value
            oname = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
            if (oname, f.attr) in FS_CALLS or (oname == "Path" or (isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "Path")) and f.attr in PATH_METHODS:
                bad.append("%s:%d %s.%s()" % (path.name, node.lineno, oname or "Path(...)", f.attr))
    return bad


@pytest.mark.parametrize("stage", ["rules", "render"])
def test_rules_and_renderers_never_touch_the_filesystem(stage):
    bad = [b for mod, path in MODULES.items() if _stage(mod) == stage for b in filesystem_calls(path)]
    assert not bad, "read it in a probe and pass it in the Snapshot: %s" % bad


def test_the_filesystem_check_sees_what_51656f0_did(tmp_path):
    """Not vacuous: on 51656f0's rules/libs.py and render/machine.py it finds their realpath calls."""
    import subprocess

    for rel in ("cudafix/rules/libs.py", "cudafix/render/machine.py"):
        src = subprocess.run(["git", "-C", str(REPO), "show", "51656f0:" + rel], capture_output=True, text=True, timeout=60)
        if src.returncode != 0:
            pytest.fail("commit 51656f0 is not in this checkout")
        f = tmp_path / rel.replace("/", "_")
        f.write_text(src.stdout)
        assert any("realpath" in b for b in filesystem_calls(f)), rel


# -- one root: probes read the machine's own paths only under the probe root --------------------
#
# Every system path a probe opens, stats or lists goes through the root (host.join_root /
# host.machine_path / a loaderfs.FileSystem's .machine, root from store.paths.probe_root), so a
# tree laid out in a temp dir is what the probes see (docs/wsl.md, "One root").  Checked from the
# source: a system-path literal (or a module constant holding one, or a loop variable over such
# constants, or an expression that starts with one) passed straight to a filesystem call, and a
# call that leaves a system-path default in place, are findings.

SYSTEM_PATH = re.compile(r"^/(etc|lib|lib32|lib64|usr|proc|sys|dev|opt|var|run|bin|sbin|home|root)(/|$)")
PROBE_FS_CALLS = {"exists", "lexists", "isdir", "isfile", "islink", "realpath", "abspath", "listdir", "scandir",
                  "stat", "lstat", "open", "access", "readlink", "glob", "iglob", "walk", "read_text", "open_regular",
                  "read_elf", "read_ld_cache", "stat_sig", "read_pe", "open_text", "file_id", "sig", "read_fwd_note",
                  "scan_fatbin_uncached", "dir_size", "getsize", "getmtime"}


def _system_consts(tree: ast.Module) -> Tuple[Set[str], Set[str]]:
    """Module-level names bound to a system path, and to a tuple/list holding one."""
    one, many = set(), set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and SYSTEM_PATH.match(v.value):
                one.add(node.targets[0].id)
            elif isinstance(v, (ast.Tuple, ast.List)) and any(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) and SYSTEM_PATH.match(e.value) for e in v.elts):
                many.add(node.targets[0].id)
    return one, many


# /proc/self is the running cudafix process (its threads: cudafix/probes/ahead.py), never the
# machine a probe describes: a laid-out tree has no process to stand in for it.
OWN_PROCESS = re.compile(r"^/proc/self(/|$)")


def _names_system_path(node: ast.AST, one: Set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(SYSTEM_PATH.match(node.value)) and not OWN_PROCESS.match(node.value)
    if isinstance(node, ast.Name):
        return node.id in one
    if isinstance(node, ast.BinOp):  # "/lib/" + triplet, "/sys/class/%s" % dev
        return _names_system_path(node.left, one)
    if isinstance(node, ast.JoinedStr) and node.values:
        return _names_system_path(node.values[0], one)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "join" and node.args:  # os.path.join("/usr", x)
        return _names_system_path(node.args[0], one)
    return False


def _tainted_loop_vars(scope: ast.AST, one: Set[str], many: Set[str]) -> Set[str]:
    """`for p in SYSTEM_DIRS` / `for p in ("/dev/dxg", ...)`: p names a system path in that function."""
    out = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            it = node.iter
            parts = [it.left, it.right] if isinstance(it, ast.BinOp) else [it]
            for p in parts:
                p = p.args[0] if isinstance(p, ast.Call) and getattr(p.func, "id", "") in ("list", "tuple") and p.args else p
                if (isinstance(p, ast.Name) and p.id in many) or (isinstance(p, (ast.Tuple, ast.List)) and any(
                        _names_system_path(e, one) for e in p.elts)):
                    out.add(node.target.id)
    return out


def _module_consts(tree: ast.Module, imported: Dict[str, Set[str]]) -> Tuple[Set[str], Set[str]]:
    one, many = _system_consts(tree)
    for node in tree.body:  # constants imported from another probe module
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cudafix.probes."):
            one |= {a.asname or a.name for a in node.names if a.name in imported.get(node.module or "", set())}
    return one, many


def system_defaults(tree: ast.Module, imported: Dict[str, Set[str]]) -> Dict[str, Tuple[int, str]]:
    """function name -> (index, name) of a parameter whose default is a system path."""
    one, _ = _module_consts(tree, imported)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            args = node.args.args
            for i, d in enumerate(node.args.defaults, len(args) - len(node.args.defaults)):
                if _names_system_path(d, one):
                    out[node.name] = (i, args[i].arg)
    return out


def unrooted_system_paths(path: Path, imported: Dict[str, Set[str]],
                          defaults: Optional[Dict[str, Tuple[int, str]]] = None) -> List[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    one, many = _module_consts(tree, imported)
    defaults = system_defaults(tree, imported) if defaults is None else defaults
    bad = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for scope in scopes:
        local = one | _tainted_loop_vars(scope, one, many)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in PROBE_FS_CALLS and node.args and _names_system_path(node.args[0], local):
                bad.append("%s:%d %s(%s)" % (path.name, node.lineno, name, ast.unparse(node.args[0])))
            d = defaults.get(name) if isinstance(f, ast.Name) else None  # a module function, not a method
            if d is not None and len(node.args) <= d[0] and d[1] not in {k.arg for k in node.keywords}:
                bad.append("%s:%d %s() reads its default %s" % (path.name, node.lineno, name, d[1]))
    return sorted(set(bad))


def _probe_constants() -> Dict[str, Set[str]]:
    out = {}
    for mod, path in MODULES.items():
        if _stage(mod) == "probes":
            out[mod] = _system_consts(ast.parse(path.read_text(encoding="utf-8")))[0]
    return out


def test_probes_read_system_paths_under_the_root():
    imported = _probe_constants()
    probe_files = [path for mod, path in MODULES.items() if _stage(mod) == "probes"]
    defaults: Dict[str, Tuple[int, str]] = {}
    for path in probe_files:
        defaults.update(system_defaults(ast.parse(path.read_text(encoding="utf-8")), imported))
    assert "read_ld_cache" in defaults  # ldcache.read_ld_cache(path=LD_SO_CACHE): callers must pass the tree's
    bad = [b for path in probe_files for b in unrooted_system_paths(path, imported, defaults)]
    assert not bad, "read it under the probe root (host.join_root / host.machine_path / fs.machine): %s" % bad


def test_own_process_paths_are_not_the_machines():
    def flagged(path):
        return _names_system_path(ast.Constant(path), set())

    assert not flagged("/proc/self/task") and not flagged("/proc/self")
    assert flagged("/proc/driver/nvidia/version") and flagged("/proc/selfish") and flagged("/proc/1/task")


def test_the_root_check_sees_what_a606e04_did(tmp_path):
    """Not vacuous: on a606e04's probes it finds the loader simulation's unrooted reads."""
    import subprocess

    found = {}
    for rel in ("cudafix/probes/libraries.py", "cudafix/probes/loadersim.py", "cudafix/probes/elf.py"):
        src = subprocess.run(["git", "-C", str(REPO), "show", "a606e04:" + rel], capture_output=True, text=True, timeout=60)
        if src.returncode != 0:
            pytest.fail("commit a606e04 is not in this checkout")
        f = tmp_path / rel.replace("/", "_")
        f.write_text(src.stdout)
        found[rel] = unrooted_system_paths(f, {"cudafix.probes.ldcache": {"LD_SO_CACHE"}})
    assert any("/usr/lib/wsl/lib" in b for b in found["cudafix/probes/libraries.py"]), found
    assert any("'/lib/' + triplet" in b for b in found["cudafix/probes/loadersim.py"]), found
    assert any("LD_SO_CACHE" in b for b in found["cudafix/probes/loadersim.py"]), found
    assert any("'/etc/debian_version'" in b for b in found["cudafix/probes/elf.py"]), found


# -- issue 36: one trusted loader, one trusted runner ------------------------------------------------

TRUSTED_MODULES = {"cudafix/store/trustload.py", "cudafix/store/runner.py"}
_LOAD_CALLS = {"CDLL", "PyDLL", "LoadLibrary", "dlopen"}
_OS_EXEC = ("system", "popen", "exec", "spawn", "posix_spawn")


def _exec_or_load_sites(tree: ast.AST, where: str) -> List[str]:
    """Every place in ``tree`` that loads a shared object or runs a program other than through
    the trusted modules: a CDLL/dlopen/LoadLibrary call, any use of subprocess, os.system /
    popen / exec* / spawn* / posix_spawn*; and, recursively, the same in a string constant that is
    Python code (a `python -c` child's source)."""
    out: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _LOAD_CALLS:
                out.append("%s:%d: %s(...)" % (where, node.lineno, name))
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "os" \
                    and f.attr.startswith(_OS_EXEC):
                out.append("%s:%d: os.%s(...)" % (where, node.lineno, f.attr))
        elif isinstance(node, ast.Import):
            out += ["%s:%d: import %s" % (where, node.lineno, a.name) for a in node.names
                    if a.name.split(".")[0] in ("subprocess", "pty")]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in ("subprocess", "pty") or \
                    (node.module == "ctypes.util" and any(a.name == "find_library" for a in node.names)):
                out.append("%s:%d: from %s import ..." % (where, node.lineno, node.module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            try:
                sub = ast.parse(node.value)
            except (SyntaxError, ValueError):
                continue
            out += _exec_or_load_sites(sub, "%s:%d (code in a string)" % (where, node.lineno))
    return out


def test_one_trusted_loader_and_one_trusted_runner():
    """Issue 36: cudafix loads a shared object only through store/trustload.py and runs a program
    only through store/runner.py -- any other CDLL / dlopen / subprocess / os.exec* call (also in
    a child's `-c` source) fails here."""
    bad = []
    for path in sorted(list(PKG.rglob("*.py")) + [REPO / "_cudafix_startup.py"]):
        rel = path.relative_to(REPO).as_posix()
        if rel in TRUSTED_MODULES:
            continue
        bad += _exec_or_load_sites(ast.parse(path.read_text(encoding="utf-8")), rel)
    assert bad == [], "load or run through cudafix.store.trustload / cudafix.store.runner: %s" % bad


def test_the_loader_and_runner_check_sees_what_89c72a4_did(tmp_path):
    """Not vacuous: on 89c72a4 it finds warm's child CDLL (in its `-c` source), the hook's preload,
    the driver probe, the first-run child's --load, and nvcc's subprocess."""
    import subprocess

    found = []
    for rel in ("cudafix/warm/runtime.py", "cudafix/hook/runtime.py", "cudafix/probes/driver.py",
                "cudafix/verify/firstrun_child.py", "cudafix/probes/toolkits.py"):
        src = subprocess.run(["git", "-C", str(REPO), "show", "89c72a4:" + rel], capture_output=True, text=True, timeout=60)
        if src.returncode != 0:
            pytest.fail("commit 89c72a4 is not in this checkout")
        found.append((rel, _exec_or_load_sites(ast.parse(src.stdout), rel)))
    assert all(sites for _, sites in found), found
    assert any("code in a string" in s for s in dict(found)["cudafix/warm/runtime.py"]), found
