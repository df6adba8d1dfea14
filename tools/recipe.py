"""Make recipe/recipe.yaml the recipe of a release: the sdist's URL and sha256, the homepage, the
maintainers (the facts only a release has; conda-forge's linter requires them).

    python -m tools.recipe sdist [--outdir DIR]
        build the sdist of this checkout (python -m build --sdist) and print its path and sha256
    python -m tools.recipe release --url URL --homepage URL --maintainer HANDLE [...]
                                              [--sdist FILE] [--recipe FILE]
        write them into the recipe: source.url + source.sha256 (of FILE, or of a fresh sdist),
        about.homepage, extra.recipe-maintainers (GitHub handles)

URL is where the sdist will be downloaded from; it must end with the sdist's file name.  The
edit is textual (comments and order stay) and idempotent.  tests/test_recipe_lint.py lints the
result with conda-forge's rules.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from typing import List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipe", "recipe.yaml")


class RecipeError(Exception):
    """One line for the user; exit status 2."""


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_sdist(outdir: str, root: str = ROOT) -> str:
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", outdir, root],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stdout.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
        raise RecipeError("python -m build --sdist failed: %s" % tail)
    found = sorted(n for n in os.listdir(outdir) if n.endswith(".tar.gz"))
    if len(found) != 1:
        raise RecipeError("expected one sdist in %s, found %r" % (outdir, found))
    return os.path.join(outdir, found[0])


def _drop_block(lines: List[str], key: str) -> List[str]:
    """Remove a top-level ``key:`` block (its line and the indented lines under it)."""
    out, skipping = [], False
    for line in lines:
        if re.match(r"^%s:\s*$" % re.escape(key), line):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            if not line.strip():
                skipping = False  # the blank line that separated the block goes with it
            continue
        skipping = False
        out.append(line)
    return out


def _yaml_str(value: str) -> str:
    if re.match(r"^[A-Za-z0-9_.:/@%+~=-]+$", value) and not value[0] in "-@%":
        return value
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


def release_text(text: str, url: str, sha256: str, homepage: str, maintainers: Sequence[str]) -> str:
    """The recipe ``text`` with the release facts written in."""
    if not re.match(r"^[0-9a-f]{64}$", sha256):
        raise RecipeError("not a sha256: %r" % sha256)
    if not maintainers or any(not re.match(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$", m) for m in maintainers):
        raise RecipeError("--maintainer takes GitHub handles, got %r" % (list(maintainers),))
    for name, value in (("--url", url), ("--homepage", homepage)):
        if not re.match(r"^https://[^\s/]+/\S*$", value):
            raise RecipeError("%s %r: not an https URL" % (name, value))
    lines = text.splitlines()
    lines = _drop_block(_drop_block(lines, "source"), "extra")
    lines = [ln for ln in lines if not re.match(r"^  homepage:", ln)]
    out: List[str] = []
    for line in lines:
        if re.match(r"^build:\s*$", line):
            out += ["source:", "  url: %s" % _yaml_str(url), "  sha256: %s" % sha256, ""]
        out.append(line)
        if re.match(r"^about:\s*$", line):
            out.append("  homepage: %s" % _yaml_str(homepage))
    while out and not out[-1].strip():
        out.pop()
    out += ["", "extra:", "  recipe-maintainers:"] + ["    - %s" % m for m in maintainers]
    return "\n".join(out) + "\n"


def release(recipe: str, url: str, homepage: str, maintainers: Sequence[str], sdist: Optional[str] = None) -> str:
    from cudafix import __version__

    with open(recipe, encoding="utf-8") as fh:
        text = fh.read()
    tmp = None
    if sdist is None:
        tmp = tempfile.mkdtemp(prefix="cudafix-sdist-")
        sdist = build_sdist(tmp)
    name = os.path.basename(sdist)
    if name != "cudafix-%s.tar.gz" % __version__:
        raise RecipeError("%s is not the sdist of cudafix %s" % (name, __version__))
    if not url.endswith("/" + name):
        raise RecipeError("--url %r does not end with the sdist's name %s" % (url, name))
    digest = sha256_of(sdist)
    new = release_text(text, url, digest, homepage, maintainers)
    with open(recipe, "w", encoding="utf-8") as fh:
        fh.write(new)
    return digest


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.recipe", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sdist", help="build the sdist of this checkout; print its path and sha256")
    s.add_argument("--outdir", default=os.path.join(ROOT, "dist"))
    r = sub.add_parser("release", help="write url, sha256, homepage and maintainers into the recipe")
    r.add_argument("--url", required=True, help="where the sdist is published (ends with its file name)")
    r.add_argument("--homepage", required=True)
    r.add_argument("--maintainer", action="append", required=True, help="GitHub handle (repeatable)")
    r.add_argument("--sdist", help="the sdist to hash (default: build one from this checkout)")
    r.add_argument("--recipe", default=RECIPE)
    args = p.parse_args(argv)
    try:
        if args.cmd == "sdist":
            os.makedirs(args.outdir, exist_ok=True)
            path = build_sdist(args.outdir)
            print("%s\nsha256 %s" % (path, sha256_of(path)))
        else:
            digest = release(args.recipe, args.url, args.homepage, args.maintainer, args.sdist)
            print("wrote %s: url %s, sha256 %s" % (args.recipe, args.url, digest))
    except (RecipeError, OSError) as exc:
        print("tools.recipe: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
