"""The pip route: `python -m build` gives an sdist and a wheel; the wheel installs a working
cudafix with its startup hook and activation scripts; `pip uninstall` leaves nothing behind;
installing cudafix never touches the env's torch.

Everything is built and installed under tmp dirs from a copy of the checkout (the files git
would ship: tracked plus untracked-not-ignored), so the repo is left as it was.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.conftest import REPO, venv_site_packages

STARTUP_FILES = ("_cudafix_startup.py", "cudafix.pth", "cudafix.start")
SHELL_FILES = tuple(
    "%s/cudafix.%s" % (d, ext) for d in ("activate.d", "deactivate.d") for ext in ("sh", "fish", "csh")
)
RUNTIME_DEPS = {"click", "packaging", "nvidia-ml-py"}


def source_version() -> str:
    ns: dict = {}
    exec((REPO / "cudafix" / "__init__.py").read_text(), ns)  # no import: the checkout's own text
    return ns["__version__"]


def shipped_source_files() -> list:
    """What a release is made from: git's tracked and untracked-but-not-ignored files."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=str(REPO), check=True, capture_output=True, timeout=60,
    ).stdout.decode("utf-8", "surrogateescape")
    return sorted({p for p in out.split("\0") if p and (REPO / p).is_file()})


def copy_checkout(dest: pathlib.Path) -> pathlib.Path:
    for rel in shipped_source_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(str(REPO / rel), str(target))
    return dest


def run(cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    proc = subprocess.run([str(c) for c in cmd], **kw)
    assert proc.returncode == 0, "%s failed (%d):\n%s\n%s" % (cmd, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:])
    return proc


