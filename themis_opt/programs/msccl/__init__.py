"""A program as MSCCL-IR XML, as the MSCCL executor (msccl-executor-nccl) parses and runs it.

One ``<algo>``: an all-reduce, reduce-scatter or all-gather over every GPU of its communicator, in
place (``inplace="1" outofplace="0"``: the call passes one buffer); a collective over part of the
network (some dimensions, one pipeline stage) is written as one group's communicator runs it, its
ranks the group's NPUs in order (:func:`communicator`): every group runs the same algorithm. The buffer is cut in
``nchunksperloop`` = chunks x units pieces. An all-reduce's units are laid out so that every
message is one range (the dimensions in the order the chunk's reduce-scatter visits them, the first
the most significant digit; a dimension whose messages carry several blocks, halving-doubling's,
with its digit bit-reversed): any layout the GPUs share gives the same sums. A reduce-scatter's and
an all-gather's are where MSCCL expects GPU u's block: piece ``u * chunks + c`` is unit ``u`` of
chunk ``c``, so a message is as many steps as it has runs of pieces. Each GPU sends and receives
through thread blocks with one peer each: one ``tb`` per direction, peer and channel, steps in the
program's order (``s`` a send, ``r`` a receive that copies, ``rrc`` one that reduces; a message of
several runs, or of more pieces than a step moves, takes several steps in a row); a step that
waits for several others is preceded by ``nop`` steps, one dependency each, as msccl-tools writes
them. Messages between two GPUs are spread over channels in order, the same way on both sides, so
the k-th send on a connection is the k-th receive. The executor's limits are checked and a program
beyond one is refused with the limit named (:data:`LIMITS`); ``max_steps`` follows the executor's
build-time ``MSCCL_MAX_NUM_STEPS``.

The folder holds ``program.xml`` and ``program.json`` (as the ASTRA-sim folder's: the network, the
chunks' bytes, what the checker needs); each step also carries ``themis_phase``, an attribute the
executor does not read.
"""

from themis_opt.programs.msccl.format import BUFFER, COLL, LIMITS, MAX_STEPS, STEP_KEYS, XML
from themis_opt.programs.msccl.read import read_msccl
from themis_opt.programs.msccl.scope import as_msccl, communicator, one_collective
from themis_opt.programs.msccl.write import write_msccl

__all__ = [
    "BUFFER",
    "COLL",
    "LIMITS",
    "MAX_STEPS",
    "STEP_KEYS",
    "XML",
    "as_msccl",
    "communicator",
    "one_collective",
    "read_msccl",
    "write_msccl",
]
