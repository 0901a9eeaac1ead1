"""The exceptions fabbench maps to exit codes, in one place.

``UsageError`` (exit 2) is bad input: an option, a profile file, a results file, a template value.
``RunError`` (exit 1) is a failure at run time: a rank died, a transport was not the one asked for,
an operation passed its deadline, a check found wrong data.
"""

from __future__ import annotations


class FabbenchError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(FabbenchError):
    """Bad input. One line, exit code 2, nothing already written is touched."""

    exit_code = 2


class RunError(FabbenchError):
    """A failure while running a benchmark."""

    exit_code = 1


class TransportMismatch(RunError):
    """The library reports a transport other than the one the fabric profile asked for."""


class DataCheckFailed(RunError):
    """``--check`` found elements that differ from the expected result."""


class InvalidRecord(RunError):
    """A results record that does not satisfy the schema: refused before a byte is written."""
