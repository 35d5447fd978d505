import pickle

from themis_opt.errors import InputError


def test_an_error_prints_as_one_line_whatever_the_input_smuggles_in() -> None:
    error = InputError("tasks[0].\nsize", "unknown field\r\u2028")
    assert len(str(error).splitlines()) == 1
    assert "\\n" in str(error) and "\\u2028" in str(error)
    assert error.path == "tasks[0].\nsize"  # the fields keep what was given


def test_a_plain_error_is_path_colon_problem() -> None:
    assert str(InputError("network.dimensions[1].size", "must be >= 1, got 0")) == (
        "network.dimensions[1].size: must be >= 1, got 0"
    )
    assert str(InputError("", "no location")) == "no location"


def test_an_error_survives_pickling() -> None:  # it crosses process pools
    again = pickle.loads(pickle.dumps(InputError("where", "what")))
    assert (again.path, again.problem, str(again)) == ("where", "what", "where: what")
