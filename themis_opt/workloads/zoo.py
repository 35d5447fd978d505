"""A model zoo: workloads built from published architectures, so no ASTRA-sim file is needed.

Every layer's gradient is its parameter count times the bytes per element;
its forward compute is its FLOPs (from the shapes) over the NPU's effective
rate, peak FLOP/s times efficiency; the input-gradient and weight-gradient
compute each equal the forward's. Options and defaults (:class:`ZooOptions`):
batch 32 samples per NPU (the Transformer: 1 sequence of 2048 tokens), fp16
(2 bytes per element), 100 TFLOP/s peak at 50% efficiency, no update delay.

=============  ==========================  ======================  ======
model          architecture                parallelism             layers
=============  ==========================  ======================  ======
resnet50       ResNet-50, ImageNet 224     DATA                    54
resnet152      ResNet-152, ImageNet 224    DATA                    156
gnmt           GNMT, 8+8 LSTM layers 1024  DATA                    20
dlrm           DLRM, MLPerf shapes         HYBRID_DLRM             9
transformer1t  GPT-style, 128 x 25600      HYBRID_TRANSFORMER      129
=============  ==========================  ======================  ======

One ResNet layer is one convolution with its batch norm (weights plus the
norm's two vectors) or the classifier, as in ASTRA-sim's ResNet-50 workload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from themis_opt.errors import InputError
from themis_opt.instance import Kind
from themis_opt.workloads.layers import Layer, Workload


@dataclass(frozen=True)
class ZooOptions:
    """How a zoo model becomes a workload (see the module's docstring for the defaults)."""

    batch: int = 32
    bytes_per_element: int = 2
    peak_tflops: float = 100.0
    efficiency: float = 0.5
    model_parallel: int = 8  # the Transformer's model-parallel group size
    sequence: int = 2048  # the Transformer's sequence length
    update_delay_ns: float = 0.0

    def __post_init__(self) -> None:
        for name in ("batch", "bytes_per_element", "model_parallel", "sequence"):
            if getattr(self, name) < 1:
                raise InputError(name, f"must be >= 1, got {getattr(self, name)}")
        if not self.peak_tflops > 0 or not 0 < self.efficiency <= 1:
            raise InputError("peak_tflops", "peak must be > 0 and efficiency in (0, 1]")

    def ns(self, flops: float) -> float:
        """Compute time of ``flops`` floating-point operations, ns."""
        return flops / (self.peak_tflops * 1e3 * self.efficiency)


@dataclass(frozen=True)
class ZooLayer:
    """One layer of an architecture: parameters and forward FLOPs per sample."""

    name: str
    parameters: int
    flops_per_sample: float


def resnet(depth: int) -> list[ZooLayer]:
    """ResNet-50 or -152 on 224x224 images: every convolution (with its batch norm) and the classifier."""
    blocks = {50: (3, 4, 6, 3), 152: (3, 8, 36, 3)}[depth]
    layers = []

    def conv(name: str, k: int, cin: int, cout: int, out: int) -> None:
        layers.append(ZooLayer(name, k * k * cin * cout + 2 * cout, 2.0 * k * k * cin * cout * out * out))

    conv("conv1", 7, 3, 64, 112)
    cin, size = 64, 56
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for block in range(count):
            stride = 2 if stage > 0 and block == 0 else 1
            out = size // stride
            tag = f"layer{stage + 1}.{block}"
            conv(f"{tag}.conv1", 1, cin, width, size)
            conv(f"{tag}.conv2", 3, width, width, out)
            conv(f"{tag}.conv3", 1, width, 4 * width, out)
            if block == 0:
                conv(f"{tag}.downsample", 1, cin, 4 * width, out)
            cin, size = 4 * width, out
    layers.append(ZooLayer("fc", 2048 * 1000 + 1000, 2.0 * 2048 * 1000))
    return layers


def gnmt(hidden: int = 1024, vocab: int = 32_000, steps: int = 50) -> list[ZooLayer]:
    """GNMT (Wu et al., 2016): embeddings, 8 encoder LSTM layers (the first bidirectional), 8 decoder
    LSTM layers (attention context added to their input), attention and the softmax projection;
    ``steps`` tokens per sample.
    """

    def lstm(name: str, inputs: int, units: int, directions: int = 1) -> ZooLayer:
        params = directions * (4 * units * (inputs + units) + 8 * units)
        return ZooLayer(name, params, 2.0 * directions * 4 * units * (inputs + units) * steps)

    layers = [ZooLayer("encoder.embedding", vocab * hidden, 0.0)]
    layers.append(lstm("encoder.lstm0", hidden, hidden // 2, directions=2))
    layers += [lstm(f"encoder.lstm{i}", hidden, hidden) for i in range(1, 8)]
    layers.append(ZooLayer("decoder.embedding", vocab * hidden, 0.0))
    layers += [lstm(f"decoder.lstm{i}", 2 * hidden, hidden) for i in range(8)]
    layers.append(ZooLayer("attention", 2 * hidden * hidden + hidden, 2.0 * 3 * hidden * hidden * steps))
    layers.append(ZooLayer("softmax", hidden * vocab + vocab, 2.0 * hidden * vocab * steps))
    return layers


DLRM_TABLES, DLRM_DIM, DLRM_ROWS = 26, 128, 1_000_000
DLRM_BOTTOM = (13, 512, 256, 128)
DLRM_TOP = (479, 1024, 1024, 512, 256, 1)


def dlrm() -> list[ZooLayer]:
    """DLRM with the MLPerf shapes: 26 embedding tables of dimension 128 (model parallel), bottom MLP
    13-512-256-128, top MLP 479-1024-1024-512-256-1.
    """
    layers = [ZooLayer("embedding", DLRM_TABLES * DLRM_ROWS * DLRM_DIM, 2.0 * DLRM_TABLES * DLRM_DIM)]
    for i, (a, b) in enumerate(zip(DLRM_BOTTOM, DLRM_BOTTOM[1:])):
        layers.append(ZooLayer(f"bottom{i}", a * b + b, 2.0 * a * b))
    for i, (a, b) in enumerate(zip(DLRM_TOP, DLRM_TOP[1:])):
        layers.append(ZooLayer(f"top{i}", a * b + b, 2.0 * a * b))
    return layers


def transformer(layers: int = 128, hidden: int = 25_600, vocab: int = 51_200, sequence: int = 2048) -> list[ZooLayer]:
    """A GPT-style decoder: token and position embeddings, then blocks of attention (QKV and output
    projections) and a 4x MLP with two layer norms: 12 h^2 + 13 h parameters a block. FLOPs are per
    sequence of ``sequence`` tokens (attention scores included).
    """
    h = hidden
    out = [ZooLayer("embedding", vocab * h + sequence * h, 0.0)]
    per_block = 12 * h * h + 13 * h
    flops = 2.0 * 12 * h * h * sequence + 4.0 * sequence * sequence * h
    out += [ZooLayer(f"block{i}", per_block, flops) for i in range(layers)]
    return out


def _wg(options: ZooOptions, parameters: int) -> int:
    return parameters * options.bytes_per_element


def _data(name: str, layers: list[ZooLayer], options: ZooOptions) -> Workload:
    out = []
    for layer in layers:
        t = options.ns(layer.flops_per_sample * options.batch)
        size = _wg(options, layer.parameters)
        out.append(Layer(layer.name, t, None, 0, t, None, 0, t, Kind.ALL_REDUCE, size, options.update_delay_ns))
    return Workload("DATA", tuple(out), name=name)


def _dlrm(options: ZooOptions) -> Workload:
    layers = dlrm()
    out = []
    emb = layers[0]
    a2a = options.batch * DLRM_TABLES * DLRM_DIM * options.bytes_per_element
    t = options.ns(emb.flops_per_sample * options.batch)
    # the embedding is sharded (model parallel): its gradient goes back by all-to-all, not all-reduce
    out.append(Layer(emb.name, t, Kind.ALL_TO_ALL, a2a, t, Kind.ALL_TO_ALL, a2a, t, None, 0, options.update_delay_ns))
    for layer in layers[1:]:
        t = options.ns(layer.flops_per_sample * options.batch)
        size = _wg(options, layer.parameters)
        out.append(Layer(layer.name, t, None, 0, t, None, 0, t, Kind.ALL_REDUCE, size, options.update_delay_ns))
    return Workload("HYBRID_DLRM", tuple(out), last_bottom=len(DLRM_BOTTOM) - 1, name="dlrm")


def _transformer(options: ZooOptions) -> Workload:
    g = options.model_parallel
    layers = transformer(sequence=options.sequence)
    activations = options.batch * options.sequence * 25_600 * options.bytes_per_element
    out = []
    for layer in layers:
        t = options.ns(layer.flops_per_sample * options.batch / g)
        size = _wg(options, layer.parameters // g)
        if layer.name == "embedding":
            out.append(Layer(layer.name, t, None, 0, t, None, 0, t, Kind.ALL_REDUCE, size, options.update_delay_ns))
            continue
        # Megatron-style tensor parallelism: an all-reduce of the activations in the forward and the backward
        out.append(
            Layer(
                layer.name,
                t,
                Kind.ALL_REDUCE,
                2 * activations,
                t,
                Kind.ALL_REDUCE,
                2 * activations,
                t,
                Kind.ALL_REDUCE,
                size,
                options.update_delay_ns,
            )
        )
    return Workload("HYBRID_TRANSFORMER", tuple(out), model_parallel_group=g, name="transformer1t")


MODELS: dict[str, Callable[[ZooOptions], Workload]] = {
    "resnet50": lambda o: _data("resnet50", resnet(50), o),
    "resnet152": lambda o: _data("resnet152", resnet(152), o),
    "gnmt": lambda o: _data("gnmt", gnmt(), o),
    "dlrm": _dlrm,
    "transformer1t": _transformer,
}
MODEL_PARALLEL = frozenset({"transformer1t"})  # the models whose layout reads ZooOptions.model_parallel
ARCHITECTURES: dict[str, Callable[[], list[ZooLayer]]] = {
    "resnet50": lambda: resnet(50),
    "resnet152": lambda: resnet(152),
    "gnmt": gnmt,
    "dlrm": dlrm,
    "transformer1t": transformer,
}


def model_workload(name: str, options: ZooOptions | None = None) -> Workload:
    """The workload of zoo model ``name`` (one of :data:`MODELS`)."""
    if name not in MODELS:
        raise InputError("model", f"unknown model {name!r} (known: {', '.join(MODELS)})")
    return MODELS[name](options or ZooOptions())


def parameters(name: str) -> int:
    """The architecture's parameter count."""
    return sum(layer.parameters for layer in ARCHITECTURES[name]())
