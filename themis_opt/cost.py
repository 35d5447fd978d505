"""The congestion-free analytical cost model (ASTRA-sim's analytical backend).

A phase runs one step of a chunk's collective on one dimension. Its algorithm
sends messages in steps; a step costs the endpoint delay, then its slowest
message::

    step = endpoint_delay + hops * latency + message_overhead + message bytes / link bandwidth

A message's link bandwidth is the dimension's bandwidth on a ring or switch
and one link's share, ``bandwidth / (physical_size - 1)``, on a
fully-connected dimension; ``hops`` is 1 between neighbours of a ring (the
shorter way round: more between NPUs further apart), 1 on a fully-connected
dimension and 2 through a switch. When an NPU sends several messages at once
on a ring or switch dimension they share its bandwidth there, unless the
network is ``congestion_unaware`` (then each gets the link's, as in
ASTRA-sim's analytical backend). On n NPUs, with input x:

* ring: n - 1 steps of x / n to the next NPU (reduce-scatter), of x
  (all-gather), 2 (n - 1) of x / n (all-reduce), n (n - 1) / 2 of x / n
  (all-to-all);
* direct: one step to every other NPU at once, x / n each (x for an
  all-gather; two steps for an all-reduce);
* halving-doubling: log2 n steps to partners 1, 2, 4, ... apart with x / 2,
  x / 4, ... (reduce-scatter; the reverse for an all-gather, both for an
  all-reduce);
* double binary tree: always an all-reduce of the whole input, 2 log2 n
  steps of x up a binary tree and back down (a node sends to both children
  at once on the way down);
* the flattened ``one_*`` algorithms: ring, direct or halving-doubling over
  every NPU of the network at once, each message costed on the outermost
  dimension in which its two NPUs differ (the innermost on a network of
  ``innermost_charge``, as ASTRA-sim 2.x does).

A ring's steps are relayed NPU to NPU, so it lasts as long as the dearest
``steps`` consecutive links of the ring. With one hop between every pair of
neighbours this is the familiar ``steps * (latency + endpoint_delay) +
bytes_sent / bandwidth`` (``bytes_sent`` = x (n - 1) / n for a reduce-scatter,
x (n - 1) for an all-gather).

A reduce-scatter phase turns x bytes into x / n, an all-gather x into x n,
an all-reduce and an all-to-all keep x. A network's ``phase_delay_ns`` is
added once to every phase.

A collective in a communicator **group** smaller than the network runs as
ASTRA-sim 2.x runs one: one ring over the group's NPUs in the group's order,
a single phase per chunk (an all-reduce, a reduce-scatter or an all-gather),
whatever the dimensions' algorithms; each message is costed in the lowest
dimension in which its two NPUs differ (``floor(hops x latency + bytes /
bandwidth)`` there), every step pays a fixed :data:`GROUP_STEP_DELAY_NS`
and a reducing step its reduction; an NPU sends each step once it has
received the one before, so a phase lasts as long as the slowest NPU's
chain of receipts (:func:`group_ring_ns`). Each NPU starts a collective's
next chunk as soon as it has finished the one before, waiting for no other
NPU, so on links of unequal costs its chunks make one chain of receipts
back along the ring (``active_chunks`` such chains side by side), which
lasts as long as the dearest run of all their steps' links, not every
chunk its own dearest run; each chunk takes an equal share of that chain
(:func:`group_chain_ns`, :func:`group_chunk_ns`). The collective ends with
its last NPU: where 2.x's NPUs end it at different times (unequal links,
and chunks x steps not a multiple of the group's size), the next collective
starts for every NPU at the latest.

A **send** (a collective of kind ``send``, point to point) is one message
from its group's first NPU to its second, one phase on the lowest dimension
in which they differ, costed as ASTRA-sim 2.x costs one message there:
``hops x latency + bytes / link bandwidth`` (plus the dimension's message
overhead), truncated to whole ns as the network's messages are, with no
endpoint delay and no chunking (:func:`send_ns`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from themis_opt.instance import Algorithm, AllReducePhases, Collective, Dimension, Instance, Kind, Network, Op, Topology

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a chunk, untimed: where it runs, what it moves, how long.

    Parameters
    ----------
    dim
        Dimension index.
    op
        What the phase does (a double binary tree always all-reduces).
    bytes_in, bytes_out
        Data held before and after the phase (real numbers: no rounding).
    duration
        Duration in ns under the cost model.
    """

    dim: int
    op: Op
    bytes_in: float
    bytes_out: float
    duration: float


