"""Assignments asked of capped models at once: the first good answer ends the call, slow questions
come back with more time, Ctrl-C stops every model."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from themis_opt.budget import Deadline
from themis_opt.cpsat import CappedModel, ask_at_once
from themis_opt.policies import baseline_orders, themis_orders
from themis_opt.result import Status
from themis_opt.sim import simulate
from themis_opt.validator import validate

from ..conftest import brute_force, load


@dataclass
class Answer:
    status: Status
    schedule: Any = None


@dataclass
class Scripted:
    """A stand-in for a capped model: each question answers as ``script`` says, after ``delay``
    seconds, or blocks until stopped where the script says ``None``."""

    script: dict[str, float | None]  # the seconds each question needs to be answered; None: never
    asked: list[tuple[str, float]] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    warm: Any = None

    def ask(self, counts: str, deadline: Deadline) -> Answer:
        allowed = deadline.remaining()
        self.asked.append((counts, round(allowed, 2)))
        needs = self.script[counts]
        if needs is None or needs > allowed:
            self.stopped.wait(allowed if needs is None else min(allowed, needs))
            return Answer(Status.NO_SOLUTION)
        time.sleep(needs)
        return Answer(Status.FEASIBLE if counts.startswith("yes") else Status.INFEASIBLE)

    def stop(self) -> None:
        self.stopped.set()


def _good(counts: Any, outcome: Any) -> bool:
    return outcome.status is Status.FEASIBLE


def test_the_first_good_answer_ends_the_call_and_stops_the_other_model() -> None:
    script = {"never": None, "no": 0.01, "yes": 0.05}
    a, b = Scripted(script), Scripted(script)
    t0 = time.perf_counter()
    found, asked = ask_at_once([a, b], iter([("never", 30.0), ("no", 1.0), ("yes", 1.0)]), Deadline.after(30), _good)
    assert found is not None and found.status is Status.FEASIBLE and asked == 3
    assert time.perf_counter() - t0 < 2 and a.stopped.is_set()  # the model stuck on "never" was stopped
    assert [q for q, _ in a.asked] == ["never"] and [q for q, _ in b.asked] == ["no", "yes"]


def test_a_question_not_answered_in_its_seconds_comes_back_with_four_times_as_long() -> None:
    script = {"slow": 0.3, "no1": 0.0, "no2": 0.0}
    one = Scripted(script)
    questions = iter([("slow", 0.1), ("no1", 0.1), ("no2", 0.1)])
    found, asked = ask_at_once([one], questions, Deadline.after(30), lambda _, o: o.status is Status.FEASIBLE)
    # slow (0.1 s: no answer), the two others, then slow again with 0.4 s: answered infeasible
    assert found is None and asked == 4
    assert [q for q, _ in one.asked] == ["slow", "no1", "no2", "slow"] and one.asked[-1][1] == pytest.approx(
        0.4, abs=0.02
    )


def test_ctrl_c_stops_every_model_at_once() -> None:
    import _thread

    script = {"never1": None, "never2": None}
    a, b = Scripted(script), Scripted(script)
    threading.Timer(0.3, _thread.interrupt_main).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        ask_at_once([a, b], iter([("never1", 30.0), ("never2", 30.0)]), Deadline.after(30), _good)
    assert time.perf_counter() - t0 < 2 and a.stopped.is_set() and b.stopped.is_set()


def test_two_capped_models_find_a_schedule_at_the_optimum() -> None:
    instance = load("tiny_3d")
    optimum = brute_force(instance)
    warm = simulate(instance, baseline_orders(instance), "fifo")
    if warm.makespan <= optimum * (1 + 1e-6):
        warm = simulate(instance, themis_orders(instance), "fifo")
    models = [
        CappedModel(
            instance, warm, optimum * (1 + 1e-9), lower_bound=0.0, workers=1, seed=0, deadline=Deadline.after(20)
        )
        for _ in range(2)
    ]
    cls, orders = instance.chunk_classes[0], instance.orders[0]
    every = (
        {cls: {o: c.count(o) for o in orders}} for c in itertools.combinations_with_replacement(orders, len(cls.chunks))
    )
    found, asked = ask_at_once(models, ((counts, 5.0) for counts in every), Deadline.after(20), _good)
    assert found is not None and asked >= 1 and validate(instance, found.schedule) == []
    assert found.schedule.makespan == pytest.approx(optimum, rel=1e-9)
