"""recipe/recipe.yaml against conda-forge's linter rules (tests/conda_forge_lint.py, from
conda-forge/conda-smithy's source): once `python -m tools.recipe release` has written
the release facts, no lint and no hint; before, exactly the release facts are missing.  The
rules are shown to catch what issue 16 found in the old recipe.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import pytest

from tests.conda_forge_lint import lint, staged_recipes
from tests.conftest import REPO
from tests.test_packaging_wheel import source_version

RECIPE = REPO / "recipe" / "recipe.yaml"
# conda-forge's global python_min as conda-smithy's own tests use it (tests/test_lint_recipe.py,
# hint_redundant_python_min cases); the live linter fetches conda-forge-pinning's value.
CF_PYTHON_MIN = "3.10"
SDIST = "cudafix-%s.tar.gz" % source_version()
URL = "https://downloads.invalid/cudafix/" + SDIST  # a test value: where a release would publish it


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """recipe/recipe.yaml as a release writes it: the sdist built from this checkout."""
    tmp = tmp_path_factory.mktemp("release")
    recipe = tmp / "recipe" / "recipe.yaml"
    recipe.parent.mkdir()
    shutil.copy(str(RECIPE), str(recipe))
    proc = subprocess.run([sys.executable, "-m", "tools.recipe", "sdist", "--outdir", str(tmp / "dist")],
                          cwd=str(REPO), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    sdist = tmp / "dist" / SDIST
    args = ["release", "--recipe", str(recipe), "--url", URL, "--homepage", "https://project.invalid/cudafix",
            "--maintainer", "cudafix-maintainer", "--sdist", str(sdist)]
    proc = subprocess.run([sys.executable, "-m", "tools.recipe"] + args, cwd=str(REPO),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = recipe.read_text()
    proc = subprocess.run([sys.executable, "-m", "tools.recipe"] + args, cwd=str(REPO),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and recipe.read_text() == first  # idempotent
    return {"recipe": recipe, "sdist": sdist, "text": first}


def test_released_recipe_passes_conda_forges_lints_and_hints(released):
    lints, hints = lint(str(released["recipe"]), CF_PYTHON_MIN)
    assert lints == [] and hints == [], lints + hints
    assert staged_recipes(str(released["recipe"])) == []


def test_release_writes_the_sdists_hash_and_url(released):
    digest = hashlib.sha256(released["sdist"].read_bytes()).hexdigest()
    text = released["text"]
    assert "  url: %s\n  sha256: %s\n" % (URL, digest) in text
    assert "  homepage: https://project.invalid/cudafix\n" in text
    assert text.endswith("extra:\n  recipe-maintainers:\n    - cudafix-maintainer\n")
    # everything else is the committed recipe, unchanged
    added = {"source:", "  url: %s" % URL, "  sha256: %s" % digest, "  homepage: https://project.invalid/cudafix",
             "extra:", "  recipe-maintainers:", "    - cudafix-maintainer"}
    rest = [ln for ln in text.splitlines() if ln not in added]
    committed = RECIPE.read_text().splitlines()
    assert [ln for ln in rest if ln.strip()] == [ln for ln in committed if ln.strip()]


def test_committed_recipe_lacks_only_the_release_facts():
    lints, hints = lint(str(RECIPE), CF_PYTHON_MIN)
    assert lints == [
        "lint_about_contents: the about/homepage item is expected",
        "lint_recipe_maintainers: the recipe could do with some maintainers listed in extra/recipe-maintainers",
    ]
    assert hints == []
    assert staged_recipes(str(RECIPE)) == ["no source"]


def test_release_refuses_a_url_that_is_not_the_sdist(tmp_path, released):
    recipe = tmp_path / "recipe.yaml"
    shutil.copy(str(RECIPE), str(recipe))
    proc = subprocess.run([sys.executable, "-m", "tools.recipe", "release", "--recipe", str(recipe),
                           "--url", "https://downloads.invalid/cudafix-9.9.tar.gz", "--homepage", "https://project.invalid/",
                           "--maintainer", "x", "--sdist", str(released["sdist"])],
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not end with" in proc.stderr
    assert recipe.read_text() == RECIPE.read_text()


# What issue 16 found in the recipe before (the recipe of that time, in the form that matters).
OLD_RECIPE = '''schema_version: 1

context:
  name: cudafix
  version: "0.1.0"
  python_min: "3.8"
  offline_python: ${{ env.get("CUDAFIX_OFFLINE_PYTHON", default="") }}

package:
  name: ${{ name }}
  version: ${{ version }}

source:
  path: ..
  use_gitignore: true

build:
  number: 0
  noarch: python
  script: ${{ PYTHON }} -m pip install . -vv --no-deps --no-build-isolation

requirements:
  host:
    - if: not offline_python
      then:
        - python ${{ python_min }}.*
        - pip
        - setuptools >=61
  run:
    - python >=${{ python_min }}
    - click >=7

tests:
  - python:
      imports:
        - cudafix
      python_version: ${{ python_min }}.*

about:
  summary: Catch and correct NVIDIA driver / CUDA / PyTorch mismatches before torch loads
  license: BSD-3-Clause
  license_file: LICENSE
'''


def test_the_rules_catch_what_issue_16_found(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(OLD_RECIPE)
    lints, hints = lint(str(recipe), CF_PYTHON_MIN)
    assert "lint_about_contents: the about/homepage item is expected" in lints
    assert any(m.startswith("lint_recipe_maintainers:") for m in lints)
    assert "lint_usage_of_selectors_for_noarch: `noarch` packages can't have selectors (requirements/host)" in lints
    assert "hint_redundant_python_min: python_min 3.8 is not above conda-forge's 3.10: drop it" in hints
    assert any(h.startswith("hint_noarch_python_test_latest:") for h in hints)
    assert staged_recipes(str(recipe)) == ["source is a local path '..'"]


@pytest.mark.parametrize("edit,expect", [
    (("version: \"0.1.0\"\n", "version: \"0.1.0\"\n  extra_key: 1\n"), None),  # harmless
    (("tests:\n", "extra:\n  recipe-maintainers: []\n\ntests:\n"), "lint_section_order"),
    (("  number: 0\n", ""), "lint_build_section_should_have_a_number"),
    # (lint_single_space_in_pinned_requirements and lint_license_should_not_have_license cannot be
    # shown here: rattler-build's parser normalises "click>=7" and refuses a non-SPDX license first)
    (("    - python >=${{ python_min }}\n", ""), "lint_require_lower_bound_on_python_version"),
    (("    - setuptools >=61\n", ""), "hint_pip_no_build_backend"),
])
def test_each_rule_fires_on_its_defect(tmp_path, edit, expect):
    recipe = tmp_path / "recipe.yaml"
    text = OLD_RECIPE.replace("about:\n", "about:\n  homepage: https://project.invalid/\n")
    assert edit[0] in text
    recipe.write_text(text.replace(edit[0], edit[1], 1))
    lints, hints = lint(str(recipe), CF_PYTHON_MIN)
    found = [m for m in lints + hints if expect and m.startswith(expect + ":")]
    assert bool(found) == bool(expect), lints + hints
