"""Reading and writing instances and results as JSON (format version 2; version 1 files still load).

Readers are strict: unknown, missing, duplicated or mistyped fields and
non-finite numbers raise :class:`~themis_opt.errors.InputError` naming the
field path, so a typo never turns silently into a default.

Which module holds what:

* :mod:`themis_opt.formats.native.jsonfile`: the strict JSON parser and
  reader (:func:`parse_json`, :func:`read_json`, :func:`in_file`), the
  checks of a document's fields, and the writer (:func:`write_json`);
* :mod:`themis_opt.formats.native.instances`: instance files
  (:func:`load_instance`, :func:`save_instance`, :func:`instance_from_dict`,
  :func:`instance_to_dict`, :func:`instance_schema`);
* :mod:`themis_opt.formats.native.results`: result files
  (:func:`load_result`, :func:`save_result`, :func:`result_from_dict`,
  :func:`result_to_dict`, :func:`schedule_to_dict`);
* :mod:`themis_opt.formats.native.outputs`: output paths checked before long
  work starts (:func:`check_writable`, :func:`check_folder`).

``themis_opt.formats.native`` re-exports every public name of these modules.
"""

from themis_opt.formats.native.instances import (
    INSTANCE_FORMAT,
    NetworkFile,
    instance_from_dict,
    instance_schema,
    instance_to_dict,
    load_instance,
    load_network,
    save_instance,
)
from themis_opt.formats.native.jsonfile import VERSION, VERSIONS, in_file, parse_json, read_json, write_json
from themis_opt.formats.native.outputs import check_folder, check_writable
from themis_opt.formats.native.results import (
    RESULT_FORMAT,
    load_result,
    result_from_dict,
    result_to_dict,
    save_result,
    schedule_to_dict,
)

__all__ = [
    "INSTANCE_FORMAT",
    "RESULT_FORMAT",
    "VERSION",
    "VERSIONS",
    "NetworkFile",
    "check_folder",
    "check_writable",
    "in_file",
    "instance_from_dict",
    "instance_schema",
    "instance_to_dict",
    "load_instance",
    "load_network",
    "load_result",
    "parse_json",
    "read_json",
    "result_from_dict",
    "result_to_dict",
    "save_instance",
    "save_result",
    "schedule_to_dict",
    "write_json",
]
