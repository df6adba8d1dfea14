"""`--from-report FILE|-`: `status`, `check`, `fix` and `explain` on what a user pasted.

The text is read as bytes (any encoding, any size up to cudafix.paste.text's bound), parsed into
a partial snapshot and judged by the same rules and planner (cudafix.paste).  What cannot be
read is a note in the output; an unreadable file is one line and exit 2.  `fix --from-report`
prints the plan for that env and never applies it here.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, NoReturn

from cudafix.cli.common import EXIT_FINDINGS, EXIT_OK, BadInput, emit, select_rules, use_color

_EXCLUSIVE = (("from_file", "--from"), ("example", "--example"), ("python", "--python"),
              ("assume_driver", "--assume-driver"), ("assume_gpu", "--assume-gpu"))


# More than this is read as its first and last halves (cudafix.paste.text reads 16 Mi characters
# of it anyway and notes the middle it skipped): a 1 GB log must not fill the memory.
MAX_BYTES = 64 * 1024 * 1024


def read_bytes(path: str) -> bytes:
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", None)
            if stream is None:
                return sys.stdin.read(MAX_BYTES).encode("utf-8", "replace")
            return stream.read(MAX_BYTES)
        with open(path, "rb") as fh:
            head = fh.read(MAX_BYTES)
            if len(head) < MAX_BYTES:
                return head
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(MAX_BYTES, size - MAX_BYTES // 2))
            return head[: MAX_BYTES // 2] + b"\n" + fh.read(MAX_BYTES // 2)
    except OSError as exc:
        raise BadInput("--from-report %s: %s" % (path, exc.strerror or exc)) from None


def diagnosis(opts: Dict[str, Any]) -> Any:
    """Validate, read and judge the report (nothing on this machine is probed)."""
    path = opts["from_report"]
    given = [flag for key, flag in _EXCLUSIVE if opts.get(key)]
    if given:
        raise BadInput("--from-report cannot be combined with %s (the report describes another machine)" % ", ".join(given))
    selected = select_rules(opts.get("only", ()), opts.get("skip", ())) if (opts.get("only") or opts.get("skip")) else None
    from cudafix.paste import diagnosis

    report = diagnosis.read_report(read_bytes(path))
    return diagnosis.analyse(report, selected)


def _origin(opts: Dict[str, Any]) -> str:
    return "from %s" % ("stdin" if opts["from_report"] == "-" else opts["from_report"])


def _json(d: Any) -> str:
    import json

    from cudafix.render.report import status_document

    doc = status_document(d.snapshot, d.runs, plan=d.plan)
    doc["from_report"] = d.to_dict()
    return json.dumps(doc, indent=2) + "\n"


def run_status(as_json: bool, opts: Dict[str, Any]) -> None:
    from cudafix.paste import show
    from cudafix.render.report import WIDTH

    d = diagnosis(opts)
    emit(_json(d) if as_json else show.render(d, _origin(opts), color=use_color(), width=WIDTH))


def run_check(strict: bool, as_json: bool, opts: Dict[str, Any]) -> "NoReturn":
    """Exit 1 on an error finding (only a certain one is an error: a likely cause is a warning);
    with --strict on warnings and on what needs the env too."""
    from cudafix.paste import show
    from cudafix.render.report import WIDTH

    d = diagnosis(opts)
    sev = {f.severity for f in d.findings}
    bad = "error" in sev or (strict and ("warning" in sev or bool(d.undecided)))
    emit(_json(d) if as_json else show.render(d, _origin(opts), color=use_color(), width=WIDTH, machine=False))
    sys.exit(EXIT_FINDINGS if bad else EXIT_OK)


def run_fix(apply_: bool, as_json: bool, opts: Dict[str, Any]) -> None:
    if apply_:
        raise BadInput("--from-report describes another machine: nothing here to apply its plan to (fix --from-report prints it)")
    from cudafix.paste import show
    from cudafix.render.report import WIDTH

    d = diagnosis(opts)
    if as_json:
        import json

        emit(json.dumps({"schema": "cudafix.plan/1", "plan": d.plan.to_dict() if d.plan is not None else None,
                         "error": d.plan_error, "from_report": True}, indent=2) + "\n")
    else:
        emit(show.plan_only(d, _origin(opts), color=use_color(), width=WIDTH))


def run_explain(path: str) -> None:
    """Explain every rule the report's findings and error texts point at."""
    from cudafix import rules
    from cudafix.paste import show
    from cudafix.render.report import render_explain

    d = diagnosis({"from_report": path})
    ids = show.explain_lines(d)
    if not ids:
        emit("cudafix: nothing in the report points at a rule (no finding, no known error text)\n")
        return
    emit("\n".join(render_explain(rules.BY_ID[i], color=use_color()) for i in ids if i in rules.BY_ID))
