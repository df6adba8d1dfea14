"""Generate cudafix/knowledge/gpu_names.py (GPU name -> compute capability) from cited sources.

    python -m tools.gpu_names            # rewrite cudafix/knowledge/gpu_names.py
    python -m tools.gpu_names --check    # exit 1 if the file is not what it generates
    python -m tools.gpu_names --extract-pci-ids /usr/share/misc/pci.ids  # refresh the excerpt

Inputs (transcribed, each with its URL and date, in tests/fixtures/gpus/):
- cuda-gpus.txt: NVIDIA's CUDA GPU lists (https://developer.nvidia.com/cuda-gpus and
  .../cuda-legacy-gpus), product name -> compute capability;
- pci-ids-nvidia.txt: the NVIDIA device lines of pci.ids (https://pci-ids.ucw.cz/): device name
  -> chip ("GA102GL [A10G]").  These are the names that nvidia-smi / NVML print for boards
  NVIDIA's list does not name (A10G, A800, H800, laptop GPUs, RTX 2050 ...).

A chip's compute capability is the one its products on NVIDIA's list have (RTX A6000 is a
GA102GL at 8.6, so every GA102 board is 8.6); a chip whose listed products disagree, or that has
none, gives no row.  A pci.ids name whose key collides with a listed product of a different
compute capability stops the generator: the data contradict each other and a person decides.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from tools.docfile import write_or_check
from cudafix.knowledge.gpu_keys import name_key, name_keys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "gpus")
LISTS = os.path.join(FIXTURES, "cuda-gpus.txt")
PCI_IDS = os.path.join(FIXTURES, "pci-ids-nvidia.txt")
OUTPUT = os.path.join(ROOT, "cudafix", "knowledge", "gpu_names.py")
PCI_IDS_URL = "https://pci-ids.ucw.cz/ (pci.ids 2023.04.10)"

# Chip code in a pci.ids device name: GA102GL -> GA102, GP10B (Tegra) -> GP10B, TU117M -> TU117.
_CHIP = re.compile(r"^((?:GM|GP|GV|TU|GA|AD|GH|GB)(?:\d{3}|\d{2}B))")
# A pci.ids alternative that names a product, not just a variant word ("Max-Q", "Mobile").
_PRODUCT_WORD = re.compile(r"\b([A-Z]+\d|\d+[A-Z]*\b.*\b(?:RTX|GTX|GT|MX|TITAN)|RTX|GTX|GT|MX|TITAN|QUADRO|TESLA|JETSON|GEFORCE)", re.I)


class Listed(NamedTuple):
    name: str
    cc: str
    source: str  # section key of cuda-gpus.txt


class Section(NamedTuple):
    key: str
    status: str
    url: str
    note: str


def parse_lists(text: str) -> Tuple[Dict[str, Section], List[Listed]]:
    sections: Dict[str, Section] = {}
    rows: List[Listed] = []
    current: Optional[Section] = None
    cc: Optional[str] = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@source "):
            parts = [p.strip() for p in line[len("@source "):].split("|", 3)]
            if len(parts) != 4:
                raise ValueError("line %d: @source KEY | STATUS | URL | note" % lineno)
            current = Section(*parts)
            sections[current.key] = current
            cc = None
        elif re.match(r"^\d{1,2}\.\d$", line):
            cc = line
        elif current is None or cc is None:
            raise ValueError("line %d: a product before its @source / X.Y heading: %r" % (lineno, line))
        else:
            rows.append(Listed(line, cc, current.key))
    return sections, rows


class Device(NamedTuple):
    pci_id: str
    chip: str  # "GA102"
    line: str  # "GA102GL [A10G]"
    names: Tuple[str, ...]


def parse_pci_ids(text: str) -> List[Device]:
    out = []
    for raw in text.splitlines():
        m = re.match(r"^\t([0-9a-f]{4})\s+(.*)$", raw)
        if not m:
            continue
        pci_id, desc = m.groups()
        chip = _CHIP.match(desc)
        bracket = re.search(r"\[(.*)\]", desc)
        if not chip or not bracket:
            continue
        names = tuple(a.strip() for a in bracket.group(1).split(" / ") if _PRODUCT_WORD.search(a))
        if names:
            out.append(Device(pci_id, chip.group(1), desc.strip(), names))
    return out


class Row(NamedTuple):
    name: str
    key: str
    cc: str
    source: str  # section key, or "pci-ids"
    via: str  # "" for listed products; how a pci.ids name got its CC


def generate(lists_text: str, pci_text: str) -> Tuple[Dict[str, Section], List[Row]]:
    sections, listed = parse_lists(lists_text)
    rows: List[Row] = []
    by_key: Dict[str, Row] = {}

    def add(row: Row) -> None:
        old = by_key.get(row.key)
        if old is None:
            by_key[row.key] = row
            rows.append(row)
        elif old.cc != row.cc:
            raise ValueError("%r (%s, %s) and %r (%s, %s) share the key %r" % (
                old.name, old.cc, old.source, row.name, row.cc, row.source, row.key))

    for item in listed:
        for key in name_keys(item.name):
            add(Row(item.name, key, item.cc, item.source, ""))

    devices = parse_pci_ids(pci_text)
    # chip -> {cc: the listed product that says so}
    chip_cc: Dict[str, Dict[str, str]] = {}
    for dev in devices:
        for n in dev.names:
            row = by_key.get(name_key(n))
            if row is not None and not row.via:
                chip_cc.setdefault(dev.chip, {}).setdefault(row.cc, "%s (%s)" % (row.name, row.source))
    # A chip generation (TU, AD, GH ...) whose listed chips all have one compute capability
    # gives it to its other chips (TU116, a GTX 1660, has no product on NVIDIA's list; every
    # listed Turing chip is 7.5).  GA (GA100 8.0, GA10x 8.6), GP and GM disagree: no fallback.
    gen_cc: Dict[str, Dict[str, str]] = {}
    for chip, ccs in sorted(chip_cc.items()):
        for cc, witness in ccs.items():
            gen_cc.setdefault(chip[:2], {}).setdefault(cc, "%s (as %s)" % (chip, witness))
    for dev in devices:
        ccs = chip_cc.get(dev.chip, {})
        if not ccs:
            gen = gen_cc.get(dev.chip[:2], {})
            if len(gen) == 1:
                (cc, witness), = gen.items()
                ccs = {cc: "every listed %s chip, e.g. %s" % (dev.chip[:2], witness)}
        if len(ccs) != 1:
            continue  # no listed product on this chip or its generation, or they disagree
        (cc, witness), = ccs.items()
        for n in dev.names:
            key = name_key(n)
            if not key or not re.search(r"\d", key):
                continue
            via = "PCI device 10de:%s %s; %s is %s as %s" % (dev.pci_id, dev.line, dev.chip, cc, witness)
            add(Row(n, key, cc, "pci-ids", via))
    return sections, rows


def render(sections: Dict[str, Section], rows: Sequence[Row]) -> str:
    out = [
        '"""GPU product names -> compute capability.  GENERATED by `python -m tools.gpu_names`',
        "from tests/fixtures/gpus/cuda-gpus.txt and pci-ids-nvidia.txt: do not edit by hand.",
        "",
        "ROWS: (name as the source spells it, lookup key (gpu_keys.name_key), X.Y, source key, via).",
        '"""',
        "",
        "from typing import Dict, Tuple",
        "",
        "# source key -> (status, URL and what it is)",
        "SOURCES: Dict[str, Tuple[str, str]] = {",
    ]
    for s in sections.values():
        out.append("    %r: (%r, %r)," % (s.key, s.status, "%s; %s" % (s.url, s.note)))
    out.append("    %r: (%r, %r)," % ("pci-ids", "derived", PCI_IDS_URL + "; the device's chip has the compute capability of its products on NVIDIA's list"))
    out.append("}")
    out.append("")
    out.append("ROWS: Tuple[Tuple[str, str, str, str, str], ...] = (")
    for r in rows:
        out.append("    (%r, %r, %r, %r, %r)," % (r.name, r.key, r.cc, r.source, r.via))
    out.append(")")
    return "\n".join(out) + "\n"


