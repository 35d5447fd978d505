"""The flattened ``one_*`` algorithms: ring, direct or halving-doubling over every NPU of the network.

Each message is costed on the outermost dimension in which its two NPUs differ
(the innermost on a network of ``innermost_charge``); the model:
:mod:`themis_opt.cost`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, assert_never

from themis_opt.cost.steps import _shares_port, link_bytes_per_ns, phase_delay_of, ring_steps
from themis_opt.instance import Algorithm, Network, Op, Topology

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


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
    """A flattened algorithm's phase over every NPU of ``network`` (see :mod:`themis_opt.cost`);
    ``quiet``: its wire time alone.
    """
    if quiet:
        return _flattened_steps(network, algorithm, op, x, quiet)
    unflattened = algorithm.spec.unflattened
    assert unflattened is not None, f"{algorithm.value} is not flattened"
    return phase_delay_of(network, unflattened, op, network.num_npus, x) + _flattened_steps(
        network, algorithm, op, x, quiet
    )


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
