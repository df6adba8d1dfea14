"""The conda route: recipe/recipe.yaml builds a noarch `.conda` offline with py-rattler-build,
`python -m tools.channel` indexes it into a local channel with py-rattler, and the
artifact holds what `conda install` needs.

The artifact is checked independently of rattler: a `.conda` is a zip holding
info-*.tar.zst and pkg-*.tar.zst, read here with zipfile + zstandard + tarfile.
(rattler-build itself also runs the recipe's `package_contents` test while packaging.)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

# requirements-dev.txt: py-rattler-build, py-rattler, zstandard (a missing one fails, never skips)
import rattler
import rattler_build
import zstandard

from tests.conftest import REPO
from tests.test_packaging_wheel import (
    SHELL_FILES,
    STARTUP_FILES,
    shipped_source_files,
    source_version,
)

RECIPE = REPO / "recipe" / "recipe.yaml"  # conda-forge's
LOCAL_RECIPE = REPO / "recipe" / "local" / "recipe.yaml"  # the offline local build
# conda-forge's python_min comes from its global pinning; any value renders the recipe here
CF_VARIANT = {"python_min": ["3.10"]}


def pip_run_depends() -> list:
    """The conda run dependencies the pip metadata implies (setup.cfg: python_requires and
    install_requires, "name>=v" written conda's way, "name >=v"): the recipes must say the same."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(str(REPO / "setup.cfg"))
    reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    return ["python " + cfg["options"]["python_requires"]] + [re.sub(r"^([A-Za-z0-9_.-]+)\s*", r"\1 ", r) for r in reqs]


RUN_DEPENDS = pip_run_depends()


def read_conda(path: pathlib.Path) -> dict:
    """{'info': {name: bytes}, 'pkg': {name: bytes}, 'zip': [members]} of a .conda file."""
    out: dict = {"info": {}, "pkg": {}}
    with zipfile.ZipFile(str(path)) as z:
        out["zip"] = sorted(z.namelist())
        out["metadata"] = json.loads(z.read("metadata.json"))
        for member in z.namelist():
            if not member.endswith(".tar.zst"):
                continue
            kind = member.split("-", 1)[0]
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(z.read(member))
            with tarfile.open(fileobj=io.BytesIO(raw)) as t:
                for m in t.getmembers():
                    if m.isfile():
                        out[kind][m.name] = t.extractfile(m).read()
    return out


@pytest.fixture(scope="module")
def build_python(tmp_path_factory) -> str:
    """A Python with pip, setuptools and wheel for the recipe's offline form (a fresh venv, so the
    test does not depend on what the machine's Python happens to hold)."""
    venv = tmp_path_factory.mktemp("buildpy") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "setuptools>=61", "wheel"], check=True,
                   capture_output=True, timeout=600)
    return str(py)


@pytest.fixture(scope="module")
def channel(tmp_path_factory, build_python) -> dict:
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=str(REPO),
                            capture_output=True, text=True, timeout=60).stdout
    pkg_sources = [p for p in shipped_source_files() if p.startswith("cudafix/")]
    out = tmp_path_factory.mktemp("channel") / "channel"
    proc = subprocess.run([sys.executable, "-m", "tools.channel", str(out), "--python", build_python],
                          cwd=str(REPO), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=str(REPO),
                           capture_output=True, text=True, timeout=60).stdout
    pkgs = sorted((out / "noarch").glob("*.conda"))
    assert len(pkgs) == 1, pkgs
    return {"dir": out, "package": pkgs[0], "stdout": proc.stdout, "conda": read_conda(pkgs[0]),
            "pkg_sources": pkg_sources, "git_before": before, "git_after": after}


# -- the recipe ---------------------------------------------------------------------------------


def test_recipe_version_is_the_package_version():
    for recipe in (RECIPE, LOCAL_RECIPE):
        assert rattler_build.Stage0Recipe.from_file(str(recipe)).context["version"] == source_version(), recipe


def _render(recipe, variants=None):
    config = rattler_build.VariantConfig(variants) if variants else None
    rendered = rattler_build.Stage0Recipe.from_file(str(recipe)).render(config)
    assert len(rendered) == 1
    return rendered[0].recipe.to_dict()