def extract_pci_ids(path: str) -> Iterator[str]:
    """The kept lines of a full pci.ids (see pci-ids-nvidia.txt's header)."""
    inside = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh.read().splitlines():
            if re.match(r"^10de\s", line):
                inside = True
                yield line
                continue
            if inside and line and not line.startswith(("\t", "#")):
                return
            if inside and re.match(r"^\t[0-9a-f]{4}\s+(GM|GP|GV|TU|GA|AD|GH|GB|GN)\d", line):
                yield line


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.gpu_names", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if gpu_names.py differs from what would be generated")
    p.add_argument("--extract-pci-ids", metavar="PCI_IDS", help="print the kept NVIDIA lines of a full pci.ids and exit")
    args = p.parse_args(argv)
    if args.extract_pci_ids:
        for line in extract_pci_ids(args.extract_pci_ids):
            print(line)
        return 0
    with open(LISTS, encoding="utf-8") as fh:
        lists_text = fh.read()
    with open(PCI_IDS, encoding="utf-8") as fh:
        pci_text = fh.read()
    try:
        sections, rows = generate(lists_text, pci_text)
    except ValueError as exc:
        print("gpu_names: %s" % exc, file=sys.stderr)
        return 2
    text = render(sections, rows)
    return write_or_check(OUTPUT, text, args.check, "python -m tools.gpu_names")


if __name__ == "__main__":
    sys.exit(main())
