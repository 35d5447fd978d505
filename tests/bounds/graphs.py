"""Small task graphs the bound tests share."""

from __future__ import annotations

from themis_opt.instance import After, Collective, Compute, Dimension, Instance, Network


def three_computes(size: int) -> Instance:
    """x at 0; y and z issued at 50, each followed by an all-reduce of ``size`` bytes on a dimension
    of its own: the compute unit must run y and z before x to start both all-reduces early.
    """
    network = Network((Dimension(2, "ring", 1.0, 10.0), Dimension(2, "ring", 1.0, 10.0)))
    return Instance(
        network,
        (
            Compute(100.0, id="x"),
            Compute(100.0, id="y", issue_ns=50.0),
            Compute(100.0, id="z", issue_ns=50.0),
            Collective("all_reduce", size, 1, dimensions=(0,), id="c1", after=(After("y"),)),
            Collective("all_reduce", size, 1, dimensions=(1,), id="c2", after=(After("z"),)),
        ),
    )
