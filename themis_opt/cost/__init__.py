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

Which module holds what:

* :mod:`themis_opt.cost.steps`: one phase on one dimension: a message's link
  bandwidth and hops, an algorithm's steps, a ring's relayed latency, the
  reductions, and the phase's duration;
* :mod:`themis_opt.cost.flattened`: the flattened ``one_*`` algorithms over
  every NPU, and whether a ``one_ring`` phase stalls ASTRA-sim 1.0
  (:func:`flattened_ring_stalls`);
* :mod:`themis_opt.cost.groups`: communicator groups' rings
  (:func:`group_ring_ns`, :func:`group_chain_ns`, :func:`group_chunk_ns`)
  and sends (:func:`send_ns`);
* :mod:`themis_opt.cost.plans`: a chunk's phases (:class:`PhaseSpec`,
  :func:`chunk_phases`, :func:`phase_plan_of`, :func:`collective_plan`), their
  durations and wire times (:func:`phase_duration`, :func:`wire_time`,
  :func:`wire_ns`), and the baseline's merged all-reduce phase
  (:func:`merges`, :func:`merging_shortens`).

``themis_opt.cost`` re-exports every public name of these modules.
"""

from themis_opt.cost.flattened import flattened_ring_stalls
from themis_opt.cost.groups import (
    GROUP_STEP_DELAY_NS,
    group_chain_ns,
    group_chunk_ns,
    group_links,
    group_ring_ns,
    send_ns,
)
from themis_opt.cost.plans import (
    GROUP_OPS,
    PhaseSpec,
    chunk_phases,
    collective_plan,
    group_size,
    growth,
    merges,
    merging_shortens,
    performed,
    phase_duration,
    phase_plan_of,
    wire_ns,
    wire_time,
)
from themis_opt.cost.steps import hops_apart, link_bytes_per_ns, reduced_messages, reduction_ns, ring_steps

__all__ = [
    "GROUP_OPS",
    "GROUP_STEP_DELAY_NS",
    "PhaseSpec",
    "chunk_phases",
    "collective_plan",
    "flattened_ring_stalls",
    "group_chain_ns",
    "group_chunk_ns",
    "group_links",
    "group_ring_ns",
    "group_size",
    "growth",
    "hops_apart",
    "link_bytes_per_ns",
    "merges",
    "merging_shortens",
    "performed",
    "phase_duration",
    "phase_plan_of",
    "reduced_messages",
    "reduction_ns",
    "ring_steps",
    "send_ns",
    "wire_ns",
    "wire_time",
]
