"""Build cudafix's conda package from recipe/local/recipe.yaml and index a local conda channel.

    python -m tools.channel OUTDIR [--python PATH] [--recipe FILE]

so that, before cudafix is on conda-forge, an env can get it with

    conda install -c ./OUTDIR -c conda-forge cudafix

The build uses recipe/local/recipe.yaml, the offline local build (see its header): no host
requirements, so no conda channel is needed; a Python that has pip, setuptools>=61 and the
``wheel`` package (the one running this script by default) installs cudafix into the build prefix
with the same pip command as the conda-forge recipe (recipe/recipe.yaml).  py-rattler-build
builds the ``.conda``; py-rattler's
``index_fs`` writes ``noarch/repodata.json``.  Run from a source checkout (the recipe is not in
the wheel).  Needs: ``pip install py-rattler-build py-rattler``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional, Sequence

OFFLINE_ENV = "CUDAFIX_OFFLINE_PYTHON"  # the Python the local recipe's build runs


class ChannelError(Exception):
    """One line for the user; exit status 2."""


def checkout_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_recipe() -> str:
    return os.path.join(checkout_root(), "recipe", "local", "recipe.yaml")


def recipe_version(recipe: str) -> str:
    """The version the recipe's ``context`` declares (a literal: conda-forge's bot bumps it)."""
    from rattler_build import Stage0Recipe

    value = Stage0Recipe.from_file(recipe).context.get("version")
    if not isinstance(value, str) or not value:
        raise ChannelError("%s: context.version is not a literal string" % recipe)
    return value


def check_version(recipe: str) -> str:
    """cudafix/__init__.py is the one source of the version; the recipe must agree with it."""
    from cudafix import __version__

    declared = recipe_version(recipe)
    if declared != __version__:
        raise ChannelError(
            "%s says version %s but cudafix/__init__.py says %s: set context.version to %s"
            % (recipe, declared, __version__, __version__)
        )
    return declared


def check_build_python(python: str) -> None:
    """The local recipe runs ``PYTHON -m pip install . --no-build-isolation``: it needs
    pip, setuptools>=61 and a bdist_wheel (the ``wheel`` package, or setuptools>=70.1)."""
    # Read versions from metadata: importing (or find_spec-ing) pip next to setuptools trips
    # setuptools' distutils shim.
    probe = (
        "import sys\n"
        "from importlib.metadata import version, PackageNotFoundError\n"
        "def v(name):\n"
        "    try:\n"
        "        return version(name)\n"
        "    except PackageNotFoundError:\n"
        "        return None\n"
        "def num(s):\n"
        "    return tuple(int(x) for x in s.split('.')[:2] if x.isdigit())\n"
        "st = v('setuptools')\n"
        "if v('pip') is None: sys.exit('no pip')\n"
        "if st is None or num(st) < (61,): sys.exit('setuptools %s is too old (need >=61)' % st)\n"
        "if num(st) < (70, 1) and v('wheel') is None:\n"
        "    sys.exit('setuptools %s needs the wheel package' % st)\n"
    )
    try:
        proc = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise ChannelError("build python %s: %s" % (python, exc))
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
        raise ChannelError(
            "build python %s cannot build cudafix: %s (fix: %s -m pip install 'setuptools>=61' wheel)"
            % (python, why, python)
        )


def build_package(recipe: str, python: str, workdir: str) -> str:
    """Build the .conda (local recipe) under ``workdir``; return its path."""
    from rattler_build import Stage0Recipe, ToolConfiguration

    old = os.environ.get(OFFLINE_ENV)
    os.environ[OFFLINE_ENV] = python
    try:
        results = Stage0Recipe.from_file(recipe).run_build(
            # The recipe's `tests:` need python etc. from a conda channel; CI verifies the
            # artifact's content instead (tests/test_packaging_conda.py).
            tool_config=ToolConfiguration(test_strategy="skip"),
            output_dir=workdir,
            channels=[],
            no_build_id=True,
            package_format="conda",
        )
    finally:
        if old is None:
            os.environ.pop(OFFLINE_ENV, None)
        else:
            os.environ[OFFLINE_ENV] = old
    packages = [str(p) for r in results for p in r.packages]
    if len(packages) != 1 or not packages[0].endswith(".conda"):
        raise ChannelError("expected one .conda from %s, got %r" % (recipe, packages))
    return packages[0]


def index_channel(channel: str) -> str:
    """Write ``noarch/repodata.json`` for the channel; return its path."""
    from rattler.index import index_fs

    os.makedirs(os.path.join(channel, "noarch"), exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    try:  # index_fs leaves its (empty) scratch dir behind
        os.rmdir(os.path.join(channel, ".tmp"))
    except OSError:
        pass
    return os.path.join(channel, "noarch", "repodata.json")


def build_channel(outdir: str, python: Optional[str] = None, recipe: Optional[str] = None) -> str:
    """Build cudafix into ``outdir/noarch/`` and index it; return the package's path."""
    recipe = os.path.abspath(recipe or default_recipe())
    if not os.path.isfile(recipe):
        raise ChannelError("no recipe at %s (run this from a cudafix source checkout)" % recipe)
    python = python or sys.executable
    check_version(recipe)
    check_build_python(python)
    outdir = os.path.abspath(outdir)
    noarch = os.path.join(outdir, "noarch")
    os.makedirs(noarch, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cudafix-rattler-build-")
    try:
        built = build_package(recipe, python, work)
        dest = os.path.join(noarch, os.path.basename(built))
        shutil.copyfile(built, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    index_channel(outdir)
    return dest


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.channel",
        description="Build the cudafix .conda offline and index a local conda channel in OUTDIR.",
    )
    parser.add_argument("outdir", help="channel directory (created; gets noarch/ and repodata.json)")
    parser.add_argument("--python", help="Python that runs pip in the build (default: this one)")
    parser.add_argument("--recipe", help="recipe file (default: recipe/local/recipe.yaml of this checkout)")
    args = parser.parse_args(argv)
    try:
        pkg = build_channel(args.outdir, python=args.python, recipe=args.recipe)
    except ChannelError as exc:
        print("tools.channel: %s" % exc, file=sys.stderr)
        return 2
    except ImportError as exc:
        print("tools.channel: %s (pip install py-rattler-build py-rattler)" % exc, file=sys.stderr)
        return 2
    channel = os.path.abspath(args.outdir)
    lines: List[str] = [
        "built %s" % pkg,
        "indexed %s" % os.path.join(channel, "noarch", "repodata.json"),
        "install with:  conda install -c %s -c conda-forge cudafix" % channel,
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
