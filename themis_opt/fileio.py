"""Files in and out, safely: size-limited reads, atomic writes, and outputs checked before work starts.

* Every input is read with a size limit (:func:`input_limit`), so an endless
  input (``/dev/zero``, a pipe that never ends) is refused instead of being
  read until memory runs out.
* Every output file is written to a temporary file in its own folder, then
  moved over the path with :func:`os.replace`: a write that fails half-way (a
  full disk) leaves the earlier file as it was, and no temporary file behind.
* :func:`check_apart` refuses, before any work starts, an output path that is
  an input file or another output of the same command.

Errors are :class:`~themis_opt.errors.InputError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from themis_opt.errors import InputError

LIMIT_ENV = "THEMIS_OPT_MAX_INPUT_BYTES"  # environment variable that overrides MAX_INPUT_BYTES
# Instances, results, rows and ASTRA-sim files: the largest shipped instance is a few MB and a
# result of a 40,000-phase schedule about 5 MB; 1 GiB leaves room for far larger ones and still
# fits in memory on a laptop.
MAX_INPUT_BYTES = 2**30
# A --params TOML file holds a few dozen numbers (a few KB); 1 MiB is plenty, and an endless one ends fast.
MAX_PARAMS_BYTES = 2**20
# A YAML document's nodes once its aliases are expanded: an ASTRA-sim network file has a few dozen;
# nested aliases ("billion laughs") reach 10^9 and more from a few hundred bytes.
MAX_YAML_NODES = 100_000
_READ_BLOCK = 2**20  # bytes read at a time from a file whose size is not known in advance (a pipe, a device)


def input_limit() -> int:
    """The most bytes any input file may hold: ``THEMIS_OPT_MAX_INPUT_BYTES``, else :data:`MAX_INPUT_BYTES`.

    Raises
    ------
    InputError
        If the environment variable is set to anything but a whole number >= 1.
    """
    text = os.environ.get(LIMIT_ENV)
    if text is None or not text.strip():
        return MAX_INPUT_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(LIMIT_ENV, f"must be a whole number of bytes >= 1, got {text!r}")
    return value


def _too_large(path: Path, limit: int) -> InputError:
    return InputError(
        str(path), f"holds more than {limit:,} bytes, the input limit (the environment variable {LIMIT_ENV} sets it)"
    )


def check_size(path: str | Path, limit: int | None = None) -> None:
    """Raise :class:`InputError` if the regular file at ``path`` is larger than ``limit`` (default
    :func:`input_limit`); for readers that open the file themselves.
    """
    path = Path(path)
    limit = input_limit() if limit is None else limit
    with contextlib.suppress(OSError):  # a missing file is the reader's to report
        if path.stat().st_size > limit:
            raise _too_large(path, limit)


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them (default :func:`input_limit`).

    Raises
    ------
    InputError
        If the file does not exist, is a folder, cannot be read, or holds more than ``limit`` bytes.
    """
    path = Path(path)
    limit = input_limit() if limit is None else limit
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) and size > limit:
                raise _too_large(path, limit)
            data = bytearray()
            while len(data) <= limit:  # a device or a pipe says no size: read until the limit is passed
                block = handle.read(min(_READ_BLOCK, limit + 1 - len(data)))
                if not block:
                    break
                data += block
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), "is a directory, not a file") from None
    except OSError as error:
        raise InputError(str(path), f"cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise _too_large(path, limit)
    return bytes(data)


def read_text(path: str | Path, limit: int | None = None) -> str:
    """The UTF-8 text of ``path``, read as :func:`read_bytes` reads it."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(str(path), "not a UTF-8 text file") from None


# ---------------------------------------------------------------- writing


def _target(path: Path) -> Path:
    """Where a write to ``path`` lands: through symbolic links, so a link keeps pointing at the file."""
    try:
        return path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError):  # a link loop: the write reports it
        return path


def _special(path: Path) -> bool:
    """Whether ``path`` exists and is not a regular file (``/dev/null``, a FIFO): written in place."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _mode_for(path: Path) -> int:
    """The permissions a replaced file keeps, or a new file's (``0o666`` less the umask)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_writer(path: str | Path, mode: str = "w", **open_args: Any) -> Iterator[IO[Any]]:
    """A file handle whose content replaces ``path`` only when the body ends without an error.

    The content goes to a temporary file in the same folder (missing folders
    are made), then :func:`os.replace` moves it over ``path``: a reader sees
    the old file or the new one, never a cut one, and a write that fails (a
    full disk) leaves the old file as it was and no temporary file behind. A
    path that exists and is not a regular file (``/dev/null``, a FIFO) is
    written in place.

    Parameters
    ----------
    path
        The file to write.
    mode
        ``"w"`` (text, UTF-8 unless ``open_args`` say otherwise) or ``"wb"``.
    **open_args
        Passed to :func:`open` (``newline=""`` for CSV).

    Raises
    ------
    InputError
        If the file cannot be written, naming it and why.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    target = _target(path)
    if "b" not in mode:
        open_args.setdefault("encoding", "utf-8")
    if _special(target):
        try:
            with open(target, mode, **open_args) as handle:
                yield handle
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
        return
    temporary: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with open(descriptor, mode, **open_args) as handle:
            yield handle
        os.chmod(temporary, _mode_for(target))
        os.replace(temporary, target)
        temporary = None
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def check_new_folder(path: str | Path, *, force: bool = False, keep: Sequence[str | Path] = ()) -> None:
    """Raise :class:`InputError` unless ``path`` can be written as a new folder (see :func:`atomic_folder`):
    for the checks before any work. Replaced whole (``force``), it must hold none of ``keep`` (the inputs).
    """
    path = Path(path)
    for kept in keep:
        if force and path.is_dir() and Path(kept).resolve().is_relative_to(path.resolve()):
            raise InputError("--out", f"holds {kept}, an input: --force would replace it with the folder")
    if path.exists() and not path.is_dir():
        raise InputError(str(path), "exists and is not a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise InputError(str(path), "is a folder that is not empty: give a new one (or --force to replace it whole)")


@contextlib.contextmanager
def atomic_folder(path: str | Path, *, force: bool = False) -> Iterator[Path]:
    """A new folder whose files replace ``path`` whole only when the body ends without an error.

    The body writes into a temporary folder beside ``path``; then it takes ``path``'s place in one
    rename: a reader sees no folder (or the old one) or the whole new one, never a mix, and a body
    that fails (an error, Ctrl-C, a full disk) leaves no temporary folder behind.

    Raises
    ------
    InputError
        If ``path`` is a file, or a folder that is not empty (unless ``force``: then it is
        replaced whole), naming it.
    """
    path = Path(path)
    check_new_folder(path, force=force)
    temporary: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
        yield temporary
        old: Path | None = None
        if path.is_dir() and any(path.iterdir()):  # force: the old folder goes once the new one is whole
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            os.replace(path, old / path.name)
        os.replace(temporary, path)  # onto nothing, or an empty folder
        temporary = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path, "w") as handle:
        handle.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`atomic_writer`)."""
    with atomic_writer(path, "wb") as handle:
        handle.write(data)


# ---------------------------------------------------------------- planning outputs


def names_a_folder(text: str | Path) -> bool:
    """Whether an output path given as a file names a folder: an existing one, or one written with a
    trailing separator (``out/``), which :class:`~pathlib.Path` would silently drop.
    """
    text = str(text)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def check_file_output(option: str, text: str | Path) -> None:
    """Raise :class:`InputError` if the output file ``text`` of ``option`` names a folder.

    A command that writes files refuses a folder rather than guess a name in
    it; the commands that write folders (``generate``, ``export-astra``,
    ``plot-bench``) write inside theirs.
    """
    if names_a_folder(text):
        raise InputError(option, f"is a folder, not a file ({text}): this command writes a file, give its name")


def check_apart(outputs: Sequence[tuple[str, Path]], inputs: Iterable[str | Path]) -> None:
    """Raise :class:`InputError` if an output is an input file, or two outputs are one file.

    Parameters
    ----------
    outputs
        (what writes it, e.g. ``--out``, path) for every file the command
        will write, the derived ones (one file per method, a folder's files)
        included.
    inputs
        Every file the command reads.
    """
    read = {_identity(Path(p)): Path(p) for p in inputs}
    seen: dict[object, tuple[str, Path]] = {}
    for option, out in outputs:  # each path's identity once: a folder of a thousand traces stays linear
        key = _identity(Path(out))
        if key in seen:
            other = seen[key][0]
            raise InputError(option, f"writes {out}, which {other} writes too: one would overwrite the other")
        if key in read:
            raise InputError(option, f"writes {out}, an input file too ({read[key]}): it would be overwritten")
        seen[key] = (option, out)


def _identity(path: Path) -> object:
    """What names one file: its device and inode where it exists (links, hard links), else its resolved path."""
    try:
        found = path.stat()
        return (found.st_dev, found.st_ino)
    except (OSError, ValueError):
        try:
            return str(path.resolve())
        except (OSError, RuntimeError):
            return str(path.absolute())


def check_yaml_expansion(node: Any, most: int = MAX_YAML_NODES) -> None:
    """Raise :class:`InputError` if a composed YAML document (PyYAML's node graph, where every alias
    is its anchor's node) holds more than ``most`` nodes once its aliases are expanded, or an
    alias inside its own anchor, naming the top-level key that holds it. Counted once per distinct
    node: as fast as the document is short.
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    where = [""]  # the top-level key being counted

    def size(n: Any) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise InputError("", f"not plain YAML (an alias inside its own anchor{where[0]})")
        open_.add(key)
        value = n.value
        children = (
            []
            if isinstance(value, str)
            else [c for item in value for c in (item if isinstance(item, tuple) else (item,))]
        )
        total = 1
        for child in children:
            total += size(child)
            if total > most:
                problem = f"more than {most:,} values once its aliases are expanded{where[0]}"
                raise InputError("", f"not plain YAML ({problem})")
        open_.discard(key)
        sizes[key] = total
        return total

    value = node.value
    if isinstance(value, list) and all(isinstance(item, tuple) and len(item) == 2 for item in value):
        total = 1  # a mapping: each top-level key's value counted under its name
        for key, child in value:
            where[0] = f", under key {str(key.value)[:40]!r}" if isinstance(key.value, str) else ""
            total += size(key) + size(child)
            if total > most:
                raise InputError("", f"not plain YAML (more than {most:,} values once its aliases are expanded)")
        return
    size(node)