# ------------------------------------------------------------------ messages


def link_bytes_per_ns(dim: Dimension) -> float:
    """Bandwidth one message gets in ``dim``, bytes per ns."""
    if dim.topology is Topology.FULLY_CONNECTED:
        return dim.bytes_per_ns / max(1, dim.physical_size - 1)
    return dim.bytes_per_ns


def hops_apart(dim: Dimension, distance: int) -> int:
    """Hops between two NPUs ``distance`` positions apart along ``dim`` (its own positions)."""
    match dim.topology:
        case Topology.RING:
            apart = distance * dim.stride
            return min(apart, dim.physical_size - apart)
        case Topology.FULLY_CONNECTED:
            return 1
        case Topology.SWITCH:
            return 2
        case _ as unreachable:
            assert_never(unreachable)


def _ring_latency(dim: Dimension, steps: int, whole: bool) -> float:
    """Hop latency of the dearest ``steps`` consecutive links of the ring ``dim`` (relayed, cyclic).

    Every link joins neighbours one position apart, except the last, which
    closes the ring from the far end: on a dimension carved from a larger
    ring it spans ``size - 1`` positions. ``whole``: each link's latency in
    whole ns.
    """
    n = dim.size
    near, far = (_hop_latency(dim, hops_apart(dim, k), whole) for k in (1, n - 1))
    full, rest = divmod(steps, n)
    cycle = (n - 1) * near + far
    return full * cycle + (max(rest * near, (rest - 1) * near + far) if rest else 0.0)


def _hop_latency(dim: Dimension, hops: int, whole: bool) -> float:
    return float(math.floor(hops * dim.latency_ns)) if whole else hops * dim.latency_ns


def _shares_port(network: Network, dim: Dimension) -> bool:
    """Whether the messages an NPU sends at once in ``dim`` share its bandwidth."""
    return not network.congestion_unaware and dim.topology is not Topology.FULLY_CONNECTED


def _steps_of(network: Network, dim: Dimension, algorithm: Algorithm, op: Op) -> tuple[tuple[int, int, float], ...]:
    """The steps of one phase as (hops, messages sent at once, bytes per message per input byte).

    A ring is not listed step by step (its steps are relayed): see :func:`_duration`.
    """
    steps = algorithm.spec.steps
    if steps is None:
        raise ValueError(f"{algorithm.value} is not listed step by step")
    return steps(dim.size, functools.partial(hops_apart, dim), op)


def ring_steps(n: int, op: Op) -> tuple[int, float]:
    """A ring's relayed steps on ``n`` NPUs and bytes per message per input byte."""
    match op:
        case Op.REDUCE_SCATTER:
            return n - 1, 1 / n
        case Op.ALL_GATHER:
            return n - 1, 1.0
        case Op.ALL_REDUCE:
            return 2 * (n - 1), 1 / n
        case Op.ALL_TO_ALL:
            return n * (n - 1) // 2, 1 / n
        case Op.SEND:
            raise ValueError("a send is one message, not a ring's steps")
        case _ as unreachable:
            assert_never(unreachable)


def reduced_messages(algorithm: Algorithm, op: Op, n: int, x: float) -> tuple[float, ...]:
    """The bytes of each received message of a phase that is reduced before the next is sent
    (ASTRA-sim 2.x's packet bundles: only reduce-scatter and all-reduce reduce, and not every
    receipt), for a phase of ``op`` on ``x`` bytes over ``n`` NPUs.
    """
    reductions = algorithm.spec.reductions
    if reductions is None:
        if op not in (Op.REDUCE_SCATTER, Op.ALL_REDUCE):
            return ()
        raise ValueError(f"{algorithm.value}: reductions at a local memory bandwidth are not modelled")
    return reductions(op, n, x)


def reduction_ns(network: Network, algorithm: Algorithm, op: Op, n: int, x: float) -> float:
    """The time a phase's reductions take at the network's ``reduction_gbps`` (0 without one):
    three times each reduced message's bytes over it, each product's factor in whole ns.
    """
    if network.reduction_gbps is None:
        return 0.0
    return sum(3.0 * math.floor(s / network.reduction_gbps) for s in reduced_messages(algorithm, op, n, x))


