"""A program timed as ASTRA-sim 2.x's congestion-unaware backend times custom collectives.

Each SEND takes ``int(hops x latency + bytes / bandwidth)`` ns (its bytes: its data and its pad) on
the lowest dimension its NPUs differ in (a ring: the shorter way round, over the whole network
dimension where the program's is carved from one; a switch: 2 hops; fully connected: 1), whatever
else is sent at once; it ends when its data arrives. A RECV ends when its data has arrived and it
is posted (at once, if posted after the arrival); a COMP takes its duration, 0 as 1 ns. An
operation starts when everything it waits for has ended. An NPU finishes with its last operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from themis_opt.errors import InputError
from themis_opt.instance import Topology
from themis_opt.programs.ir import OpKind, Program

Rate = TypeVar("Rate", float, np.ndarray)  # one bandwidth, or one a link


def bytes_per_ns(gbps: Rate) -> Rate:
    """ASTRA-sim 2.x's ``bw_GBps_to_Bpns``, rounded as it rounds: ``gbps * 2^30`` (exact), then over 10^9."""
    rate: Rate = gbps * (1 << 30) / 1e9
    return rate


def pad_bytes(delay_ns: np.ndarray, gbps: np.ndarray) -> np.ndarray:
    """The bytes a link of ``gbps`` takes ``delay_ns`` to carry, rounded up: a message padded with
    them takes at least ``delay_ns`` longer in ASTRA-sim 2.x (at most 1 ns more, as 2.x truncates).
    """
    pad: np.ndarray = np.ceil(np.asarray(delay_ns) * bytes_per_ns(np.asarray(gbps, dtype=np.float64))).astype(np.int64)
    return pad


@dataclass(frozen=True)
class Timing:
    """When each operation of a program ends, and each NPU finishes.

    Parameters
    ----------
    end_ns
        Per operation.
    finish_ns
        Per NPU: its last operation's end (0 for an NPU without one).
    order
        The operations in an order they can run in (every one after what it waits for and a
        receive after its send).
    """

    end_ns: np.ndarray
    finish_ns: np.ndarray
    order: np.ndarray

    @property
    def time_ns(self) -> int:
        """The program's time: the last NPU's finish."""
        return int(self.finish_ns.max(initial=0))


def send_ns(program: Program) -> np.ndarray:
    """Each operation's own time: a send's message time, a computation's duration (0 as 1), 0 else."""
    costs = np.zeros(program.num_ops, dtype=np.int64)
    sends = np.flatnonzero(program.kind == OpKind.SEND)
    if len(sends):
        dims = program.message_dim[sends]
        apart = program.message_apart[sends]
        sizes = np.array([link.physical_size for link in program.links])[dims]
        ring = np.array([link.topology is Topology.RING for link in program.links])[dims]
        fixed = np.array([0 if link.topology is Topology.RING else link.hops(1) for link in program.links])[dims]
        hops = np.where(ring, np.minimum(apart, sizes - apart), fixed)
        latency = np.array([link.latency_ns for link in program.links])[dims]
        rate = np.array([bytes_per_ns(link.bandwidth_gbps) for link in program.links])[dims]
        wire = (program.size[sends] + program.pad[sends]).astype(np.float64)
        costs[sends] = (hops * latency + wire / rate).astype(np.int64)
    comps = program.kind == OpKind.COMP
    costs[comps] = np.maximum(program.duration_ns[comps], 1)
    return costs


def time_program(program: Program) -> Timing:
    """The program's times under ASTRA-sim 2.x's custom path (see the module's docstring).

    Raises
    ------
    InputError
        Unmatched messages (:attr:`Program.sender`), or a program that cannot run to its end: its
        dependencies and messages form a cycle, so some NPU would wait forever.
    """
    n = program.num_ops
    sender = program.sender
    recvs = np.flatnonzero(sender >= 0)
    owner = np.repeat(np.arange(n), np.diff(program.dep_start))
    sources = np.concatenate([program.deps, sender[recvs]])
    targets = np.concatenate([owner, recvs])
    order_edges = np.argsort(sources, kind="stable")
    sources, targets = sources[order_edges], targets[order_edges]
    out_start = np.searchsorted(sources, np.arange(n + 1))
    waiting = np.bincount(targets, minlength=n)
    costs = send_ns(program)
    ready = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    is_recv = program.kind == OpKind.RECV
    frontier = np.flatnonzero(waiting == 0)
    done: list[np.ndarray] = []
    while len(frontier):
        end[frontier] = np.where(is_recv[frontier], ready[frontier], ready[frontier] + costs[frontier])
        done.append(frontier)
        counts = out_start[frontier + 1] - out_start[frontier]
        if not counts.sum():
            break
        edges = np.repeat(out_start[frontier], counts) + _ranges(counts)
        heads = targets[edges]
        np.maximum.at(ready, heads, np.repeat(end[frontier], counts))
        np.subtract.at(waiting, heads, 1)
        frontier = np.unique(heads[waiting[heads] == 0])
    order = np.concatenate(done) if done else np.zeros(0, dtype=np.int64)
    if len(order) < n:
        stuck = np.ones(n, dtype=bool)
        stuck[order] = False
        rank = int(program.rank[np.argmax(stuck)])
        op = int(np.argmax(stuck))
        raise InputError(
            f"program: NPU {rank} node {op - int(program.rank_start[rank])}",
            "never runs: the dependencies and messages form a cycle (the program would deadlock)",
        )
    finish = np.zeros(program.npus, dtype=np.int64)
    if n:
        np.maximum.at(finish, program.rank, end)
    return Timing(end, finish, order)


def _ranges(counts: np.ndarray) -> np.ndarray:
    """``0..c-1`` for each ``c`` of ``counts``, concatenated."""
    within: np.ndarray = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return within
