"""Instance: derived values."""

from __future__ import annotations

from themis_opt.instance import Collective, Dimension, Instance, Network


def test_origin_is_the_earliest_issue_time() -> None:
    network = Network((Dimension(4, "ring", 100.0, 500.0),))
    tasks = (Collective("all_reduce", 2**20, 2, issue_ns=500.0), Collective("all_gather", 2**20, 2, issue_ns=200.0))
    assert Instance(network, tasks).origin_ns == 200.0


def test_a_chunk_class_hashes_as_its_fields_once_computed_and_after_pickling() -> None:
    import pickle

    from themis_opt.instance import ChunkClass

    a, b = ChunkClass(0, 64, tuple(range(1000))), ChunkClass(0, 64, tuple(range(1000)))
    assert a == b and hash(a) == hash(b) == hash(a) and {a: 1}[b] == 1
    assert ChunkClass(0, 64, (0, 1)) != ChunkClass(1, 64, (0, 1))
    copy = pickle.loads(pickle.dumps(a))
    assert copy == a and hash(copy) == hash(a)


def _two_stage_network() -> Network:
    return Network((Dimension(2, "ring", 100.0, 500.0), Dimension(2, "switch", 50.0, 1000.0)))


def test_a_send_is_one_chunk_between_two_npus_leaving_from_its_stage() -> None:
    import pytest

    from themis_opt.errors import InputError
    from themis_opt.instance import Kind

    network = _two_stage_network()
    send = Collective(Kind.SEND, 1024, 1, group=(2, 0), stage=1, id="s")
    instance = Instance(network, (send,), stage_npus=(0, 2))
    assert instance.active_dims == ((1,),) and instance.orders == (((1,),),) and instance.num_phases == 1
    assert instance.num_stages == 2 and instance.lane(0, 1) == 3 and instance.has_sends
    with pytest.raises(InputError, match="two NPUs"):
        Collective(Kind.SEND, 1024, 1, group=(0, 1, 2))
    with pytest.raises(InputError, match="one message"):
        Collective(Kind.SEND, 1024, 2, group=(0, 1))
    with pytest.raises(InputError, match="leaves from its NPU 2, not NPU 0"):
        Instance(network, (Collective(Kind.SEND, 1024, 1, group=(0, 2), stage=1),), stage_npus=(0, 2))
    with pytest.raises(InputError, match=r"tasks\[0\] \(c0\).stage"):
        Instance(network, (Collective(Kind.SEND, 1024, 1, group=(2, 0), stage=1),))
    with pytest.raises(InputError, match="names an NPU twice"):
        Instance(network, (send,), stage_npus=(2, 2))


def test_a_stage_part_keeps_its_tasks_and_turns_other_stages_into_issue_times() -> None:
    from themis_opt.instance import After, Compute

    network = _two_stage_network()
    tasks = (
        Compute(100.0, id="f0"),
        Collective("send", 1024, 1, group=(0, 2), id="s0", after=(After("f0"),)),
        Compute(200.0, id="f1", stage=1, after=(After("s0"),)),
        Collective("all_reduce", 1024, 1, dimensions=(0,), id="ar1", stage=1, after=(After("f1"),)),
    )
    instance = Instance(network, tasks, stage_npus=(0, 2))
    part = instance.stage_part(1, issues=(0.0, 0.0, 5000.0, 0.0))
    assert part is not None and part.num_stages == 1 and part.stage_npus == (2,)
    assert [t.id for t in part.tasks] == ["f1", "ar1"]
    assert part.tasks[0].issue_ns == 5000.0 and part.tasks[0].after == () and part.tasks[0].stage == 0
    assert instance.stage_part(0) is not None


def test_the_phase_count_is_what_a_schedule_holds_with_groups() -> None:
    from themis_opt.solving import solve

    network = Network((Dimension(4, "ring", 200.0, 500.0), Dimension(4, "switch", 50.0, 1000.0)))
    tasks = (
        Collective("all_reduce", 2**20, 4, group=(0, 1, 2, 3)),  # one phase a chunk on the group's ring
        Collective("all_reduce", 2**20, 4),  # a reduce-scatter and an all-gather phase a chunk and dimension
        Collective("send", 2**10, 1, group=(0, 4)),
    )
    instance = Instance(network, tasks)
    assert instance.num_phases == 4 + 16 + 1
    for method in ("baseline", "themis"):
        assert len(solve(instance, method).schedule.columns().dim) == instance.num_phases


