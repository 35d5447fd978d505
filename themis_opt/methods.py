"""The registry of scheduling methods.

``solve``, the command line, ``bench`` and the reports read methods from here
and nowhere else; this module imports nothing heavy, so the command line can
list the methods without loading a solver. A method's entry names the
function that runs it (``runner``), imported when it first runs: a new method
is one entry here and its function.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from themis_opt.errors import InputError
from themis_opt.sim.queues import QUEUE_POLICIES, Intra

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.bounds.programs import Memo
    from themis_opt.budget import Deadline
    from themis_opt.instance import Instance
    from themis_opt.params import SolveParams
    from themis_opt.result import Bounds, Result
    from themis_opt.schedule import Schedule


MethodName = Literal["baseline", "themis", "balanced", "cpsat"]


@dataclass(frozen=True)
class MethodCall:
    """Everything a method's runner is given: the instance, ``solve``'s options and what it prepared.

    Parameters
    ----------
    instance
        The instance.
    variant
        The name the method was asked for by (the result's label).
    intra
        The intra-dimension policy asked for, ``None`` for the method's own.
    deadline, time_limit, t0
        When to be done, the limit it comes from, and when the call began (``time.perf_counter``).
    bounds
        The bounds computed for the instance; the result reports them as ``report_programs`` says
        (:func:`~themis_opt.bounds.reported`).
    memo
        The load programs' answers, shared by the call's stages.
    params, workers, seed, quantum_ns, log, warm
        As :func:`~themis_opt.solving.solve` takes them.
    """

    instance: Instance
    variant: str
    intra: Intra | None
    deadline: Deadline
    time_limit: float
    t0: float
    bounds: Bounds
    report_programs: bool
    memo: Memo
    params: SolveParams
    workers: int | None = None
    seed: int = 0
    quantum_ns: float | None = None
    log: bool = False
    warm: Schedule | None = None


@dataclass(frozen=True)
class Method:
    """One scheduling method, as solve, the CLI, bench and reports know it.

    Parameters
    ----------
    name
        What users type.
    orders
        How it chooses every chunk's order, in a few words.
    default_intra
        The intra-dimension policy that times it by default; ``None`` when it
        tries both (balanced) or sequences the dimensions itself (cpsat).
    searches
        Whether it runs CP-SAT.
    load_bounds
        Whether it computes the solver-based load bounds by default (cheap
        methods report only the bounds that need no solver unless given more).
    variants
        The runs bench and ``solve --method all`` make of it: the name, or
        ``name-intra`` for each intra-dimension policy worth comparing.
    runner
        The function that runs it, ``module:function``, taking a
        :class:`MethodCall` and returning the :class:`~themis_opt.result.Result`.
    """

    name: MethodName
    orders: str
    default_intra: Intra | None
    searches: bool
    load_bounds: bool
    variants: tuple[str, ...]
    runner: str

    def run(self, call: MethodCall) -> Result:
        """Run the method (its module is imported on first use)."""
        module, _, function = self.runner.partition(":")
        result: Result = getattr(importlib.import_module(module), function)(call)
        return result


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "baseline",
            "one fixed order for every chunk",
            Intra.FIFO,
            False,
            False,
            ("baseline",),
            "themis_opt.heuristics:run_baseline",
        ),
        Method(
            "themis",
            "Themis's greedy load balancer",
            Intra.SCF,
            False,
            False,
            ("themis-fifo", "themis-scf"),
            "themis_opt.heuristics:run_themis",
        ),
        Method(
            "balanced",
            "order counts of the load bounds, spread evenly",
            None,
            False,
            True,
            ("balanced",),
            "themis_opt.heuristics:run_balanced",
        ),
        Method(
            "cpsat",
            "CP-SAT chooses orders and sequences",
            None,
            True,
            True,
            ("cpsat",),
            "themis_opt.pipeline:run_cpsat",
        ),
    )
}
assert set(METHODS) == set(get_args(MethodName))
VARIANTS = tuple(v for m in METHODS.values() for v in m.variants)  # what bench runs, in this order


def resolve_method(method: str, intra: str | None = None) -> tuple[str, str | None]:
    """``(method, intra)`` from a method name or a variant: ``themis-fifo`` is ``("themis", "fifo")``.

    Raises
    ------
    InputError
        On an unknown name, or a variant whose policy contradicts ``intra``.
    """
    if not isinstance(method, str):
        raise InputError("method", f"must be a name, got {method!r}")
    if method not in method_names():
        raise InputError("method", f"must be one of {', '.join(method_names())}, got {method!r}")
    name, _, policy = method.partition("-")
    if not policy:
        return method, intra
    if intra is not None and intra != policy:
        raise InputError("intra", f"is {intra!r} but the method {method!r} says {policy!r}")
    return name, policy


def method_names() -> tuple[str, ...]:
    """Every name ``solve`` and bench take: the methods, then each with its intra-dimension policy
    (``themis-fifo``; not cpsat, which sequences the dimensions itself).
    """
    names = list(METHODS)
    for m in METHODS.values():
        names += [f"{m.name}-{intra}" for intra in QUEUE_POLICIES if not m.searches]
    return tuple(names)
