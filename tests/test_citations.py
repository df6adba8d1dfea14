"""Citations ship with the product: no file of this repository points at the team's private notes.

Explain texts, knowledge rows, docs, comments and fixtures cite a public URL or a document inside
this repository.  The private research notes (``shared/DESIGN.md``, ``shared/reference/*.md``) are
in neither the repository nor the wheel, so a reference to them is a citation nobody can follow.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The note files by name, however they were spelled (with or without the folder, "§" or not).
PRIVATE = re.compile(
    r"\.\./shared\b|\bshared/(?:DESIGN|reference)\b|\bDESIGN(?:\.md|\s+constraint|\s+hard\s+constraint)"
    r"|\bfacts-(?:driver|torch)\b|\banchors\.md\b|\banchors\s+(?:F\d|§)|\bFACTS_(?:DRIVER|TORCH)\b"
)


def _tracked_files():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=str(ROOT), capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def offending_lines(files):
    hits = []
    for path in files:
        if path.resolve() == pathlib.Path(__file__).resolve() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary fixtures (ld.so.cache) carry no citations
        for no, line in enumerate(text.splitlines(), 1):
            if PRIVATE.search(line):
                hits.append("%s:%d: %s" % (path.relative_to(ROOT), no, line.strip()[:160]))
    return hits


def test_pattern_catches_each_spelling(tmp_path):
    """The grep must not be vacuous: every spelling used before this test existed is caught."""
    spellings = (
        'sources=(ENV_DOC, "shared/DESIGN.md (H200 measurement)")',
        "(CUDA Programming Guide appendix; ../shared/reference/facts-driver.md §5):",
        'S = FACTS_TORCH + " §5a"',
        "(anchors.md §C F6, F14, F15)",
        "Trust only a cache file we own (DESIGN constraint 6).",
        "# Never torch (DESIGN.md, hard constraint 8).",
        "transcribed from the conda 1.10 cu11.3 arch list (facts-torch §2c)",
        "Grace9994/CoMoSVC#6 / anchors F12 (os.environ[...] hard-coded)",
    )
    clean = ("https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html",
             "docs/gpu.md (H200 measurement)", "cannot open shared object file", "-shared", "/usr/share/doc")
    files = []
    for i, line in enumerate(spellings + clean):
        f = tmp_path / ("f%d.txt" % i)
        f.write_text(line + "\n")
        files.append(f)
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = offending_lines(files)
    finally:
        ROOT = saved
    assert len(hits) == len(spellings), hits


def test_nothing_in_the_repository_cites_private_notes():
    files = _tracked_files()
    assert any(p.name == "rules.md" for p in files) and len(files) > 100, "git ls-files saw too little"
    hits = offending_lines(files)
    assert not hits, "cite a public URL or a document in this repository instead:\n" + "\n".join(hits)
