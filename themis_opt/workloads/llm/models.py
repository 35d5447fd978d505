"""Published decoder-only transformers: their shapes, parameter tensors and parameter counts.

:data:`LLMS` holds five published configurations (:class:`LlmConfig`);
:func:`block_tensors` and :func:`outer_tensors` list a model's parameter
tensors (:class:`Tensor`) in the order the forward pass uses them, and
:func:`parameter_count` counts its parameters from the shapes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlmConfig:
    """A decoder-only transformer's published shape.

    Parameters
    ----------
    name
        The zoo name.
    layers, hidden, heads, kv_heads, ffn, vocab
        Blocks, model width, attention heads, key-value heads (grouped-query
        attention), MLP width, vocabulary.
    sequence
        The training sequence length (the default ``--seq``).
    gated
        A SwiGLU MLP (three matrices) with RMSNorm and no biases (Llama,
        Mixtral); else a GELU MLP (two matrices) with biases and LayerNorm (GPT-3).
    learned_positions
        Learned position embeddings (``sequence`` x ``hidden``).
    tied_output
        The output layer shares the token embedding.
    experts, top_k
        A mixture-of-experts MLP in every block: ``experts`` MLPs, each token
        routed to ``top_k`` of them.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    sequence: int
    gated: bool
    learned_positions: bool = False
    tied_output: bool = False
    experts: int = 1
    top_k: int = 1

    @property
    def moe(self) -> bool:
        """Whether the MLPs are mixtures of experts."""
        return self.experts > 1


#: The published models by name (their shapes as their papers and configurations state them).
LLMS: dict[str, LlmConfig] = {
    c.name: c
    for c in (
        LlmConfig("gpt3-175b", 96, 12288, 96, 96, 4 * 12288, 50257, 2048, False, True, True),
        LlmConfig("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, True),
        LlmConfig("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, True),
        LlmConfig("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, True),
        LlmConfig("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, True, experts=8, top_k=2),
    )
}


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor: its name, size, which part of a block holds it, how it is sharded.

    ``split``: divided by the tensor-parallel group (a block's matrices and
    biases; not the norms, embeddings or output layer); ``expert``: one of the
    experts' (also divided by the expert-parallel group).
    """

    name: str
    parameters: int
    split: bool = True
    expert: bool = False
    macs: int = 0  # multiply-adds a token (a matrix's rows x columns; 0 for a norm or an embedding)


def block_tensors(config: LlmConfig) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """One block's tensors: (attention part, MLP part), each in the order the forward pass uses them."""
    h, f = config.hidden, config.ffn
    kv = config.kv_heads * (h // config.heads)
    bias = not config.gated
    norm = 2 * h if bias else h  # LayerNorm: weight and bias; RMSNorm: weight

    def matrix(name: str, rows: int, cols: int, expert: bool = False) -> Tensor:
        return Tensor(name, rows * cols + (cols if bias else 0), expert=expert, macs=rows * cols)

    attention = (
        Tensor("attn_norm", norm, split=False),
        matrix("q", h, h),
        matrix("k", h, kv),
        matrix("v", h, kv),
        matrix("o", h, h),
    )

    def mlp(prefix: str, expert: bool) -> list[Tensor]:
        if config.gated:
            return [
                matrix(f"{prefix}w1", h, f, expert),
                matrix(f"{prefix}w3", h, f, expert),
                matrix(f"{prefix}w2", f, h, expert),
            ]
        return [matrix(f"{prefix}fc1", h, f, expert), matrix(f"{prefix}fc2", f, h, expert)]

    mlp_part: list[Tensor] = [Tensor("mlp_norm", norm, split=False)]
    if config.moe:
        mlp_part.append(Tensor("router", h * config.experts, macs=h * config.experts))
        for e in range(config.experts):
            mlp_part += mlp(f"expert{e}.", True)
    else:
        mlp_part += mlp("", False)
    return attention, tuple(mlp_part)


def outer_tensors(config: LlmConfig) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """The tensors outside the blocks: (embeddings, head: final norm and untied output layer)."""
    h = config.hidden
    embeddings = [Tensor("embedding", config.vocab * h, split=False)]
    if config.learned_positions:
        embeddings.append(Tensor("positions", config.sequence * h, split=False))
    head = [Tensor("final_norm", h if config.gated else 2 * h, split=False)]
    if not config.tied_output:
        head.append(Tensor("output", config.vocab * h, split=False))
    return tuple(embeddings), tuple(head)


def parameter_count(config: LlmConfig) -> int:
    """Every parameter of the model, from its shapes."""
    attention, mlp = block_tensors(config)
    embeddings, head = outer_tensors(config)
    per_block = sum(t.parameters for t in attention + mlp)
    return config.layers * per_block + sum(t.parameters for t in embeddings + head)
