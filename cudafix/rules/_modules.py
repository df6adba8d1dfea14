"""Which modules contribute rules, in report order."""

from cudafix.rules import driver  # noqa: F401

MODULES = (driver,)
