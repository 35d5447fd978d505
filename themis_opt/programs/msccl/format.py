"""What an MSCCL-IR file is: its name, the executor's limits, a step's attributes, the collectives and
the buffer each runs in (see :mod:`themis_opt.programs.msccl`).
"""

from __future__ import annotations

from themis_opt.instance import Kind

MAX_STEPS = 64  # MSCCL_MAX_NUM_STEPS of the executor's default build: steps a thread block holds
LIMITS = {  # the executor's, and what it does at each (msccl_parser.cc, msccl_struct.h)
    "channels": 32,  # MAXCHANNELS
    "thread blocks a channel sends (or receives) with": 32,  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
    "thread blocks a GPU depends on": 128,  # depid is an int8
    "chunks a step moves": 71,  # cnt < MSCCL_MAX_COUNT (72): a longer message takes several steps
    "chunks a loop": 32768,  # offsets are int16
    "XML elements a GPU reads": 4096,  # MAX_NODES: algo, every gpu, its tbs and steps
}
XML = "program.xml"
STEP_KEYS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


COLL = {Kind.ALL_REDUCE: "allreduce", Kind.REDUCE_SCATTER: "reducescatter", Kind.ALL_GATHER: "allgather"}
BUFFER = {Kind.ALL_REDUCE: "i", Kind.REDUCE_SCATTER: "i", Kind.ALL_GATHER: "o"}  # in place: the one it runs in