def isolated_env(home: pathlib.Path) -> dict:
    """No user site, caches and config under a tmp HOME (the startup hook writes caches there)."""
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONSTARTUP"):
        env.pop(k, None)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONNOUSERSITE="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict:
    """sdist + wheel built by `python -m build` (the wheel is built from the sdist)."""
    root = tmp_path_factory.mktemp("build")
    src = copy_checkout(root / "src")
    out = root / "dist"
    # PYTHONDONTWRITEBYTECODE (set on this project's machines) makes setuptools say "byte-compiling
    # is disabled": a property of the caller's environment, not of cudafix's build
    proc = run([sys.executable, "-m", "build", "--outdir", out, src], cwd=str(root),
               env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    sdists = sorted(out.glob("*.tar.gz"))
    wheels = sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return {"sdist": sdists[0], "wheel": wheels[0], "src": src, "log": proc.stdout + proc.stderr}


def test_build_prints_no_warning(dist):
    """Issue 16: setuptools' license-classifier warning (x3) and MANIFEST.in's 'no previously-included
    files' warnings in every build of a fresh checkout."""
    warnings = [ln for ln in dist["log"].splitlines()
                if re.search(r"warn", ln, re.I) and not ln.startswith(("copying ", "adding "))]
    assert warnings == []


def wheel_metadata(wheel: pathlib.Path):
    with zipfile.ZipFile(str(wheel)) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(z.read(name).decode("utf-8"))


def wheel_text(wheel: pathlib.Path, suffix: str) -> str:
    with zipfile.ZipFile(str(wheel)) as z:
        name = next(n for n in z.namelist() if n.endswith(suffix))
        return z.read(name).decode("utf-8")


# -- the artifacts --------------------------------------------------------------------------


def test_artifact_names_carry_the_one_version(dist):
    v = source_version()
    assert dist["sdist"].name == "cudafix-%s.tar.gz" % v
    assert dist["wheel"].name == "cudafix-%s-py3-none-any.whl" % v  # pure Python, any platform


def test_wheel_metadata_is_complete(dist):
    md = wheel_metadata(dist["wheel"])
    assert md["Name"] == "cudafix"
    assert md["Version"] == source_version()
    assert md["Summary"]
    assert md["Requires-Python"] == ">=3.8"
    assert md.get("License") == "BSD-3-Clause" or md.get("License-Expression") == "BSD-3-Clause"
    assert md.get_all("License-File") == ["LICENSE"]
    # the long description is the README, rendered as markdown
    assert md["Description-Content-Type"] == "text/markdown"
    assert md.get_payload().strip() == (dist["src"] / "README.md").read_text(encoding="utf-8").strip()
    # no placeholder URLs: either none, or real ones
    for url in md.get_all("Project-URL") or []:
        assert "example" not in url.lower() and "todo" not in url.lower(), url


def test_classifiers_are_valid_trove_classifiers(dist):
    import trove_classifiers as trove  # requirements-dev.txt

    classifiers = wheel_metadata(dist["wheel"]).get_all("Classifier") or []
    assert classifiers, "no classifiers"
    bad = [c for c in classifiers if c not in trove.classifiers]
    assert not bad, bad
    assert "Programming Language :: Python :: 3.8" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers


def test_runtime_dependencies_are_exactly_the_light_three(dist):
    reqs = wheel_metadata(dist["wheel"]).get_all("Requires-Dist") or []
    names = set()
    for r in reqs:
        name = r.split(";")[0].split("[")[0]
        for sep in "<>=!~ (":
            name = name.split(sep)[0]
        names.add(name.strip().lower())
    assert names == RUNTIME_DEPS, reqs
    assert not any("torch" in r.lower() for r in reqs)


def test_entry_points(dist):
    text = wheel_text(dist["wheel"], ".dist-info/entry_points.txt")
    sections: dict = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line.strip("[]")
        elif "=" in line and current:
            k, v = (s.strip() for s in line.split("=", 1))
            sections.setdefault(current, {})[k] = v
    assert sections["console_scripts"] == {"cudafix": "cudafix.cli:run"}
    # conda loads plugins from the entry-point group "conda"
    assert sections["conda"] == {"cudafix": "cudafix.plugins.conda"}


def test_wheel_carries_every_shipped_file_unchanged(dist):
    v = source_version()
    with zipfile.ZipFile(str(dist["wheel"])) as z:
        names = set(z.namelist())
        # startup hook files at the root of site-packages (purelib root of the wheel)
        src = dist["src"]  # the copy the build saw (the checkout may change meanwhile)
        for f in STARTUP_FILES:
            assert f in names, f
            assert z.read(f) == (src / f).read_bytes(), f
        # activation scripts as data files relative to the install prefix
        for f in SHELL_FILES:
            member = "cudafix-%s.data/data/etc/conda/%s" % (v, f)
            assert member in names, member
            assert z.read(member) == (src / f).read_bytes(), f
        # the whole package, data files included (not only *.py)
        pkg = [str(p.relative_to(src)) for p in (src / "cudafix").rglob("*") if p.is_file()]
        missing = [p for p in pkg if p not in names]
        assert not missing, missing
        assert "cudafix-%s.dist-info/licenses/LICENSE" % v in names or "cudafix-%s.dist-info/LICENSE" % v in names
        # nothing else at the top level: no tests/, bench/, recipe/ in site-packages
        top = {n.split("/")[0] for n in names}
        assert top == {"cudafix", "cudafix-%s.dist-info" % v, "cudafix-%s.data" % v} | set(STARTUP_FILES), top


def test_sdist_carries_what_downstream_builds_need(dist):
    v = source_version()
    with tarfile.open(str(dist["sdist"])) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    need = {"LICENSE", "README.md", "setup.cfg", "setup.py", "pyproject.toml", "MANIFEST.in",
            "recipe/recipe.yaml", "cudafix/__init__.py", "cudafix/plugins/conda.py",
            # the conda-forge recipe builds from the sdist and installs these two from it
            "recipe/pre-unlink.sh", "recipe/post-link.sh"}
    need |= set(STARTUP_FILES) | set(SHELL_FILES)
    assert not need - names, sorted(need - names)
    assert any(n.startswith("tests/test_") for n in names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert "PKG-INFO" in names and v


# -- installing it ----------------------------------------------------------------------------


def tree(prefix: pathlib.Path) -> set:
    """Every file, link and directory under prefix (relative), to compare before/after."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(str(prefix)):
        rel = os.path.relpath(dirpath, str(prefix))
        for d in dirnames:
            out.add(os.path.normpath(os.path.join(rel, d)) + "/")
        for f in filenames:
            out.add(os.path.normpath(os.path.join(rel, f)))
    return out


@pytest.fixture(scope="module")
def venv(tmp_path_factory, dist) -> dict:
    """A fresh venv holding cudafix's dependencies (not cudafix), and its file list then."""
    root = tmp_path_factory.mktemp("venv")
    home = root / "home"
    home.mkdir()
    env = isolated_env(home)
    prefix = root / "env"
    run([sys.executable, "-m", "venv", prefix], env=env)
    py = prefix / "bin" / "python"
    run([py, "-m", "pip", "install", "-q", *sorted(RUNTIME_DEPS)], env=env)
    run([py, "-c", "import click, packaging, pynvml"], env=env)  # compiles what importing compiles
    return {"prefix": prefix, "python": py, "env": env, "before": tree(prefix)}


def test_wheel_installs_working_cli_hook_and_activation_files_and_uninstalls_clean(venv, dist):
    prefix, py, env = venv["prefix"], venv["python"], venv["env"]
    installed = run([py, "-m", "pip", "install", "--no-index", "--no-deps", dist["wheel"]], env=env)
    assert "Successfully installed cudafix-%s" % source_version() in installed.stdout

    # the console script works
    out = run([prefix / "bin" / "cudafix", "--version"], env=env)
    assert source_version() in out.stdout
    assert out.stderr == ""

    # the startup hook files sit in the root of site-packages, byte-identical to the checkout
    site = venv_site_packages(py)
    for f in STARTUP_FILES:
        assert (site / f).read_bytes() == (dist["src"] / f).read_bytes(), f
    # the activation scripts land where `conda activate` sources them: $PREFIX/etc/conda/...
    for f in SHELL_FILES:
        assert (prefix / "etc" / "conda" / f).read_bytes() == (dist["src"] / f).read_bytes(), f

    # a plain interpreter start (the .pth runs) and the package import both work in the venv
    run([py, "-c", "pass"], env=env)
    run([py, "-c", "import cudafix, cudafix.plugins.conda, _cudafix_startup"], env=env)

    during = tree(prefix)
    assert during > venv["before"]

    run([py, "-m", "pip", "uninstall", "-y", "cudafix"], env=env)
    after = tree(prefix)
    left = sorted(after - venv["before"])
    # pip removes a directory only when it is the direct parent of recorded files and holds
    # nothing else (pip/_internal/req/req_uninstall.py: compress_for_rename), so the empty
    # ancestors that data_files created (etc/, etc/conda/) stay; they hold no file.  In a conda
    # env etc/conda/ usually exists already.  Anything else is a file we left behind.
    assert not [p for p in left if p not in ("etc/", "etc/conda/")], "pip uninstall left behind: %s" % left
    for d in left:
        files = [f for _dp, _dn, fs in os.walk(str(prefix / d.rstrip("/"))) for f in fs]
        assert not files, "%s holds %s" % (d, files)
    gone = sorted(venv["before"] - after)
    assert not gone, "pip uninstall removed files it did not install: %s" % gone


def test_dependency_closure_never_contains_torch(venv, dist):
    """Resolve cudafix's full dependency closure against the real indexes in an empty venv."""
    root = venv["prefix"].parent / "empty"
    run([sys.executable, "-m", "venv", "--without-pip", root], env=venv["env"])
    report = root / "report.json"
    run([venv["python"], "-m", "pip", "--python", root / "bin" / "python", "install", "--dry-run",
         "--ignore-installed", "--report", report, dist["wheel"]], env=venv["env"])
    names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert names == {"cudafix"} | RUNTIME_DEPS, names


def test_installing_cudafix_does_not_touch_the_envs_torch(tmp_path, dist, torch_cpu_python):
    """A venv that sees the real torch 2.13.0 (through a .pth to the torch-cpu test venv):
    installing the cudafix wheel installs cudafix alone and leaves torch exactly as it was."""
    home = tmp_path / "home"
    home.mkdir()
    env = isolated_env(home)
    prefix = tmp_path / "env"
    run([sys.executable, "-m", "venv", prefix], env=env)
    py = prefix / "bin" / "python"
    torch_site = venv_site_packages(torch_cpu_python)
    site = venv_site_packages(py)
    (site / "zz-torch-cpu.pth").write_text(str(torch_site) + "\n")

    def torch_state() -> dict:
        out = run([py, "-c", (
            "import importlib.metadata as m, hashlib, json, os\n"
            "d = m.distribution('torch')\n"
            "rec = d.read_text('RECORD') or ''\n"
            "vp = os.path.join(str(d.locate_file('torch')), 'version.py')\n"
            "st = os.stat(vp)\n"
            "print(json.dumps({'version': d.version, 'where': str(d.locate_file('')),\n"
            "  'record': hashlib.sha256(rec.encode()).hexdigest(), 'version_py': [st.st_mtime_ns, st.st_size]}))\n"
        )], env=env).stdout
        return json.loads(out)

    before = torch_state()
    assert before["version"].startswith("2.13.0")
    assert os.path.realpath(before["where"]) == os.path.realpath(str(torch_site))

    report = tmp_path / "report.json"
    run([py, "-m", "pip", "install", "--no-index", "--report", report, dist["wheel"]], env=env)
    installed = [i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]]
    assert installed == ["cudafix"], installed
    assert torch_state() == before
    freeze = run([py, "-m", "pip", "list", "--format=json"], env=env).stdout
    versions = {d["name"].lower(): d["version"] for d in json.loads(freeze)}
    assert versions["torch"] == before["version"] and versions["cudafix"] == source_version()


def _hooks(py, env, *args):
    return subprocess.run([str(py), "-m", "cudafix", "hooks", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd="/")


def test_hooks_install_after_uninstall_in_a_pip_install(venv, dist):
    """Issue 35: in a pip install the hook files' source is site-packages itself, so `hooks
    install` after `hooks uninstall` could not read what uninstall removed, and `hooks status`
    printed that error instead of what is missing."""
    prefix, py, env = venv["prefix"], venv["python"], venv["env"]
    run([py, "-m", "pip", "install", "--no-index", "--no-deps", dist["wheel"]], env=env)
    try:
        site = venv_site_packages(py)
        assert _hooks(py, env, "uninstall").returncode == 0
        assert not (site / "cudafix.pth").exists()
        st = _hooks(py, env, "status")
        assert st.returncode == 1
        assert "cannot read" not in st.stdout + st.stderr
        for f in STARTUP_FILES:
            if f.startswith("cudafix."):
                assert "missing    %s" % (site / f) in st.stdout, st.stdout + st.stderr
        again = _hooks(py, env, "install")
        assert again.returncode == 0, again.stdout + again.stderr
        for f in STARTUP_FILES:
            assert (site / f).read_bytes() == (dist["src"] / f).read_bytes(), f
        for f in SHELL_FILES:
            assert (prefix / "etc" / "conda" / f).read_bytes() == (dist["src"] / f).read_bytes(), f
        assert _hooks(py, env, "status").returncode == 0
    finally:
        run([py, "-m", "pip", "uninstall", "-y", "cudafix"], env=env)
