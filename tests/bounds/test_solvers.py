"""OR-Tools loaded within a deadline."""

from __future__ import annotations

import pytest


def test_a_slow_solver_load_is_waited_for_only_until_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # a cold disk made the import of OR-Tools take 6 s: the wait ends at the deadline, the load goes on
    import sys
    import threading
    import time

    import themis_opt.bounds.solvers as solvers
    from themis_opt.budget import Deadline

    release = threading.Event()
    monkeypatch.setattr(solvers, "_LOADING", {})
    monkeypatch.setattr(solvers, "_load_solvers", lambda key, modules: release.wait(10))
    monkeypatch.delitem(sys.modules, "ortools.linear_solver.pywraplp", raising=False)
    assert not solvers.solvers_loaded(Deadline.after(0.1))  # less than solver_load (0.6 s) left: not started
    assert "programs" not in solvers._LOADING
    t0 = time.perf_counter()
    assert not solvers.solvers_loaded(Deadline.after(0.7))
    assert time.perf_counter() - t0 < 1.5
    release.set()
    assert solvers.solvers_loaded(Deadline.after(5.0))  # the same load, finished


def test_a_failed_solver_load_is_raised_where_the_solvers_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import themis_opt.bounds.solvers as solvers
    from themis_opt.budget import Deadline

    def broken(key: str, modules: tuple[str, ...]) -> None:
        solvers._LOADING[f"{key} error"] = ImportError("no OR-Tools here")

    monkeypatch.setattr(solvers, "_LOADING", {})
    monkeypatch.setattr(solvers, "_load_solvers", broken)
    monkeypatch.delitem(sys.modules, "ortools.linear_solver.pywraplp", raising=False)
    with pytest.raises(ImportError, match="no OR-Tools here"):
        solvers.solvers_loaded(Deadline.after(5.0))
    monkeypatch.delitem(sys.modules, "ortools.sat.python.cp_model", raising=False)
    with pytest.raises(ImportError, match="no OR-Tools here"):
        solvers.solvers_loaded(Deadline.after(5.0), cpsat=True)