@functools.lru_cache(maxsize=8192)
def _duration(network: Network, d: int, algorithm: Algorithm, op: Op, x: float, quiet: bool) -> float:
    """A phase of ``op`` on ``x`` bytes on dimension ``d``; ``quiet``: its wire time alone
    (no delay, latency or overhead). A network of ``integer_messages`` keeps every message's
    latency and bytes-over-bandwidth time in whole ns, as ASTRA-sim 1.0's analytical backend does;
    one of ``integer_message_sums`` their sum, as 2.x's does.
    """
    dim = network.dimensions[d]
    whole = network.integer_messages or network.integer_message_sums  # quiet: floor(w) <= floor(l + w)
    delay, overhead = (0.0, 0.0) if quiet else (network.endpoint_delay_ns, dim.message_overhead_ns)
    total = 0.0 if quiet else network.phase_delay_ns + reduction_ns(network, algorithm, op, dim.size, x)
    link = link_bytes_per_ns(dim)

    def wire(seconds: float) -> float:
        return float(math.floor(seconds)) if whole else seconds

    if algorithm is Algorithm.RING:
        steps, per = ring_steps(dim.size, op)
        if network.integer_message_sums and not quiet:  # every message to a neighbour, truncated whole
            message = math.floor(hops_apart(dim, 1) * dim.latency_ns + per * x / link)
            return total + steps * (delay + overhead + message)
        hops = 0.0 if quiet else _ring_latency(dim, steps, whole)
        return total + steps * (delay + overhead + wire(per * x / link)) + hops
    shared = _shares_port(network, dim)
    for hops, messages, per in _steps_of(network, dim, algorithm, op):
        moved = messages * per * x / dim.bytes_per_ns if shared else per * x / link
        if network.integer_message_sums and not quiet:
            total += delay + overhead + math.floor(hops * dim.latency_ns + moved)
            continue
        latency = 0.0 if quiet else _hop_latency(dim, hops, whole)
        total += delay + latency + overhead + wire(moved)
    return total


# ----------------------------------------------------------------- flattened


@functools.lru_cache(maxsize=64)
def _flat_links(network: Network) -> tuple[np.ndarray, np.ndarray]:
    """Per NPU u, the dimension u and u + 1 (mod N) are charged on, and its hops there."""
    import numpy as np

    npus = np.arange(network.num_npus)
    return _charged(network, npus, (npus + 1) % network.num_npus)


