"""Output paths checked before long work starts: a file can be written there, or files in a folder."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from themis_opt.errors import InputError


def check_writable(path: str | Path) -> None:
    """Raise :class:`InputError` unless a file can be written at ``path``, its missing folders
    created (checked before long work starts, so that no result is lost at the end). The check
    writes: it makes the missing folders and the file, then removes what it made.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), "is a folder, not a file")
    if path.exists():
        try:
            open(path, "ab").close()  # appending nothing changes nothing
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None
        return
    with _made_folders(path.parent, str(path)):
        try:
            open(path, "xb").close()
            path.unlink()
        except OSError as error:
            raise InputError(str(path), f"cannot be written ({error.strerror or error})") from None


def check_folder(path: str | Path) -> None:
    """Raise :class:`InputError` unless files can be written in the folder ``path`` (made if
    missing); checked, like :func:`check_writable`, by writing and removing what it made.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(str(path), "exists and is not a folder")
    with _made_folders(path, str(path)):
        try:
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as error:
            raise InputError(str(path), f"cannot be written in ({error.strerror or error})") from None


@contextlib.contextmanager
def _made_folders(folder: Path, where: str) -> Iterator[None]:
    """Make ``folder``'s missing folders for the body, and remove them after it."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(where, f"cannot be written ({folder} is not a folder)")
    made: list[Path] = []
    try:
        for new in reversed(missing):
            try:
                new.mkdir()
            except OSError as error:
                raise InputError(where, f"cannot be written (cannot make {new}: {error.strerror or error})") from None
            made.append(new)
        yield
    finally:
        for new in reversed(made):
            with contextlib.suppress(OSError):
                new.rmdir()
