"""The parsers never raise on what people paste: truncated, shuffled, duplicated, binary junk.

Synthetic inputs from a seeded generator (random.Random(SEED)) over the transcribed dumps of
tests/fixtures/paste/ and tests/fixtures/reports/; each input is diagnosed end to end.
"""

from __future__ import annotations

import random
from pathlib import Path

from cudafix.paste import diagnosis

FIX = Path(__file__).resolve().parent / "fixtures"
SEED = 39
SOURCES = sorted((FIX / "paste").glob("*.txt")) + sorted((FIX / "reports").glob("*.txt"))


def _texts():
    return [p.read_text(encoding="utf-8") for p in SOURCES]


def _mutations(rng: random.Random, text: str):
    lines = text.splitlines(True)
    yield text[: rng.randrange(len(text) + 1)]  # truncated anywhere, mid-line or mid-character
    shuffled = list(lines)
    rng.shuffle(shuffled)
    yield "".join(shuffled)
    yield "".join(lines * 3)  # duplicated sections
    cut = rng.randrange(len(lines) + 1)
    yield "".join(lines[:cut]) + "\n" + "".join(lines[cut:]).replace(":", "", 1)
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    raw = text.encode("utf-8")
    at = rng.randrange(len(raw) + 1)
    yield raw[:at] + junk + raw[at:]  # binary junk in the middle
    yield "\r\n".join(l.rstrip("\n") for l in lines).encode("utf-16")  # PowerShell's `>`
    yield "".join("> " + l for l in lines)  # quoted reply
    yield "|" * 5000 + "GPU 0:" * 2000 + "\x00" * 100  # one absurd line


def test_every_mutation_diagnoses_without_raising() -> None:
    rng = random.Random(SEED)
    n = 0
    for text in _texts():
        for data in _mutations(rng, text):
            d = diagnosis.read(data)
            assert d.snapshot.source == "pasted report"
            n += 1
    assert n >= 8 * 50


def test_concatenated_dumps_in_any_order_give_the_same_facts() -> None:
    rng = random.Random(SEED)
    parts = [p.read_text(encoding="utf-8").split("# ---\n", 1)[1] for p in sorted((FIX / "paste").glob("collect_env-1.3-pytorch-30071.txt"))]
    parts += ["Cuda compilation tools, release 10.0, V10.0.130\n", "noise: step 1/100 loss=0.3\n" * 20]
    base = {(f.name, f.value) for f in diagnosis.read("\n".join(parts)).report.facts}
    for _ in range(5):
        rng.shuffle(parts)
        assert {(f.name, f.value) for f in diagnosis.read("\n".join(parts)).report.facts} == base


def test_ten_megabyte_log_is_read() -> None:
    noise = "2024-01-01 12:00:00 INFO epoch 3 step 1200 loss=0.1234 lr=1e-4 throughput=812 img/s\n"
    body = noise * (10 * 1024 * 1024 // len(noise))
    text = body[: len(body) // 2] + "Nvidia driver version: 410.48\nPyTorch version: 1.3.1\nCUDA used to build PyTorch: 10.1.243\n" + body[len(body) // 2:]
    d = diagnosis.read(text)
    assert d.snapshot.driver.kernel_version == "410.48"
    assert "driver-too-old" in {f.rule for f in d.findings}
