"""conda-forge's linter rules for a v1 (rattler-build) recipe.yaml, the ones that apply to
cudafix's single-output noarch: python recipe, re-implemented from conda-forge/conda-smithy
(commit 081ec6bad0de1adb2d95b7f21fa8187258f90803; conda_smithy/lint_recipe.py lintify_meta_yaml
and run_conda_forge_specific, conda_smithy/linter/lints.py, linter/hints.py,
linter/conda_recipe_v1_linter.py, linter/utils.py).  Each check names the function it follows.

conda-smithy itself is not installable from PyPI with its dependencies (conda, conda-build), so
it cannot run in CI here; the rules are small and are re-implemented as data + functions.
Rules that do not apply: compiler / stdlib / pin_subpackage / rust / go / osx / abi3 / whl /
multiple outputs / feedstock configuration lints (no compiled code, one output, no conda-forge.yml).

A lint blocks a staged-recipes PR; a hint is advice the reviewers enforce in practice.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from packaging.version import Version
from rattler_build import Stage0Recipe

# conda_recipe_v1_linter.EXPECTED_SINGLE_OUTPUT_SECTION_ORDER
SECTION_ORDER = ["schema_version", "context", "package", "source", "build", "requirements", "tests", "about", "extra"]
# conda_recipe_v1_linter.REQUIREMENTS_ORDER
REQUIREMENTS_ORDER = ["build", "host", "run"]
# linter/hints.py hint_pip_no_build_backend: VALID_PYTHON_BUILD_BACKENDS (the ones that matter here)
BUILD_BACKENDS = ("setuptools", "hatchling", "flit-core", "poetry-core", "pdm-backend", "meson-python", "scikit-build-core", "maturin")


def _top_level_keys(text: str) -> List[str]:
    return [m.group(1) for m in re.finditer(r"^([A-Za-z_][\w-]*):", text, re.M)]


def _reqs(items: Any) -> List[Any]:
    return list(items or [])


def _flatten(items: List[Any]) -> List[str]:
    """linter/utils.py flatten_v1_if_else."""
    out: List[str] = []
    for req in items:
        if isinstance(req, dict):
            then = req.get("then", [])
            other = req.get("else", [])
            out += _flatten(then if isinstance(then, list) else [then])
            out += _flatten(other if isinstance(other, list) else [other])
        else:
            out.append(req)
    return out


def lint(recipe_path: str, global_python_min: str) -> Tuple[List[str], List[str]]:
    """(lints, hints) for the recipe file, each message prefixed with the smithy function name."""
    with open(recipe_path, encoding="utf-8") as fh:
        text = fh.read()
    meta: Dict[str, Any] = Stage0Recipe.from_file(recipe_path).to_dict()
    lints: List[str] = []
    hints: List[str] = []
    sections = _top_level_keys(text)

    # lint_recipe.py #0: unexpected top-level sections
    for s in sections:
        if s not in SECTION_ORDER + ["recipe", "outputs"]:
            lints.append("lintify_meta_yaml: unexpected section %r" % s)
    # lints.py lint_section_order
    known = [s for s in sections if s in SECTION_ORDER]
    if known != sorted(known, key=SECTION_ORDER.index):
        lints.append("lint_section_order: sections should be in order %s" % sorted(known, key=SECTION_ORDER.index))
    if meta.get("schema_version", 1) != 1:
        lints.append("lintify_meta_yaml: unsupported recipe.yaml schema version")

    about = meta.get("about") or {}
    # lints.py lint_about_contents (v1: homepage, license, summary)
    for item in ("homepage", "license", "summary"):
        if not about.get(item):
            lints.append("lint_about_contents: the about/%s item is expected" % item)
    # lints.py lint_recipe_maintainers
    extra = meta.get("extra") or {}
    maintainers = extra.get("recipe-maintainers", [])
    if not maintainers:
        lints.append("lint_recipe_maintainers: the recipe could do with some maintainers listed in extra/recipe-maintainers")
    if not isinstance(maintainers, list):
        lints.append("lint_recipe_maintainers: recipe maintainers should be a json list")
    # conda_recipe_v1_linter.lint_recipe_tests
    if not meta.get("tests"):
        lints.append("lint_recipe_tests: the recipe must have some tests")
    # lints.py lint_license_cannot_be_unknown, lint_license_should_not_have_license
    license_ = str(about.get("license", ""))
    if license_.strip().lower() == "unknown":
        lints.append("lint_license_cannot_be_unknown: the recipe license cannot be unknown")
    if "license" in license_.lower() and "unlicense" not in license_.lower():
        lints.append("lint_license_should_not_have_license: license should not include the word 'license'")
    # lints.py lint_no_comment_selectors (v1 has no `# [sel]` selectors)
    bad = [i for i, ln in enumerate(text.splitlines(), 1) if re.search(r"#\s*\[[^\]]+\]\s*$", ln)]
    if bad:
        lints.append("lint_no_comment_selectors: comment selectors on lines %s" % bad)
    build = meta.get("build") or {}
    # lints.py lint_build_section_should_have_a_number
    if "number" not in build:
        lints.append("lint_build_section_should_have_a_number: the recipe must have a build/number section")
    # lints.py lint_build_section_should_be_before_run
    req = meta.get("requirements") or {}
    seen = [k for k in REQUIREMENTS_ORDER if k in req]
    order = [k for k in req if k in REQUIREMENTS_ORDER]
    if order != seen:
        lints.append("lint_build_section_should_be_before_run: requirements order %s, expected %s" % (order, seen))
    # lints.py lint_sources_should_have_hash
    sources = meta.get("source") or []
    sources = sources if isinstance(sources, list) else [sources]
    for src in sources:
        if "url" in src and not ({"sha1", "sha256", "md5"} & set(src)):
            lints.append("lint_sources_should_have_hash: when defining a source/url please add a sha256")
    # lints.py lint_should_be_empty_line
    if not text.endswith("\n") or text.endswith("\n\n"):
        lints.append("lint_should_be_empty_line: there should be one empty line at the end of the file")
    # utils.py _lint_recipe_name / _lint_package_version (via conda_recipe_v1_linter)
    context = meta.get("context") or {}
    name = str((meta.get("package") or {}).get("name", "")).replace("${{ name }}", str(context.get("name", "")))
    if not re.match(r"^[a-z0-9_\-.]+$", name):
        lints.append("lint_recipe_name: recipe name has invalid characters: %r" % name)
    version = str((meta.get("package") or {}).get("version", "")).replace("${{ version }}", str(context.get("version", "")))
    try:
        Version(version)
    except Exception:
        lints.append("lint_package_version: package version %r is invalid" % version)
    # lints.py lint_noarch
    noarch = build.get("noarch")
    if noarch is not None and noarch not in ("python", "generic"):
        lints.append("lint_noarch: invalid noarch value %r" % noarch)
    # conda_recipe_v1_linter.lint_usage_of_selectors_for_noarch (no noarch_platforms here)
    if noarch:
        for section, items in req.items():
            if any(isinstance(r, dict) for r in _reqs(items)):
                lints.append("lint_usage_of_selectors_for_noarch: `noarch` packages can't have selectors (requirements/%s)" % section)
                break
        if build.get("skip"):
            lints.append("lint_usage_of_selectors_for_noarch: `noarch` packages can't have skips")
    # lints.py lint_single_space_in_pinned_requirements
    for section, items in req.items():
        for r in _flatten(_reqs(items)):
            if not isinstance(r, str) or "${{" in r:
                continue
            parts = r.split()
            if len(parts) > 2 and parts[1] in ("!=", "=", "==", ">", "<", "<=", ">="):
                lints.append("lint_single_space_in_pinned_requirements: %r: join the operator and version" % r)
            elif any(c in parts[0] for c in "><="):
                lints.append("lint_single_space_in_pinned_requirements: %r: separate name and version" % r)
    # lints.py lint_require_lower_bound_on_python_version
    run = _flatten(_reqs(req.get("run")))
    if noarch == "python" and not any(r.split()[0] == "python" and r != "python" for r in run):
        lints.append("lint_require_lower_bound_on_python_version: noarch: python needs a lower bound on python in run")

    # hints.py hint_noarch_python_use_python_min (v1 syntax)
    if noarch == "python":
        host = _flatten(_reqs(req.get("host")))
        want = [
            ("host", r"python\s+\$\{\{ python_min \}\}", host),
            ("run", r"python\s+>=\$\{\{ python_min \}\}", run),
        ]
        for section, pattern, items in want:
            if not any(r.split()[0] == "python" and re.search(pattern, r) for r in items):
                hints.append("hint_noarch_python_use_python_min: %s should pin python with ${{ python_min }}" % section)
        tests_pin = False
        for t in meta.get("tests") or []:
            pv = (t.get("python") or {}).get("python_version") if isinstance(t, dict) else None
            pv = [pv] if isinstance(pv, str) else (pv or [])
            if any(re.search(r"\$\{\{ python_min \}\}", str(v)) for v in _flatten(pv)):
                tests_pin = True
        if not tests_pin:
            hints.append("hint_noarch_python_use_python_min: tests[].python.python_version should be ${{ python_min }}.*")
        # hints.py hint_noarch_python_test_latest / _python_tests_cover_latest
        for t in meta.get("tests") or []:
            if isinstance(t, dict) and "python" in t:
                pv = (t.get("python") or {}).get("python_version", [])
                pv = [pv] if isinstance(pv, str) else (pv or [])
                if "*" not in _flatten(pv):
                    hints.append("hint_noarch_python_test_latest: python tests should also run on the latest python ('*')")
    # hints.py hint_redundant_python_min
    declared = context.get("python_min")
    if declared is not None and Version(str(declared)) <= Version(global_python_min):
        hints.append("hint_redundant_python_min: python_min %s is not above conda-forge's %s: drop it" % (declared, global_python_min))
    # hints.py hint_pip_no_build_backend
    host_build = _flatten(_reqs(req.get("host"))) + _flatten(_reqs(req.get("build")))
    if any(r.split()[0] == "pip" for r in host_build) and not any(
            r.split()[0].replace("_", "-") in BUILD_BACKENDS for r in host_build):
        hints.append("hint_pip_no_build_backend: pip in host/build needs the build backend too")
    # hints.py hint_pip_usage
    scripts = build.get("script") or []
    scripts = [scripts] if isinstance(scripts, str) else scripts
    if any("python setup.py install" in str(s) for s in scripts):
        hints.append("hint_pip_usage: use pip, not python setup.py install")
    # hints.py hint_legacy_pypi_url
    for src in sources:
        urls = src.get("url", [])
        urls = [urls] if isinstance(urls, str) else urls
        if any(str(u).startswith("https://pypi.io/") for u in urls):
            hints.append("hint_legacy_pypi_url: legacy pypi.io URL")
    return lints, hints


def staged_recipes(recipe_path: str) -> List[str]:
    """What a staged-recipes PR needs beyond the linter: a published source (url + sha256),
    not a path into a checkout."""
    meta = Stage0Recipe.from_file(recipe_path).to_dict()
    sources = meta.get("source") or []
    sources = sources if isinstance(sources, list) else [sources]
    problems = []
    if not sources:
        problems.append("no source")
    for src in sources:
        if "path" in src:
            problems.append("source is a local path %r" % src["path"])
        if "url" in src and not re.match(r"^[0-9a-f]{64}$", str(src.get("sha256", ""))):
            problems.append("source url without a sha256")
    return problems
