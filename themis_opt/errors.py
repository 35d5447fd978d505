"""The one exception type that bad input raises."""

from __future__ import annotations

import sys

# The most characters of a message's location and of its problem: a value quoted in full (a list
# a YAML alias expanded, a line of a binary file) would make "one line" of megabytes.
LOCATION_CHARS = 200
PROBLEM_CHARS = 400
_TAIL_CHARS = 60  # of a shortened text, the end kept (what follows a quoted value)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``1 job``, ``2 jobs``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class InputError(ValueError):
    """Bad input: names where the problem is and what it is.

    Parameters
    ----------
    path
        Where the problem is, as a field path (``network.dimensions[1].size``)
        or a file name; empty when the problem has no location.
    problem
        What is wrong, in a few words (``must be >= 1, got 0``).

    Notes
    -----
    ``str(error)`` is the one line the CLI prints: ``path: problem``; line
    breaks that input smuggles into either (a field name, a file's text) are
    shown escaped.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        shown_path, shown_problem = _short(path, LOCATION_CHARS), _short(problem, PROBLEM_CHARS)
        super().__init__(_one_line(f"{shown_path}: {shown_problem}" if path else shown_problem))

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str]]:
        # pickled with its two fields (it crosses process pools)
        return InputError, (self.path, self.problem)

    def within(self, prefix: str) -> InputError:
        """Return the same error located inside ``prefix``.

        ``InputError("size", "...").within("network.dimensions[1]")`` names
        ``network.dimensions[1].size``.
        """
        if not self.path:
            return InputError(prefix, self.problem)
        sep = "" if self.path.startswith("[") else "."
        return InputError(f"{prefix}{sep}{self.path}", self.problem)


def _short(text: str, most: int) -> str:
    """``text``, or its start and end around what is left out when it is longer than ``most`` characters."""
    if len(text) <= most:
        return text
    head = most - _TAIL_CHARS
    return f"{text[:head]} [{len(text) - most:,} characters left out] {text[-_TAIL_CHARS:]}"


def _one_line(text: str) -> str:
    """``text`` with every line break written as its escape, so it prints as one line."""
    return "".join(repr(ch)[1:-1] if ch.splitlines() != [ch] else ch for ch in text)


def too_many_digits(error: ValueError) -> str:
    """What a ``ValueError`` of a parser says, shortened: Python converts integers of at most
    ``sys.get_int_max_str_digits()`` digits, and names the limit in a long sentence.
    """
    text = str(error)
    if "digits" in text:
        return f"a number of more than {sys.get_int_max_str_digits()} digits"
    return text.splitlines()[0] if text else type(error).__name__