INSTALL_STEPS = [  # after pip: what both recipes do to the prefix
    "rm -f $PREFIX/site-packages/cudafix-*.dist-info/direct_url.json $PREFIX/lib/python*/site-packages/cudafix-*.dist-info/direct_url.json",
    "sed -i '/^cudafix-[^/]*\\.dist-info\\/direct_url\\.json,/d' $PREFIX/site-packages/cudafix-*.dist-info/RECORD $PREFIX/lib/python*/site-packages/cudafix-*.dist-info/RECORD 2>/dev/null || true",
    "mkdir -p $PREFIX/bin",
    "install -m 0755 recipe/pre-unlink.sh $PREFIX/bin/.cudafix-pre-unlink.sh",
    "install -m 0755 recipe/post-link.sh $PREFIX/bin/.cudafix-post-link.sh",
]


def test_recipe_conda_forge_form():
    r = _render(RECIPE, CF_VARIANT)
    assert r["schema_version"] == 1
    assert r["package"] == {"name": "cudafix", "version": source_version()}
    assert r["build"]["noarch"] == "python"
    assert r["build"]["script"] == ["${{ PYTHON }} -m pip install . -vv --no-deps --no-build-isolation"] + INSTALL_STEPS
    assert r["build"]["python"]["entry_points"] == ["cudafix = cudafix.cli:run"]
    assert r["requirements"]["host"] == ["python 3.10.*", "pip", "setuptools >=61", "wheel"]
    assert r["requirements"]["run"] == ["python >=3.10"] + RUN_DEPENDS[1:]
    kinds = [next(iter(t)) for t in r["tests"]]
    assert kinds == ["python", "script", "package_contents"]
    assert r["tests"][0]["python"]["python_version"] == ["3.10.*", "*"]
    assert "cudafix --version" in r["tests"][1]["script"]
    assert r["about"]["license"] == "BSD-3-Clause"
    assert "python_min" not in r["context"]  # conda-forge's global pinning decides


def test_local_recipe_packages_what_the_conda_forge_recipe_does(monkeypatch):
    monkeypatch.setenv("CUDAFIX_OFFLINE_PYTHON", "/opt/py/bin/python3")
    cf = _render(RECIPE, CF_VARIANT)
    local = _render(LOCAL_RECIPE)
    assert local["requirements"].get("host", []) == []
    assert local["context"]["offline_python"] == "/opt/py/bin/python3"
    # the same pip command, run by the named Python into the build prefix (the script's own
    # ${{ }} are expanded by rattler-build when the script runs), then the same steps
    assert local["build"]["script"] == [
        '${{ offline_python }} -m pip install . -vv --no-deps --no-build-isolation --no-index --prefix "$PREFIX"'
    ] + INSTALL_STEPS
    assert local["source"] == [{"path": "../.."}]  # use_gitignore: true is the default, not rendered
    for key in ("package", "about"):
        assert local[key] == cf[key], key
    assert local["requirements"]["run"] == RUN_DEPENDS  # python >=3.8 here, conda-forge's python_min there
    assert local["build"]["noarch"] == cf["build"]["noarch"]
    assert local["build"]["python"] == cf["build"]["python"]


# -- the artifact -------------------------------------------------------------------------------


def _build_outputs(porcelain: str) -> set:
    """Ignored paths git shows (build/, output/, *.egg-info/ ...), bytecode caches aside."""
    return {ln for ln in porcelain.splitlines() if ln.startswith("!!") and "__pycache__" not in ln}


def test_build_leaves_the_checkout_untouched(channel):
    assert _build_outputs(channel["git_after"]) == _build_outputs(channel["git_before"])


def test_conda_file_layout(channel):
    c = channel["conda"]
    v = source_version()
    stem = channel["package"].name[: -len(".conda")]
    assert stem.startswith("cudafix-%s-py" % v)
    assert c["zip"] == sorted(["metadata.json", "info-%s.tar.zst" % stem, "pkg-%s.tar.zst" % stem])
    assert c["metadata"]["conda_pkg_format_version"] == 2


def test_index_json(channel):
    index = json.loads(channel["conda"]["info"]["info/index.json"])
    assert index["name"] == "cudafix"
    assert index["version"] == source_version()
    assert index["noarch"] == "python"
    assert index["subdir"] == "noarch"
    assert index["depends"] == RUN_DEPENDS
    assert not any("torch" in d for d in index["depends"])
    assert index["license"] == "BSD-3-Clause"


def test_link_json_declares_the_entry_point(channel):
    link = json.loads(channel["conda"]["info"]["info/link.json"])
    assert link["noarch"]["type"] == "python"
    # conda writes bin/cudafix from this at install time, for the env's own python
    assert link["noarch"]["entry_points"] == ["cudafix = cudafix.cli:run"]


