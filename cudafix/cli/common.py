"""What every analysing command shares: exit codes, bad input, output, the rule selection.

Its own module so that cli/analysis.py and cli/pasted.py (the pasted-report path, which
analysis dispatches to) both use it without importing each other."""

from __future__ import annotations

import functools
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class BadInput(Exception):
    """One line for the user; exit status 2."""


# -- output helpers ----------------------------------------------------------------------


def use_color(stream: Any = None, env: Optional[Dict[str, str]] = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR set (https://no-color.org) or TERM=dumb."""
    stream = sys.stdout if stream is None else stream
    env = os.environ if env is None else env
    if env.get("NO_COLOR", "") != "" or env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _encodable(text: str, stream: Any) -> str:
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
        return text
    except (UnicodeEncodeError, LookupError):
        from cudafix.render.text import DASH

        text = text.replace(DASH, "-")
        try:
            return text.encode(enc, "backslashreplace").decode(enc)
        except LookupError:
            return text.encode("ascii", "backslashreplace").decode("ascii")


def emit(text: str, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    try:
        stream.write(_encodable(text, stream))
        stream.flush()
    except BrokenPipeError:
        # `cudafix status | head`: the reader left; say nothing more, and keep Python's
        # shutdown flush from printing a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        sys.exit(EXIT_OK if not err else EXIT_USAGE)


def fail(message: str) -> NoReturn:
    emit("cudafix: error: %s\n" % message.replace("\n", " ").strip(), err=True)
    sys.exit(EXIT_USAGE)


def guarded(func: Callable[..., Any], passthrough: Tuple[type, ...] = ()) -> Callable[..., Any]:
    """Bad input and crashes of cudafix itself: one line on stderr, exit 2.  ``passthrough``: more
    exceptions to let through (the click commands': click's own Exit, ClickException, Abort)."""
    let_through = (SystemExit, KeyboardInterrupt) + tuple(passthrough)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BadInput as exc:
            fail(str(exc))
        except let_through:
            raise
        except Exception as exc:  # cudafix itself could not run
            from cudafix.knowledge import knobs

            if knobs.flag(os.environ, "CUDAFIX_DEBUG"):
                import traceback

                traceback.print_exc()
            fail("cudafix failed: %s: %s (CUDAFIX_DEBUG=1 shows where)" % (type(exc).__name__, exc))

    return wrapper


# -- options shared by the analysing commands ------------------------------------------


def _split(values: Sequence[str]) -> List[str]:
    out: List[str] = []
    for v in values or ():
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out


def select_rules(only: Sequence[str], skip: Sequence[str]) -> Tuple[Any, ...]:
    from cudafix import rules

    try:
        return rules.select(_split(only), _split(skip))
    except rules.UnknownRuleError as exc:
        raise BadInput(str(exc)) from None