def _charged(network: Network, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each pair of NPU ids: the dimension their message is charged on (the outermost where
    they differ, or with ``innermost_charge`` the innermost), and the hops there.
    """
    import numpy as np

    dim_of = np.full(src.shape, -1)
    hops = np.zeros(src.shape, dtype=np.int64)
    stride = 1
    for d, dim in enumerate(network.dimensions):
        a, b = (src // stride) % dim.size, (dst // stride) % dim.size
        differ = a != b
        if network.innermost_charge:
            differ &= dim_of < 0
        apart = np.abs(a - b)
        match dim.topology:
            case Topology.RING:
                here = np.minimum(apart, dim.size - apart)
            case Topology.FULLY_CONNECTED:
                here = np.ones_like(apart)
            case Topology.SWITCH:
                here = np.full_like(apart, 2)
            case _ as unreachable:
                assert_never(unreachable)
        dim_of = np.where(differ, d, dim_of)
        hops = np.where(differ, here, hops)
        stride *= dim.size
    return dim_of, hops


def _per_dim(network: Network, attribute: str) -> np.ndarray:
    import numpy as np

    return np.array([getattr(dim, attribute) for dim in network.dimensions], dtype=float)


def _link_rates(network: Network) -> np.ndarray:
    import numpy as np

    return np.array([link_bytes_per_ns(dim) for dim in network.dimensions])


@functools.lru_cache(maxsize=4096)
def _flattened_duration(network: Network, algorithm: Algorithm, op: Op, x: float, quiet: bool) -> float:
    """A flattened algorithm's phase over every NPU of ``network`` (see the module's docstring);
    ``quiet``: its wire time alone.
    """
    if quiet:
        return _flattened_steps(network, algorithm, op, x, quiet)
    unflattened = algorithm.spec.unflattened
    assert unflattened is not None, f"{algorithm.value} is not flattened"
    reductions = reduction_ns(network, unflattened, op, network.num_npus, x)
    return network.phase_delay_ns + reductions + _flattened_steps(network, algorithm, op, x, quiet)


def _flattened_steps(network: Network, algorithm: Algorithm, op: Op, x: float, quiet: bool) -> float:
    import numpy as np

    n = network.num_npus
    delay = 0.0 if quiet else network.endpoint_delay_ns
    zero = np.zeros(network.num_dims)
    latency = zero if quiet else _per_dim(network, "latency_ns")
    overhead = zero if quiet else _per_dim(network, "message_overhead_ns")
    link = _link_rates(network)

    def message(hops: np.ndarray, d: np.ndarray, wire: np.ndarray) -> np.ndarray:
        """Each message's time: its hops' latency and overhead, then its wire time."""
        latencies, wires = hops * latency[d], wire
        if network.integer_message_sums and not quiet:  # 2.x: latency and bytes truncated as one sum
            whole: np.ndarray = np.floor(latencies + wires) + overhead[d]
            return whole
        if network.integer_messages or network.integer_message_sums:
            latencies, wires = np.floor(latencies), np.floor(wires)
        out: np.ndarray = latencies + overhead[d] + wires
        return out

    match algorithm.spec.unflattened:  # what runs over every NPU
        case Algorithm.RING:
            steps, per = ring_steps(n, op)
            dim_of, hops = _flat_links(network)
            cost = delay + message(hops, dim_of, per * x / link[dim_of])
            full, rest = divmod(steps, n)
            window = 0.0
            if rest:  # the dearest run of ``rest`` consecutive links, cyclic
                sums = np.concatenate(([0.0], np.cumsum(np.concatenate((cost, cost)))))
                window = float(np.max(sums[rest : rest + n] - sums[:n]))
            return float(full * cost.sum() + window)
        case Algorithm.DIRECT:
            npus = np.arange(1, n)
            dim_of, hops = _charged(network, np.zeros_like(npus), npus)
            per = 1.0 if op is Op.ALL_GATHER else 1 / n
            slowest = 0.0
            for d, dim in enumerate(network.dimensions):
                here = dim_of == d
                if not here.any():
                    continue
                shared = _shares_port(network, dim)
                wire = int(here.sum()) * per * x / dim.bytes_per_ns if shared else per * x / link[d]
                longest = message(hops[here].max(keepdims=True), np.array([d]), np.array([wire]))
                slowest = max(slowest, float(longest[0]))
            return (2 if op is Op.ALL_REDUCE else 1) * (delay + slowest)
        case Algorithm.HALVING_DOUBLING:
            log = int(math.log2(n))
            npus = np.arange(n)
            scatter = [(k, 1 / 2 ** (k + 1)) for k in range(log)]
            gather = [(k, n / 2 ** (k + 1)) for k in reversed(range(log))]
            match op:
                case Op.REDUCE_SCATTER:
                    plan = scatter
                case Op.ALL_GATHER:
                    plan = gather
                case Op.ALL_REDUCE:
                    plan = scatter + [(k, per / n) for k, per in gather]
                case Op.ALL_TO_ALL:
                    raise ValueError("one_halving_doubling cannot run an all-to-all")
                case Op.SEND:
                    raise ValueError("a send is one message, not a flattened algorithm's")
                case _ as unreachable:
                    assert_never(unreachable)
            total = 0.0
            for k, per in plan:
                partner = npus ^ (1 << k)
                dim_of, hops = _charged(network, npus, partner)
                total += delay + float(message(hops, dim_of, per * x / link[dim_of]).max())
            return total
        case _:
            raise ValueError(f"{algorithm.value} is not flattened, or runs nothing the flattened cost model times")


def flattened_ring_stalls(network: Network, op: Op, x: float) -> bool:
    """Whether a ``one_ring`` phase of ``op`` on ``x`` bytes overtakes itself in ASTRA-sim 1.0.

    Its NPUs relay every step to the next; an NPU sends step s + 1 before
    its successor has asked for step s when two consecutive links upstream,
    plus an endpoint delay, take less than its own link. ASTRA-sim's
    backend then keeps one of the two messages (they have the same key) and
    the collective never finishes.
    """
    import numpy as np

    n = network.num_npus
    steps, per = ring_steps(n, op)
    dim_of, hops = _flat_links(network)
    latency, overhead = _per_dim(network, "latency_ns"), _per_dim(network, "message_overhead_ns")
    wire = per * x / _link_rates(network)[dim_of]
    link = hops * latency[dim_of] + overhead[dim_of] + wire
    if network.integer_messages:
        link = np.floor(hops * latency[dim_of]) + overhead[dim_of] + np.floor(wire)
    pairs = link + np.roll(link, -1)  # links k and k + 1
    reach = min(steps - 2, n)  # s = 1 .. steps - 2: pairs k = i - 1 - s
    if reach < 1:
        return False
    for i in range(n):
        ks = (i - 1 - np.arange(1, reach + 1)) % n
        if float(pairs[ks].min()) + network.endpoint_delay_ns < float(link[i]):
            return True
    return False


# -------------------------------------------------------------------- groups

GROUP_STEP_DELAY_NS = 10.0  # ASTRA-sim 2.x: a group's ring is "local", its MemBus delay fixed, not endpoint-delay


def group_links(network: Network, group: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per link of a group's ring (member k to member k + 1, cyclic): the dimension its messages are
    costed in (the lowest in which the two NPUs differ) and their hops there.
    """
    import numpy as np

    src = np.array(group, dtype=np.int64)
    dims, hops = _charged(_innermost(network), src, np.roll(src, -1))
    return tuple(int(d) for d in dims), tuple(int(h) for h in hops)


