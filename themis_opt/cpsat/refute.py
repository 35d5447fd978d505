"""Questions to the exact model with its horizon cut at a cap: does an assignment of order counts
admit a schedule that ends by the cap? The model is built once per cap and each assignment is
asked as the solve's assumptions (about twice as fast as a model built for each: the
refutation stage asks tens of them a round).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from themis_opt.budget import Deadline
from themis_opt.cpsat.driver import CpsatOutcome, _Recorder, _stats, quantum_for
from themis_opt.cpsat.model import CPSAT, CpsatModel
from themis_opt.cpsat.params import CpsatParams
from themis_opt.cpsat.solver import INFEASIBLE, Solver, SolverSettings
from themis_opt.instance import Instance
from themis_opt.orders import Counts
from themis_opt.result import Status
from themis_opt.schedule import Schedule


class CappedModel:
    """The exact model of ``instance`` with every schedule ending by ``cap`` ns (times rounded down,
    so every such schedule is one of the model's), asked one assignment at a time.

    Parameters
    ----------
    instance
        The instance (its model with the symmetry breaking).
    warm
        A valid schedule longer than ``cap``: its makespan sets the quantum.
    cap
        The makespan a schedule must not exceed.
    lower_bound
        A proven lower bound on the makespan.
    workers, seed
        CP-SAT's worker threads and random seed.
    deadline
        When the model must be built.
    quantum_ns
        Time quantum; ``None`` picks it as :func:`~themis_opt.cpsat.solve_cpsat` does.
    params
        The quantum's tuning numbers.

    Raises
    ------
    InputError
        If ``quantum_ns`` is too fine for CP-SAT's integers.
    OutOfTime
        If ``deadline`` passes while the model is built.
    """

    def __init__(
        self,
        instance: Instance,
        warm: Schedule,
        cap: float,
        *,
        lower_bound: float,
        workers: int,
        seed: int,
        deadline: Deadline,
        quantum_ns: float | None = None,
        params: CpsatParams = CPSAT,
    ) -> None:
        if cap >= warm.makespan:
            raise ValueError(f"cap {cap} ns is not below the warm start's makespan {warm.makespan} ns")
        quantum = quantum_for(instance, warm, quantum_ns, deadline, params)
        self.model = CpsatModel(instance, quantum, math.floor(cap / quantum), deadline)
        self.model.model.add(self.model.makespan >= self.model.floor(lower_bound))
        self.warm = warm
        self.lower_bound = lower_bound
        self.workers = workers
        self.seed = seed
        self.share = params.search_share
        self._lock = threading.Lock()
        self._solver: Solver | None = None
        self._stopped = False

    def stop(self) -> None:
        """Stop the question being asked (from another thread), and every later one: each answers
        ``no_solution`` at once.
        """
        with self._lock:
            self._stopped = True
            if self._solver is not None:
                self._solver.stop_search()

    def ask(self, counts: Counts, deadline: Deadline) -> CpsatOutcome:
        """Whether ``counts`` admit a schedule that ends by the cap: status ``infeasible`` (proven
        none), ``feasible`` (the first found, re-timed exactly, is the outcome's schedule) or
        ``no_solution`` (no answer by ``deadline``; the warm start is the outcome's schedule).
        """
        cp = self.model.model
        cp.clear_assumptions()
        cp.add_assumptions(self.model.count_literals(counts))
        seconds = max(1e-3, deadline.remaining() * self.share)  # the rest: re-timing a schedule found
        solver = Solver(
            SolverSettings(
                workers=self.workers,
                seed=self.seed,
                seconds=seconds,
                strong_disjunctive=True,
                first_solution=True,
            )
        )
        origin = self.model.instance.origin_ns
        recorder = _Recorder(self.model, self.warm, 0.0, self.lower_bound, origin)
        with self._lock:
            self._solver = solver
            if self._stopped:
                solver.stop_search()
        code = solver.run(cp, deadline, recorder)
        with self._lock:
            self._solver = None
        if code == INFEASIBLE:
            status = Status.INFEASIBLE
        else:
            status = Status.FEASIBLE if recorder.solutions else Status.NO_SOLUTION
        stats = _stats(solver, code, recorder, self.model.quantum)
        return CpsatOutcome(status, recorder.best, None, stats, tuple(recorder.trajectory))


def ask_at_once(
    models: Sequence[CappedModel],
    questions: Iterator[tuple[Counts, float]],
    deadline: Deadline,
    enough: Callable[[Counts, CpsatOutcome], bool],
) -> tuple[CpsatOutcome | None, int]:
    """Ask ``questions`` (each an assignment and the seconds it has at first) on ``models`` (capped
    alike), one question per model at a time, each model in a thread of its own, until an answer
    is ``enough`` (called with the assignment and the outcome of every answer, one at a time), the
    questions run out or ``deadline``.

    A question not answered in its seconds is asked again, with four times as long, once the
    questions have run out (a question CP-SAT cannot answer soon holds up one model, not the
    others). ``questions`` is advanced by one thread at a time.

    Returns
    -------
    tuple
        The first outcome ``enough`` accepts (the other models are stopped), or ``None``; and the
        number of questions asked.

    Raises
    ------
    KeyboardInterrupt
        On Ctrl-C, once every model has stopped.
    """
    lock = threading.Condition()
    again: deque[tuple[Counts, float]] = deque()  # not answered in time: asked again, for longer
    busy = [False] * len(models)
    found: list[CpsatOutcome] = []
    errors: list[BaseException] = []
    asked = 0
    fresh = True  # questions may still come
    halted = False  # Ctrl-C: no question more

    def next_question(lane: int) -> tuple[Counts, float] | None:
        nonlocal fresh
        with lock:
            busy[lane] = False
            lock.notify_all()
            while not (found or errors or halted or deadline.expired()):
                if fresh:
                    question = next(questions, None)  # one thread at a time: the lock is held
                    if question is not None:
                        busy[lane] = True
                        return question
                    fresh = False
                if again:
                    busy[lane] = True
                    return again.popleft()
                if not any(busy):
                    return None
                lock.wait(0.05)  # another model may yet leave a question unanswered
            return None

    def lane(index: int) -> None:
        nonlocal asked
        model = models[index]
        try:
            while (question := next_question(index)) is not None:
                counts, allowed = question
                began = time.perf_counter()
                outcome = model.ask(counts, deadline.cap(allowed))
                with lock:
                    asked += 1
                    if enough(counts, outcome) and not found:
                        found.append(outcome)
                        for other in models:
                            if other is not model:
                                other.stop()
                    elif (
                        outcome.status == Status.NO_SOLUTION
                        and time.perf_counter() - began >= allowed / 2  # out of its time, not stopped
                        and not deadline.expired()
                    ):
                        again.append((counts, max(4 * allowed, 0.01)))
        except BaseException as error:  # handed to the caller below; the others end
            with lock:
                errors.append(error)
            for other in models:
                other.stop()

    threads = [
        threading.Thread(target=lane, args=(i,), name=f"themis-opt-ask-{i}", daemon=True) for i in range(len(models))
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.05)
    except KeyboardInterrupt:
        with lock:
            halted = True
        for model in models:
            model.stop()
        for thread in threads:
            thread.join()
        raise
    if errors:
        raise errors[0]
    return (found[0] if found else None), asked
