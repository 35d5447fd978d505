"""Instance and result JSON: round trips, strict reading, fuzzing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from themis_opt.errors import InputError
from themis_opt.formats.native import (
    instance_from_dict,
    instance_schema,
    instance_to_dict,
    load_instance,
    load_result,
    result_to_dict,
    save_instance,
    save_result,
)
from themis_opt.instance import Collective, Dimension, Instance, Network
from themis_opt.solving import solve

from ..conftest import DATA, NAMES, load

VALID: dict[str, Any] = json.loads((DATA / "mixed.json").read_text())


def _valid(data: Any) -> None:
    """Validate ``data`` against the shipped schema (jsonschema is imported here: where
    rfc3987-syntax is installed its import takes seconds, paid by the tests that use it only)."""
    import jsonschema

    jsonschema.validate(data, instance_schema())


def test_round_trip_instances(instance: Instance, tmp_path: Path) -> None:
    path = tmp_path / "copy.json"
    save_instance(instance, path)
    again = load_instance(path)
    assert again == instance
    assert instance_to_dict(again) == instance_to_dict(instance)
    assert json.loads(path.read_text()) == instance_to_dict(instance)


@pytest.mark.parametrize("name", NAMES)
def test_shipped_schema_accepts_test_instances(name: str) -> None:
    _valid(json.loads((DATA / f"{name}.json").read_text()))
    _valid(instance_to_dict(load(name)))


@pytest.mark.parametrize("name", ["serial_ends", "serial_rs"])
def test_serial_phase_ends_round_trip_and_match_the_schema(name: str, tmp_path: Path) -> None:
    instance = load(name)
    assert instance.network.serial_phase_ends and not load("tiny_rs").network.serial_phase_ends
    save_instance(instance, tmp_path / "copy.json")
    assert load_instance(tmp_path / "copy.json") == instance
    _valid(json.loads((DATA / f"{name}.json").read_text()))
    _valid(instance_to_dict(instance))


def test_defaults_are_filled_in() -> None:
    inst = load("three_dim")
    assert inst.network.endpoint_delay_ns == 10
    assert [d.algorithm.value for d in inst.network.dimensions] == ["ring", "direct", "halving_doubling"]
    assert [d.name for d in inst.network.dimensions] == ["d0", "d1", "d2"]
    assert inst.collectives[0].issue_ns == 0 and inst.collectives[0].dimensions is None


def test_round_trip_results(worked: Instance, tmp_path: Path) -> None:
    result = solve(worked, "cpsat", workers=1, time_limit=5)
    path = tmp_path / "result.json"
    save_result(result, path)
    again = load_result(path)
    assert again.schedule == result.schedule
    assert again.makespan == result.makespan and again.bounds == result.bounds
    assert again.stats == result.stats and again.trajectory == result.trajectory
    assert result_to_dict(again) == result_to_dict(result)


def _apply(data: Any, path: list[Any], value: Any) -> None:
    """Set (or delete, for _DELETE) the field at ``path`` inside ``data``."""
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    _apply(data, path, value)
    return data


_DELETE = object()

BAD = [
    (["network", "dimensions", 1, "size"], 0, r"network\.dimensions\[1\]\.size: must be >= 1, got 0"),
    (["network", "dimensions", 0, "size"], -4, r"network\.dimensions\[0\]\.size: must be >= 1"),
    (["network", "dimensions", 3, "size"], 6, r"dimensions\[3\]\.size: must be a power of two under halving_doubling"),
    (["network", "serial_phase_ends"], 1, r"serial_phase_ends: must be true or false"),
    (["network", "dimensions", 0, "topology"], "torus", r"dimensions\[0\]\.topology: must be one of"),
    (["network", "dimensions", 0, "bandwidth_gbps"], "fast", r"bandwidth_gbps: must be a number"),
    (["network", "dimensions", 0, "bandwidth_gbps"], 0, r"bandwidth_gbps: must be >= 1e-06"),
    (["network", "dimensions", 0, "bandwidth_gbps"], 1e12, r"bandwidth_gbps: must be <= 1e\+09"),
    (["network", "dimensions", 0, "size"], 10**20, r"dimensions\[0\]\.size: must be <= 1048576"),
    (["network", "dimensions", 0, "latency_ns"], 1e300, r"latency_ns: must be <= 1e\+15"),
    (
        ["network", "dimensions"],
        [{"size": 2, "topology": "ring", "bandwidth_gbps": 1, "latency_ns": 0}] * 17,
        r"network\.dimensions: must hold at most 16 dimensions",
    ),
    (["collectives", 0, "size_bytes"], 10**17, r"collectives\[0\]\.size_bytes: must be <= 1125899906842624"),
    (["collectives", 0, "chunks"], 10**7, r"collectives\[0\]\.chunks: must be <= 1048576"),
    (["collectives", 0, "issue_ns"], 1e16, r"collectives\[0\]\.issue_ns: must be <= 1e\+15"),
    (["network", "dimensions", 0, "latency_ns"], _DELETE, r"dimensions\[0\]\.latency_ns: missing required field"),
    (["network", "dimensions", 0, "colour"], "red", r"dimensions\[0\]\.colour: unknown field"),
    (["network", "endpoint_delay_ns"], -1, r"network\.endpoint_delay_ns: must be >= 0"),
    (["network", "innermost_charge"], "yes", r"innermost_charge: must be true or false"),
    (["network", "dimensions"], [], r"network\.dimensions: must hold at least one"),
    (["collectives", 0, "size_bytes"], 3, r"collectives\[0\]\.chunks: must be <= size_bytes"),
    (["collectives", 0, "size_bytes"], 0, r"collectives\[0\]\.size_bytes: must be >= 1"),
    (["collectives", 0, "size_bytes"], 1.5, r"size_bytes: must be an integer"),
    (["collectives", 0, "size_bytes"], True, r"size_bytes: must be an integer"),
    (["collectives", 0, "kind"], "broadcast", r"collectives\[0\]\.kind: must be one of"),
    (["collectives", 1, "dimensions"], [0, 9], r"collectives\[1\]\.dimensions\[1\]: must be < 4"),
    (["collectives", 1, "dimensions"], [1], r"collectives\[1\]\.dimensions: must include a dimension of size >= 2"),
    (["collectives", 1, "dimensions"], [0, 0], r"collectives\[1\]\.dimensions: must not repeat"),
    (["collectives", 2, "issue_ns"], -5, r"collectives\[2\]\.issue_ns: must be >= 0"),
    (["collectives"], [], r"collectives: must hold at least one"),
    (["format"], "other", r"format: must be 'themis-opt-instance'"),
    (["version"], 3, r"version: must be 1 or 2"),
    (["network"], _DELETE, r"network: missing required field"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD)
def test_bad_instances_name_the_field(path: list[Any], value: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=message):
        instance_from_dict(_mutate(path, value))
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(_mutate(path, value)))
    with pytest.raises(InputError) as error:
        load_instance(file)
    assert str(error.value).startswith(f"{file}: ")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"format": NaN}', "NaN is not a number JSON allows"),
        ('{"a": 1, "a": 2}', "appears twice"),
        ("[1, 2]", "must be an object"),
        ("\xff\xfe", "not valid JSON"),
        ('{"name": "cut', "not valid JSON: Unterminated string starting at line 1 column 10$"),
    ],
)
def test_malformed_json(text: str, message: str, tmp_path: Path) -> None:
    file = tmp_path / "bad.json"
    file.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load_instance(file)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_instance(tmp_path / "nope.json")
    with pytest.raises(InputError, match="is a directory"):
        load_instance(tmp_path)


def test_data_classes_validate_themselves() -> None:
    with pytest.raises(InputError, match="size: must be >= 1"):
        Dimension(0, "ring", 10.0, 1.0)
    with pytest.raises(InputError, match="chunks: must be <= size_bytes"):
        Collective("all_reduce", 4, 5)
    network = Network((Dimension(2, "ring", 10.0, 1.0),))
    with pytest.raises(InputError, match=r"tasks\[0\] \(c0\)\.dimensions\[0\]: must be < 1"):
        Instance(network, (Collective("all_reduce", 4, 2, dimensions=(3,)),))


def _mutations() -> st.SearchStrategy[tuple[list[Any], Any]]:
    paths = st.sampled_from(
        [
            ["name"],
            ["network", "endpoint_delay_ns"],
            ["network", "dimensions"],
            ["network", "dimensions", 0],
            ["network", "dimensions", 0, "size"],
            ["network", "dimensions", 2, "algorithm"],
            ["network", "dimensions", 3, "topology"],
            ["network", "dimensions", 1, "bandwidth_gbps"],
            ["collectives"],
            ["collectives", 0],
            ["collectives", 0, "chunks"],
            ["collectives", 1, "dimensions"],
            ["collectives", 2, "issue_ns"],
            ["collectives", 0, "kind"],
            ["version"],
            ["extra"],
        ]
    )
    values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.lists(st.integers(-3, 5), max_size=4),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        st.just(_DELETE),
    )
    return st.tuples(paths, values)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(_mutations(), min_size=1, max_size=3))
def test_mutated_instances_raise_only_input_error(mutations: list[tuple[list[Any], Any]]) -> None:
    data = copy.deepcopy(VALID)
    for path, value in mutations:
        try:
            _apply(data, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    try:
        instance = instance_from_dict(data)
    except InputError as error:
        assert "\n" not in str(error)
        return
    assert instance_from_dict(instance_to_dict(instance)) == instance


def test_a_number_of_more_digits_than_python_converts_is_one_error(tmp_path: Path) -> None:
    document = json.loads((DATA / "tiny_ar.json").read_text())
    text = json.dumps(document).replace('"size_bytes": ', '"size_bytes": ' + "9" * 5000 + ', "x": ', 1)
    path = tmp_path / "huge.json"
    path.write_text(text)
    with pytest.raises(InputError, match="not valid JSON: a number of more than"):
        load_instance(path)


@pytest.mark.parametrize(
    ("key", "value"), [("makespan_ns", -1.0), ("runtime_s", -0.5), ("method", "magic"), ("intra", "lifo")]
)
def test_a_result_claiming_the_impossible_is_bad_input(worked: Instance, key: str, value: object) -> None:
    from themis_opt.formats.native import result_from_dict

    data = {**result_to_dict(solve(worked, "themis")), key: value}
    with pytest.raises(InputError) as error:
        result_from_dict(data)
    assert error.value.path == key


def test_a_collectives_group_round_trips_and_is_checked(tmp_path: Path) -> None:
    from themis_opt.instance import Collective, Dimension, Instance, Network

    network = Network((Dimension(4, "ring", 100.0, 500.0), Dimension(4, "switch", 50.0, 1000.0)))
    instance = Instance(network, (Collective("reduce_scatter", 2**20, 4, group=(0, 4, 8)),))
    save_instance(instance, tmp_path / "g.json")
    assert load_instance(tmp_path / "g.json") == instance
    data = json.loads((tmp_path / "g.json").read_text())
    for bad, message in (([0, 16], "names NPU 16"), ([0], "of one NPU"), (list(range(16)), "is every NPU")):
        data["tasks"][0]["group"] = bad
        with pytest.raises(InputError, match=message):
            instance_from_dict(data)


def test_stages_and_sends_round_trip_and_are_checked(tmp_path: Path) -> None:
    instance = load("two_stages")
    raw = json.loads((DATA / "two_stages.json").read_text())
    _valid(raw)
    _valid(instance_to_dict(instance))
    save_instance(instance, tmp_path / "s.json")
    assert load_instance(tmp_path / "s.json") == instance
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["stage_npus"] == [0, 2] and [t.get("stage", 0) for t in written["tasks"]] == [0, 0, 1, 1, 1, 0, 0]
    for change, message in (
        ({"stage_npus": [0]}, r"tasks\[2\] \(f1\).stage: is 1, but stage_npus names 1 stage"),
        ({"stage_npus": [0, 3]}, r"tasks\[3\] \(s1\).group: a send of stage 1 leaves from its NPU 3, not NPU 2"),
        ({"stage_npus": [0, 4]}, r"stage_npus\[1\]: must be <= 3"),
    ):
        with pytest.raises(InputError, match=message):
            instance_from_dict({**raw, **change})
    one_stage = {**raw, "tasks": [t for t in raw["tasks"] if t["id"] in ("f0", "s0")]}
    del one_stage["stage_npus"]
    assert instance_from_dict(one_stage).num_stages == 1


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("dim", True, "dim: must be an integer"),
        ("dim", 16, "dim: must be <= 15"),
        ("op", "broadcast", "op: must be one of"),
        ("start_ns", float("nan"), "start_ns: must be finite"),
        ("bytes_in", -1, "bytes_in: must be >= 0"),
        ("end_ns", 0.5, "end_ns: is before start_ns"),
        ("extra", 1, "extra: unknown field"),
    ],
)
def test_a_bad_phase_among_many_is_named_where_it_is(field: str, value: object, problem: str) -> None:
    from tests.conftest import load
    from themis_opt.formats.native import result_from_dict

    # the phases are checked all at once; a bad one is named as the checks one by one name it
    data = result_to_dict(solve(load("merged_baseline"), "themis"))
    phases = [(i, j) for i, c in enumerate(data["schedule"]["chunks"]) for j in range(len(c["phases"]))]
    i, j = phases[len(phases) // 2]
    phase = data["schedule"]["chunks"][i]["phases"][j]
    if field == "end_ns":
        phase["start_ns"] = 1.0
    phase[field] = value
    with pytest.raises(InputError) as error:
        result_from_dict(data)
    assert f"schedule.chunks[{i}].phases[{j}].{problem}" in str(error.value)
    assert result_from_dict(result_to_dict(solve(load("merged_baseline"), "themis"))).schedule is not None