@functools.lru_cache(maxsize=64)
def _innermost(network: Network) -> Network:
    """``network`` charging every message in the lowest dimension its NPUs differ in (ASTRA-sim 2.x's rule)."""
    import dataclasses

    return network if network.innermost_charge else dataclasses.replace(network, innermost_charge=True)


def _group_steps(
    network: Network, group: tuple[int, ...], op: Op, x: float, quiet: bool
) -> tuple[np.ndarray, float, float, int, int]:
    """A phase of ``op`` on ``x`` bytes on a group's ring: each link's message cost, the delay of a
    step, the reduction of a reduced receipt, the steps, and how many of the first receipts are reduced.
    """
    import numpy as np

    n = len(group)
    if op is Op.ALL_TO_ALL:
        raise ValueError("a group's ring runs no all-to-all here")
    dims, hops = (np.array(v) for v in group_links(network, group))
    steps = 2 * (n - 1) if op is Op.ALL_REDUCE else n - 1
    message = math.floor(x) if op is Op.ALL_GATHER else math.floor(x) // n
    rate = np.array([link_bytes_per_ns(network.dimensions[d]) for d in dims])
    reducing = n - 1 if op in (Op.REDUCE_SCATTER, Op.ALL_REDUCE) else 0
    if quiet:
        cost: np.ndarray = message / rate
        return cost, 0.0, 0.0, steps, reducing
    latency = np.array([network.dimensions[d].latency_ns for d in dims]) * hops
    overhead = np.array([network.dimensions[d].message_overhead_ns for d in dims])
    cost = np.floor(latency + message / rate) + overhead
    reduction = 0.0 if network.reduction_gbps is None else 3.0 * math.floor(message / network.reduction_gbps)
    return cost, GROUP_STEP_DELAY_NS, reduction, steps, reducing


@functools.lru_cache(maxsize=4096)
def group_ring_ns(network: Network, group: tuple[int, ...], op: Op, x: float, quiet: bool = False) -> float:
    """A phase of ``op`` on ``x`` bytes (an all-gather's: each NPU's shard) on a group's ring, as ASTRA-sim 2.x
    times it (see the module's docstring), alone: every NPU starts it at once; ``quiet``: its wire time
    alone (no delays, latencies or reductions).

    Steps: n - 1 (reduce-scatter, all-gather) or 2 (n - 1) (all-reduce) of ``x // n`` bytes (an all-gather's:
    ``x``); the first n - 1 receipts of a reduce-scatter or an all-reduce are reduced.
    """
    return group_chain_ns(network, group, op, (x,), quiet)


