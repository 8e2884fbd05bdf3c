"""Outputs the command line can trust: safe, unique names inside ``--out``, an ``--out`` checked
before any decoding, files written whole or not at all, and text that prints whatever the
terminal's encoding.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from ..errors import OutputError

__all__ = ["OutputError", "printable", "safe_name", "unique_names", "check_output_file", "check_output_folder",
           "inside", "written_whole", "all_or_none"]

_MAX_NAME_BYTES = 120  # well under the 255 bytes most file systems allow, leaving room for suffixes
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def printable(text: str, stream: TextIO | None = None) -> str:
    """``text`` as ``stream`` (default stdout) can print it: bytes of a file name that are not valid
    UTF-8 as ``\\xNN``, characters the stream's encoding lacks as backslash escapes."""
    try:  # undecodable file-name bytes arrive as surrogate escapes (os.fsdecode)
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text.encode("ascii", "backslashreplace").decode("ascii")


def safe_name(path: str | os.PathLike, fallback: str = "video") -> str:
    """A file name made from ``path``'s stem that stays inside the folder it is joined to.

    Letters, digits, ``.``, ``-``, ``_`` and ``+`` are kept (any script); everything else,
    undecodable bytes included, becomes ``_``. No leading dots (never ``.``, ``..`` or hidden),
    no leading dash, no trailing dots or spaces, at most 120 bytes; ``fallback`` when nothing is left.
    """
    stem = os.fsdecode(Path(os.fsdecode(path)).name)
    stem = stem[: -len(Path(stem).suffix)] if Path(stem).suffix else stem
    name = "".join(c if (c.isalnum() and c.isprintable() and not 0xDC80 <= ord(c) <= 0xDCFF) or c in ".-_+"
                   else "_" for c in stem)
    name = name.lstrip(".-").rstrip(". ")
    while len(name.encode("utf-8")) > _MAX_NAME_BYTES:
        name = name[:-1]
    if not name.strip("_"):
        name = fallback
    if name.split(".")[0].upper() in _WINDOWS_RESERVED:
        name = "_" + name
    return name


def unique_names(paths: Sequence[str | os.PathLike], *, taken: Iterable[str] = ()) -> list[str]:
    """One safe name per path (:func:`safe_name`), unique without regard to case and distinct from
    ``taken``. Deterministic: a name shared by different files gets ``-`` and 8 hex digits of a hash
    of the file's absolute path, whatever the order of the inputs; so does a name in ``taken``, or
    the same file listed again (then with ``-2``, ``-3``, ... where still needed)."""
    bases = [safe_name(path) for path in paths]
    counts: dict[str, set[str]] = {}
    for base, path in zip(bases, paths):
        counts.setdefault(base.lower(), set()).add(os.path.abspath(os.fsdecode(path)))
    used = {name.lower() for name in taken}
    names = []
    for base, path in zip(bases, paths):
        full = os.path.abspath(os.fsdecode(path))
        name = base
        if len(counts[base.lower()]) > 1 or base.lower() in used:
            digest = hashlib.sha1(full.encode("utf-8", "surrogateescape")).hexdigest()[:8]
            name = f"{base}-{digest}"
        candidate, number = name, 1
        while candidate.lower() in used:
            number += 1
            candidate = f"{name}-{number}"
        used.add(candidate.lower())
        names.append(candidate)
    return names


def inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` (resolved) lies inside ``folder`` (resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def check_output_file(out: Path, option: str = "--out", *, make_folder: bool = False) -> None:
    """Refuse a file ``out`` that cannot be written: its folder missing (unless ``make_folder``:
    then the first existing folder above it must be writable) or not a folder, ``out`` itself an
    existing folder or a symbolic link to nothing, or a name the system refuses (too long).

    Raises:
        OutputError: Naming ``out`` and the problem.
    """
    with _refused_by_the_system(out, option):
        _refuse_dangling_link(out, option)
        if out.is_dir():
            raise OutputError(f"{option} ({os.fsdecode(out)!r}) is an existing folder; name a file")
        parent = out.parent if str(out.parent) else Path(".")
        if make_folder:
            _check_folder_can_be_made(parent, out, option)
            return
        if not parent.is_dir():
            what = "is a file, not a folder" if parent.exists() else "does not exist"
            raise OutputError(f"{option} ({os.fsdecode(out)!r}): its folder {os.fsdecode(parent)!r} {what}")
        if not os.access(parent, os.W_OK):
            raise OutputError(f"{option} ({os.fsdecode(out)!r}): its folder {os.fsdecode(parent)!r} is not writable")


def check_output_folder(out: Path, option: str = "--out") -> None:
    """Refuse a folder ``out`` that cannot be made or written: an existing file, or below one, a
    symbolic link to nothing, in a folder this user cannot write, or a name the system refuses.

    Raises:
        OutputError: Naming ``out`` and the problem.
    """
    with _refused_by_the_system(out, option):
        _refuse_dangling_link(out, option)
        if out.exists() and not out.is_dir():
            raise OutputError(f"{option} ({os.fsdecode(out)!r}) is an existing file, not a folder")
        _check_folder_can_be_made(out, out, option)


def _check_folder_can_be_made(folder: Path, out: Path, option: str) -> None:
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            break
        _refuse_dangling_link(existing, option)
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{option} ({os.fsdecode(out)!r}): {os.fsdecode(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{option} ({os.fsdecode(out)!r}): {os.fsdecode(existing)!r} is not writable")


def _refuse_dangling_link(path: Path, option: str) -> None:
    if path.is_symlink() and not path.exists():
        raise OutputError(f"{option} ({os.fsdecode(path)!r}) is a symbolic link to "
                          f"{os.fsdecode(os.readlink(path))!r}, which does not exist")


@contextmanager
def _refused_by_the_system(out: Path, option: str) -> Iterator[None]:
    """OSErrors of the checks (a name over 255 bytes, a path over PATH_MAX) as an OutputError."""
    try:
        yield
    except OSError as error:
        raise OutputError(f"{option} ({os.fsdecode(out)!r}) cannot be used: {error.strerror or error}") from None


@contextmanager
def written_whole(path: str | os.PathLike) -> Iterator[str]:
    """A temporary name beside ``path`` (with its suffix, which writers go by) to write to; renamed
    to ``path`` once the block succeeds and its bytes reached the file system, removed if it
    fails. A failed write (a full disk) so never leaves a cut-off ``path`` behind, and never
    replaces an earlier one."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial{Path(name).suffix}")
    try:
        yield temporary
        with open(temporary, "rb+") as written:  # a write the disk could not take shows here at the latest
            os.fsync(written.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


@contextmanager
def all_or_none(folder: str | os.PathLike) -> Iterator[list[str]]:
    """``folder`` (made if missing) and a list the block adds each file it writes there to: when
    the block fails (a full disk), those files are removed again, and ``folder`` too when this made
    it, so a set of files is left whole or not at all."""
    folder = Path(folder)
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    try:
        yield written
    except BaseException:
        for path in written:
            with suppress(OSError):
                os.unlink(path)
        if made:
            with suppress(OSError):
                folder.rmdir()
        raise
