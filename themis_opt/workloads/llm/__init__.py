"""Large language models as they are trained now: tensor, context, expert, data and pipeline parallelism.

:data:`~themis_opt.workloads.llm.LLMS` holds five published configurations;
:func:`~themis_opt.workloads.llm.parameter_count` counts their parameters from the shapes.
:func:`~themis_opt.workloads.llm.llm_task_graph` lays one out on a network and writes one
training iteration (or several) as a task graph:

* the **tensor-parallel** group (``tp`` NPUs) takes the innermost dimensions,
  the **context-parallel** group (``cp``) the next ones, then the
  **expert-parallel** group (``ep``) and **data parallelism** (``dp``) the
  rest; each group must be a product of whole consecutive dimensions (else
  :class:`~themis_opt.errors.InputError` naming it);
* tensor parallelism (Megatron): a block's parameters and compute are divided
  by ``tp``; per block two all-reduces in the forward pass (after attention,
  after the MLP) and two in the backward, of batch x sequence x hidden x
  bytes, over the tensor-parallel dimensions, each blocking the next
  compute; embeddings, the output layer and the norms are replicated;
* expert parallelism (mixture-of-experts blocks): the experts are divided by
  ``ep``; per block two all-to-alls in the forward pass (dispatch, combine)
  and two in the backward, of batch x sequence x hidden x top-k x bytes,
  over the expert-parallel dimensions;
* a parameter's data-parallel group is every NPU holding the same copy of
  it: the data-parallel dimensions for expert parameters, the expert- and
  data-parallel dimensions together for the others;
* ``ddp`` (PyTorch DistributedDataParallel): weight gradients in buckets of
  25 MiB in the order the backward pass makes them (a tensor larger than
  that is a bucket of its own; expert and other parameters in buckets of
  their own, one per group), each bucket's all-reduce issued when its last
  gradient is computed;
* ``fsdp`` (FullyShardedDataParallel, ZeRO-3): one unit per block and one
  for the embeddings, output layer and final norm; each unit all-gathered
  before its forward and before its backward, and reduce-scattered after its
  backward, with one unit of prefetch either way;
* context parallelism (Llama 3's): each of the ``cp`` ranks holds a share of
  every sequence; per block the whole sequence's keys and values are
  all-gathered over the context-parallel dimensions after their projections
  (and again in the backward), their gradients reduce-scattered, or with
  ``cp_attention="ring"`` (ring attention) each rank's block passed round the
  group in ``cp - 1`` sends, each overlapping the attention on the block
  before (their gradients' sums round again in the backward); the
  context-parallel ranks' gradients are reduced with the data-parallel ones;
* compute from the shapes: 2 FLOPs a multiply-add, attention scores included
  (4 x tokens x sequence x hidden a block), the backward twice the forward;
  time = FLOPs / (peak x MFU).

The next pass starts when the last one's gradients are all reduced (its
optimizer step).

**Pipeline parallelism** (``pp`` stages, ``microbatches`` of ``batch``
sequences each): innermost first, the tensor-, context- and expert-parallel
groups, then the stages, then data parallelism (or the stages take
``stage_dims`` and the groups the rest); a dimension a group or the stages
need part of is split in two, a part again (:func:`fit_network`); the blocks are
shared out in order (the first stages take one more where they do not
divide), the embeddings go with the first stage, the final norm and the
output layer with the last. Each stage is a pipeline stage of the instance
(its NPU: coordinate 0 outside the stage dimensions) and runs the 1F1B
schedule: ``pp - s - 1`` warm-up forwards (at most ``microbatches``), then
one forward and one backward in turn, then the cool-down backwards, each
after the one before; a microbatch's activations go to the next stage and
its activation gradients to the stage before as sends of batch x sequence x
hidden x bytes, each forward waiting for its activations and each backward
for its gradients. A stage all-reduces its gradients in DDP buckets as the
last microbatch's backward makes them. With FSDP a stage's units (its blocks;
the embeddings on the first stage, the output layer and final norm on the
last) are all-gathered and reduce-scattered over the stage's data-parallel
group, one unit of prefetch as above, an op's first unit as the op before it
starts; ``fsdp_gathers`` says when: ``once`` (torchtitan's default with
pipeline stages: gathered before the first microbatch's forward and kept, the
gradients accumulated and reduce-scattered after the last microbatch's
backward) or ``microbatch`` (gathered before every forward and every
backward, reduce-scattered after every backward). The same holds for
gradient accumulation (microbatches on one stage). A tied output layer's
gradients are not exchanged between the first and last stage.
"""

from themis_opt.workloads.llm.blocks import BlockGraph, Blocks, blocks_of
from themis_opt.workloads.llm.builders import BUCKET_BYTES, MIB, llm_task_graph, one_f_one_b, pipeline_order
from themis_opt.workloads.llm.layouts import Layout, fit_network, group_dims, stage_dims, stage_npus
from themis_opt.workloads.llm.models import LLMS, LlmConfig, Tensor, block_tensors, outer_tensors, parameter_count

__all__ = [
    "BUCKET_BYTES",
    "LLMS",
    "MIB",
    "BlockGraph",
    "Blocks",
    "Layout",
    "LlmConfig",
    "Tensor",
    "block_tensors",
    "blocks_of",
    "fit_network",
    "group_dims",
    "llm_task_graph",
    "one_f_one_b",
    "outer_tensors",
    "parameter_count",
    "pipeline_order",
    "stage_dims",
    "stage_npus",
]