def test_dependencies_on_tasks_listed_later_are_accepted_and_cycles_named_either_way() -> None:
    import pytest

    from themis_opt.errors import InputError
    from themis_opt.instance import After, Compute

    network = Network((Dimension(4, "ring", 100.0, 500.0),))
    ar = Collective("all_reduce", 2**20, 2, id="ar", after=(After("late"),))
    late = Compute(100.0, "late")
    later_first = Instance(network, (ar, late, Compute(5.0, "last", after=(After("ar"),))))
    assert [t.id for t in later_first.tasks] == ["ar", "late", "last"]  # acyclic, though not in order
    looped = (ar, Compute(100.0, "late", after=(After("last"),)), Compute(5.0, "last", after=(After("ar"),)))
    with pytest.raises(InputError, match=r"dependency cycle \(each waits for the next\): ar -> late -> last -> ar"):
        Instance(network, looped)


def test_the_dependency_graph_is_read_once_by_position_and_in_an_order_that_respects_it() -> None:
    import pytest

    from themis_opt.errors import InputError
    from themis_opt.instance import After, Compute
    from themis_opt.solving import solve
    from themis_opt.validator import validate

    network = Network((Dimension(4, "ring", 100.0, 500.0), Dimension(2, "switch", 50.0, 1000.0)))
    tasks = (
        Collective("all_reduce", 2**20, 2, id="ar", after=(After("late", 30.0), After("first"))),
        Compute(100.0, "late", after=(After("first"),)),
        Compute(5.0, "last", after=(After("ar"),)),
        Compute(40.0, "first"),
    )
    shuffled = Instance(network, tasks)
    assert shuffled.predecessors == ((1, 3), (3,), (0,), ())
    order = list(shuffled.topological_order)
    assert sorted(order) == [0, 1, 2, 3]
    assert all(order.index(p) < order.index(t) for t, before in enumerate(shuffled.predecessors) for p in before)
    listed = Instance(network, (tasks[3], tasks[1], tasks[0], tasks[2]))
    assert list(listed.topological_order) == [0, 1, 2, 3]  # listed in dependency order: list order
    for method in ("baseline", "themis"):  # the same graph, whatever the list order
        result = solve(shuffled, method)
        assert result.schedule is not None and validate(shuffled, result.schedule) == []
        assert result.makespan == solve(listed, method).makespan
    # the first bad dependency of a task is the one named, whichever way it is bad
    one = Collective("all_reduce", 2**20, 2, id="c")
    with pytest.raises(InputError, match=r"tasks\[0\] \(a\)\.after\[0\]: a task cannot wait for itself"):
        Instance(network, (Compute(1.0, "a", after=(After("a"), After("nobody"))), one))
    with pytest.raises(InputError, match=r"tasks\[0\] \(a\)\.after\[0\]: unknown task id 'nobody'"):
        Instance(network, (Compute(1.0, "a", after=(After("nobody"), After("a"))), one))
    with pytest.raises(InputError, match=r"tasks\[1\]\.id: duplicate id 'a' \(also tasks\[0\]\)"):
        Instance(network, (Compute(1.0, "a"), Compute(2.0, "a"), one))
    with pytest.raises(InputError, match=r"after\[1\]: must be an After"):
        Compute(1.0, "b", after=(After("a"), "a"))  # type: ignore[arg-type]


def test_an_instance_hashed_here_and_unpickled_elsewhere_hashes_as_its_equal_there(tmp_path: object) -> None:
    # the hash is kept once computed (hashing visits every dependency); a string's hash differs
    # between processes, so the kept one must not travel with the instance
    import os
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    from ..conftest import DATA, load

    instance = load("worked")
    assert hash(instance) == hash(instance) and hash(instance) == hash(load("worked"))
    path = Path(str(tmp_path)) / "instance.pickle"
    path.write_bytes(pickle.dumps(instance))
    code = (
        "import pickle, sys\n"
        "from themis_opt import load_instance\n"
        "there = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "fresh = load_instance(sys.argv[2])\n"
        "assert there == fresh and hash(there) == hash(fresh) and {fresh: 1}[there] == 1\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(path), str(DATA / "worked.json")], env=env, check=True)