@functools.lru_cache(maxsize=4096)
def group_chain_ns(
    network: Network, group: tuple[int, ...], op: Op, sizes: tuple[float, ...], quiet: bool = False
) -> float:
    """Phases of ``op`` on ``sizes`` bytes one after another on a group's ring, as ASTRA-sim 2.x runs the
    chunks of a collective there: every NPU starts the first at once, then each starts the next as soon as
    it has finished the one before, waiting for no other NPU. The latest NPU's end.

    An NPU sends a step once it has received the step before (and its receipt is posted with its send), so
    its chain of receipts runs back along the ring across the phases: on links of unequal costs the
    phases together last as long as the dearest run of all their steps, consecutive links, not each
    phase its own dearest run. ``quiet``: the wire time alone.
    """
    import numpy as np

    start = np.zeros(len(group))
    for x in sizes:
        cost, delay, reduction, steps, reducing = _group_steps(network, group, op, x, quiet)
        if np.all(cost == cost[0]) and np.all(start == start[0]):  # every link alike: the chain is every NPU's
            start = start + (delay + steps * (cost[0] + delay) + reducing * reduction)
            continue
        sent = start + delay  # each NPU's send of the current step (member k sends to member k + 1)
        for s in range(steps):
            received = np.maximum(np.roll(sent + cost, 1), sent)  # member k receives from member k - 1
            sent = received + delay + (reduction if s < reducing else 0.0)
        start = sent
    return float(start.max())


