"""The searches' pace as a log line; the helper processes they spread over are
:mod:`themis_opt.helpers`'s (one forked search or timer per extra worker).
"""

from __future__ import annotations

import time

from themis_opt.errors import counted


def rate_line(used: int, noun: str, since: float) -> str:
    """``N nouns timed in T s (R a second)``: a search's log line, from its start ``since`` (perf_counter)."""
    took = time.perf_counter() - since
    return f"{counted(used, noun)} timed in {took:.2f} s ({used / took if took > 0 else 0.0:.0f} a second)"