def test_paths_json_lists_exactly_the_payload_with_hashes(channel):
    c = channel["conda"]
    paths = json.loads(c["info"]["info/paths.json"])["paths"]
    listed = {p["_path"]: p for p in paths}
    assert set(listed) == set(c["pkg"])
    for name, data in c["pkg"].items():
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert listed[name]["size_in_bytes"] == len(data), name


def test_payload_holds_every_shipped_file(channel):
    pkg = channel["conda"]["pkg"]
    for f in STARTUP_FILES:  # site-packages root (conda relocates site-packages/ for noarch python)
        assert pkg["site-packages/" + f] == (REPO / f).read_bytes(), f
    for f in SHELL_FILES:
        assert pkg["etc/conda/" + f] == (REPO / f).read_bytes(), f
    for rel in channel["pkg_sources"]:
        assert "site-packages/" + rel in pkg, rel
    dist_info = "site-packages/cudafix-%s.dist-info/" % source_version()
    entry_points = pkg[dist_info + "entry_points.txt"].decode()
    assert "[conda]" in entry_points and "cudafix = cudafix.plugins.conda" in entry_points
    # nothing but site-packages and the activation scripts; no compiled bytecode in noarch
    # conda runs bin/.NAME-pre-unlink.sh / -post-link.sh (conda/core/link.py run_script); a
    # noarch: python package carries bin/ as python-scripts/
    assert pkg["python-scripts/.cudafix-pre-unlink.sh"] == (REPO / "recipe" / "pre-unlink.sh").read_bytes()
    assert pkg["python-scripts/.cudafix-post-link.sh"] == (REPO / "recipe" / "post-link.sh").read_bytes()
    scripts = {"python-scripts/.cudafix-pre-unlink.sh", "python-scripts/.cudafix-post-link.sh"}
    assert all(n in scripts or n.startswith(("site-packages/", "etc/conda/activate.d/", "etc/conda/deactivate.d/"))
               for n in pkg), sorted(pkg)
    assert not any(n.endswith((".pyc", ".pyo")) or "__pycache__" in n for n in pkg)


def test_no_dead_build_path_is_recorded(channel):
    """Issue 16: after a conda install, `pip freeze` showed cudafix @ file:///tmp/cudafix-rattler-build-.../work
    (pip's direct_url.json of the build directory)."""
    pkg = channel["conda"]["pkg"]
    dist_info = "site-packages/cudafix-%s.dist-info/" % source_version()
    assert dist_info + "direct_url.json" not in pkg
    assert b"direct_url.json" not in pkg[dist_info + "RECORD"]
    assert not any(b"file:///" in data for name, data in pkg.items() if name.startswith(dist_info))


def test_info_carries_license_and_recipe(channel):
    info = channel["conda"]["info"]
    assert info["info/licenses/LICENSE"] == (REPO / "LICENSE").read_bytes()
    assert "info/recipe/recipe.yaml" in info


# -- the channel --------------------------------------------------------------------------------


def test_channel_repodata_lists_cudafix(channel):
    repodata = json.loads((channel["dir"] / "noarch" / "repodata.json").read_text())
    assert repodata["info"]["subdir"] == "noarch"
    entries = repodata["packages.conda"]
    assert list(entries) == [channel["package"].name]
    rec = entries[channel["package"].name]
    assert (rec["name"], rec["version"], rec["noarch"]) == ("cudafix", source_version(), "python")
    assert rec["depends"] == RUN_DEPENDS
    assert rec["sha256"] == hashlib.sha256(channel["package"].read_bytes()).hexdigest()
    assert sorted(os.listdir(str(channel["dir"]))) == ["noarch"]
    assert "conda install -c %s -c conda-forge cudafix" % channel["dir"] in channel["stdout"]


def test_channel_is_readable_by_a_conda_client(channel):
    """py-rattler (the library pixi and rattler-build install with) loads the channel's records."""
    ch = rattler.Channel(str(channel["dir"]))
    repo = rattler.SparseRepoData(ch, "noarch", str(channel["dir"] / "noarch" / "repodata.json"))
    records = repo.load_records(rattler.PackageName("cudafix"))
    assert [(str(r.name.normalized), str(r.version)) for r in records] == [("cudafix", source_version())]
    assert [str(d) for d in records[0].depends] == RUN_DEPENDS


def test_channel_tool_refuses_a_python_that_cannot_build(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    proc = subprocess.run([sys.executable, "-m", "tools.channel", str(tmp_path / "ch"),
                           "--python", str(venv / "bin" / "python")],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "cannot build cudafix" in proc.stderr and "no pip" in proc.stderr
    assert not (tmp_path / "ch").exists()