def group_chunk_ns(network: Network, coll: Collective, op: Op, chunk_bytes: float) -> float:
    """A chunk's share of its group collective's phases (see the module's docstring): ``op`` on a chunk of
    ``chunk_bytes`` of ``coll``, whose chunks run ``network.active_chunks`` at once.

    2.x's NPUs run a collective's chunks on its group's ring one after another without waiting for one
    another (:func:`group_chain_ns`), ``active_chunks`` such chains side by side. Chunks of one size share
    the longest chain's time equally; with a last chunk of another size (one chunk at a time) every other
    chunk takes an equal share of their own chain's and the last what it adds. A chunk of a size ``coll``
    does not cut, or a last chunk of another size beside chunks at once: the chunk alone
    (:func:`group_ring_ns`).
    """
    n = len(coll.group)

    def phase_bytes(nbytes: int | float) -> float:
        return float(nbytes) / n if coll.kind is Kind.ALL_GATHER else float(nbytes)

    regular, last = phase_bytes(coll.chunk_bytes), phase_bytes(coll.last_chunk_bytes)
    chunk = phase_bytes(chunk_bytes)
    lanes = network.active_chunks
    if chunk not in (regular, last) or (regular != last and lanes > 1):
        return group_ring_ns(network, coll.group, op, chunk)
    if regular == last:
        longest = -(-coll.chunks // lanes)  # chunks in the longest chain
        return group_chain_ns(network, coll.group, op, (regular,) * longest) / longest
    before = group_chain_ns(network, coll.group, op, (regular,) * (coll.chunks - 1))
    if chunk == regular:
        return before / (coll.chunks - 1)
    return group_chain_ns(network, coll.group, op, (regular,) * (coll.chunks - 1) + (last,)) - before


@functools.lru_cache(maxsize=4096)
def send_ns(network: Network, src: int, dst: int, x: float, quiet: bool = False) -> float:
    """One message of ``x`` bytes from NPU ``src`` to NPU ``dst``, as ASTRA-sim 2.x's congestion-unaware
    backend costs it: in the lowest dimension in which the two differ, ``hops x latency + x / link
    bandwidth`` there, plus the dimension's message overhead; no endpoint delay. A network of
    ``integer_message_sums`` truncates the sum to whole ns (2.x), one of ``integer_messages`` each part.
    ``quiet``: the wire time alone.
    """
    dims, hops = group_links(network, (src, dst))
    dim = network.dimensions[dims[0]]
    wire = x / link_bytes_per_ns(dim)
    whole = network.integer_messages or network.integer_message_sums
    if quiet:
        return float(math.floor(wire)) if whole else wire
    latency = hops[0] * dim.latency_ns
    if network.integer_message_sums:
        return float(math.floor(latency + wire)) + dim.message_overhead_ns
    if network.integer_messages:
        return float(math.floor(latency) + math.floor(wire)) + dim.message_overhead_ns
    return latency + wire + dim.message_overhead_ns


# -------------------------------------------------------------------- phases


def performed(op: Op, algorithm: Algorithm) -> Op:
    """What a phase in the place of ``op`` does under ``algorithm``: a double binary tree all-reduces."""
    return algorithm.spec.performed(op)


def group_size(network: Network, kind: Kind, d: int) -> int:
    """NPUs one phase of a ``kind`` collective on dimension ``d`` spans (every NPU when flattened)."""
    return network.num_npus if network.flattened(kind) else network.dimensions[d].size


def phase_duration(network: Network, d: int, op: Op, bytes_in: float, algorithm: Algorithm | None = None) -> float:
    """Duration in ns of a phase of ``op`` with ``bytes_in`` on dimension ``d``.

    ``algorithm`` defaults to the dimension's algorithm for ``op`` (its
    all-reduce algorithm for reduce-scatter, all-gather and all-reduce
    phases, its all-to-all algorithm for all-to-all ones).
    """
    if algorithm is None:
        dim = network.dimensions[d]
        algorithm = dim.all_to_all_algorithm if op is Op.ALL_TO_ALL else dim.algorithm
    op = performed(op, algorithm)
    if algorithm.flattened:
        return _flattened_duration(network, algorithm, op, float(bytes_in), False)
    return _duration(network, d, algorithm, op, float(bytes_in), False)


def wire_time(network: Network, d: int, op: Op, bytes_in: float, algorithm: Algorithm) -> float:
    """The part of a phase's duration that its bytes take (no delay, latency or overhead)."""
    op = performed(op, algorithm)
    if algorithm.flattened:
        return _flattened_duration(network, algorithm, op, float(bytes_in), True)
    return _duration(network, d, algorithm, op, float(bytes_in), True)


def phase_plan_of(network: Network, kind: Kind, order: tuple[int, ...], merged: bool = False) -> list[tuple[int, Op]]:
    """The (dimension, place) of each phase of a chunk of ``kind`` taking ``order``.

    The place is the phase's part of the collective (a double binary tree
    all-reduces in either place); no two phases of a chunk share one.
    ``merged`` runs the last dimension of an all-reduce's order as one
    all-reduce phase (the baseline under ``local_bw_aware``).
    """
    match kind:
        case Kind.ALL_REDUCE:
            if network.all_reduce_phases is AllReducePhases.PER_DIMENSION:
                return [(d, Op.ALL_REDUCE) for d in order]
            if merged:
                rest = order[:-1]
                return (
                    [(d, Op.REDUCE_SCATTER) for d in rest]
                    + [(order[-1], Op.ALL_REDUCE)]
                    + [(d, Op.ALL_GATHER) for d in reversed(rest)]
                )
            return [(d, Op.REDUCE_SCATTER) for d in order] + [(d, Op.ALL_GATHER) for d in reversed(order)]
        case Kind.REDUCE_SCATTER:
            return [(d, Op.REDUCE_SCATTER) for d in order]
        case Kind.ALL_GATHER:
            return [(d, Op.ALL_GATHER) for d in order]
        case Kind.ALL_TO_ALL:
            return [(d, Op.ALL_TO_ALL) for d in order]
        case Kind.SEND:
            return [(d, Op.SEND) for d in order]
        case _ as unreachable:
            assert_never(unreachable)


def growth(op: Op, n: int) -> float:
    """How a phase of ``op`` on ``n`` NPUs scales the data it holds."""
    match op:
        case Op.REDUCE_SCATTER:
            return 1 / n
        case Op.ALL_GATHER:
            return float(n)
        case Op.ALL_REDUCE | Op.ALL_TO_ALL | Op.SEND:
            return 1.0
        case _ as unreachable:
            assert_never(unreachable)


def merges(instance: Instance, collective: int, baseline: bool) -> bool:
    """Whether a chunk of ``collective`` runs its last dimension as one all-reduce phase."""
    return (
        baseline
        and instance.collectives[collective].kind is Kind.ALL_REDUCE
        and instance.network.all_reduce_phases is AllReducePhases.LOCAL_BW_AWARE
    )


def merging_shortens(instance: Instance) -> bool:
    """Whether the baseline's merged all-reduce phase is shorter than the split phases it stands for
    (a double binary tree on the last dimension: one all-reduce instead of two), so that schedules
    that split every chunk cannot match it.
    """
    for c, coll in enumerate(instance.collectives):
        if merges(instance, c, baseline=True):
            order = instance.active_dims[c]  # an all-reduce's baseline order
            split = sum(p.duration for p in chunk_phases(instance, c, coll.chunk_bytes, order))
            merged = sum(p.duration for p in chunk_phases(instance, c, coll.chunk_bytes, order, merged=True))
            if merged < split * (1 - 1e-12):
                return True
    return False


GROUP_OPS = {
    Kind.ALL_REDUCE: Op.ALL_REDUCE,
    Kind.REDUCE_SCATTER: Op.REDUCE_SCATTER,
    Kind.ALL_GATHER: Op.ALL_GATHER,
    Kind.SEND: Op.SEND,
}


def wire_ns(instance: Instance, collective: int, phase: PhaseSpec) -> float:
    """The part of a phase of ``collective`` that its bytes take (no delay, latency or overhead)."""
    coll = instance.collectives[collective]
    if coll.kind is Kind.SEND:
        return send_ns(instance.network, coll.group[0], coll.group[1], phase.bytes_in, quiet=True)
    if coll.group:
        return group_ring_ns(instance.network, coll.group, phase.op, phase.bytes_in, quiet=True)
    algorithm = instance.network.dimensions[phase.dim].algorithm_for(coll.kind)
    return wire_time(instance.network, phase.dim, phase.op, phase.bytes_in, algorithm)


def collective_plan(
    instance: Instance, collective: int, order: tuple[int, ...], merged: bool = False
) -> list[tuple[int, Op]]:
    """The (dimension, place) of each phase of a chunk of ``collective`` taking ``order``
    (:func:`phase_plan_of`; a group's ring is one phase).
    """
    coll = instance.collectives[collective]
    if coll.group:
        return [(order[0], GROUP_OPS[coll.kind])]
    return phase_plan_of(instance.network, coll.kind, order, merged)


def chunk_phases(
    instance: Instance, collective: int, chunk_bytes: float, order: tuple[int, ...], merged: bool = False
) -> tuple[PhaseSpec, ...]:
    """The phases of one chunk that visits the dimensions in ``order``.

    An all-reduce runs reduce-scatter over ``order`` then all-gather over its
    reverse (see :func:`phase_plan_of` for ``merged`` and the other
    :class:`~themis_opt.instance.AllReducePhases`); a reduce-scatter runs the
    first half; an all-gather runs all-gather over ``order`` from its shard
    (``chunk_bytes`` over what its phases multiply it by); an all-to-all runs
    one all-to-all phase per dimension, size unchanged.
    """
    network = instance.network
    coll = instance.collectives[collective]
    kind = coll.kind
    if kind is Kind.SEND:  # one message
        x = float(chunk_bytes)
        return (PhaseSpec(order[0], Op.SEND, x, x, send_ns(network, coll.group[0], coll.group[1], x)),)
    if coll.group:  # one phase on the group's ring, from the shard for an all-gather
        n, op = len(coll.group), GROUP_OPS[kind]
        x = float(chunk_bytes) / n if kind is Kind.ALL_GATHER else float(chunk_bytes)
        return (PhaseSpec(order[0], op, x, x * growth(op, n), group_chunk_ns(network, coll, op, chunk_bytes)),)
    plan = [
        (d, place, network.dimensions[d].algorithm_for(kind))
        for d, place in phase_plan_of(network, kind, order, merged)
    ]
    x = float(chunk_bytes)
    if kind is Kind.ALL_GATHER:  # an all-gather starts from its shard
        x /= math.prod(growth(performed(place, alg), group_size(network, kind, d)) for d, place, alg in plan)
    phases = []
    for d, place, algorithm in plan:
        op = performed(place, algorithm)
        out = x * growth(op, group_size(network, kind, d))
        phases.append(PhaseSpec(d, op, x, out, phase_duration(network, d, op, x, algorithm)))
        x = out
    return tuple(phases)
