"""The registry of scheduling methods.

``solve``, the command line, ``bench`` and the reports read methods from here
and nowhere else; this module imports nothing heavy, so the command line can
list the methods without loading a solver. A method's entry names the
function that runs it (``runner``), imported when it first runs: a new method
is one entry here and its function.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from themis_opt.errors import InputError
from themis_opt.sim.queues import QUEUE_POLICIES, Intra, queue_policy

if TYPE_CHECKING:  # pragma: no cover
    from themis_opt.bounds.programs import Memo
    from themis_opt.budget import Deadline
    from themis_opt.instance import Instance
    from themis_opt.params import SolveParams
    from themis_opt.result import Bounds, Result
    from themis_opt.schedule import Schedule


MethodName = Literal["baseline", "themis", "balanced", "cpsat"]


@dataclass(frozen=True)
class SolveOptions:
    """One solve's options, checked once on construction and read as they are by every stage.

    :meth:`of` makes them from what users type (a method or a variant such as ``themis-fifo``);
    the command line makes them before it loads anything, so a bad option costs no work.

    Parameters
    ----------
    method
        The method's registry name (:data:`METHODS`).
    variant
        The name the method was asked for by (the result's label).
    intra
        The intra-dimension policy asked for (a name of
        :data:`~themis_opt.sim.queues.QUEUE_POLICIES`), ``None`` for the method's own; a method
        that sequences the dimensions itself (cpsat) takes none.
    time_limit
        Seconds the whole call may take, every stage included.
    workers, seed
        CP-SAT's worker threads and the local searches at once (``None``: the cores available),
        and the searches' random seed.
    quantum_ns
        CP-SAT's time quantum (``None``: chosen per instance); only a method that runs CP-SAT takes it.
    log
        Stream the solver's log through :mod:`logging`.
    bound_set
        Which bounds the result reports (:data:`~themis_opt.bounds.BOUND_SETS`).
    """

    method: MethodName
    variant: str
    intra: str | None = None
    time_limit: float = 10.0
    workers: int | None = None
    seed: int = 0
    quantum_ns: float | None = None
    log: bool = False
    bound_set: str = "auto"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError("method", f"must be one of {', '.join(METHODS)}, got {self.method!r}")
        searches = METHODS[self.method].searches
        if self.intra is not None:
            object.__setattr__(self, "intra", queue_policy(self.intra).name)
            if searches:
                raise InputError("intra", f"applies to one heuristic, not to {self.method} (it sequences itself)")
        limit = self.time_limit
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise InputError("time_limit", f"must be a number > 0, got {limit!r}")
        if not math.isfinite(limit) or limit > 1e6:
            raise InputError("time_limit", f"must be at most 1e6 seconds, got {limit!r}")
        workers = self.workers
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024
        ):
            raise InputError("workers", f"must be an integer from 1 to 1024, got {workers!r}")
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
            raise InputError("seed", f"must be an integer from 0 to 2^31 - 1, got {seed!r}")
        quantum = self.quantum_ns
        if quantum is not None:
            if (
                isinstance(quantum, bool)
                or not isinstance(quantum, (int, float))
                or not (quantum > 0 and math.isfinite(quantum))
            ):
                raise InputError("quantum_ns", f"must be a finite number > 0, got {quantum!r}")
            if not searches:
                raise InputError("quantum_ns", f"applies to cpsat only, not to {self.method}")
        if not isinstance(self.log, bool):
            raise InputError("log", f"must be true or false, got {self.log!r}")

    @classmethod
    def of(cls, method: str, intra: str | None = None, **options: Any) -> SolveOptions:
        """The options of a call of ``method`` (a method or a variant: ``themis-fifo`` is themis with
        fifo) with ``intra`` and ``options`` (the other fields).

        Raises
        ------
        InputError
            On an unknown name, a variant whose policy contradicts ``intra``, or an option out of range.
        """
        name, policy = resolve_method(method, intra)
        variant = method
        if policy is not None and variant == name and not METHODS[name].searches:
            variant = f"{name}-{policy}"
        return cls(name, variant, policy, **options)  # type: ignore[arg-type]  # a name the constructor checks


@dataclass(frozen=True)
class MethodCall:
    """Everything a method's runner is given: the instance, the call's options and what it prepared.

    Parameters
    ----------
    instance
        The instance.
    options
        The call's options (:class:`SolveOptions`).
    deadline, t0
        When to be done, and when the call began (``time.perf_counter``).
    bounds
        The bounds computed for the instance; the result reports them as ``report_programs`` says
        (:func:`~themis_opt.bounds.reported`).
    memo
        The load programs' answers, shared by the call's stages.
    params
        Every tuning number.
    warm
        A valid schedule of the instance for cpsat to start from besides the heuristics'.
    """

    instance: Instance
    options: SolveOptions
    deadline: Deadline
    t0: float
    bounds: Bounds
    report_programs: bool
    memo: Memo
    params: SolveParams
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
