"""The files of a shard set on disk, replaced as a whole or not at all.

- The family of a pattern (``out/shard-{000000}.tar``): every file in its folder that the pattern
  names (with any number), their ``wds2idx`` indexes and the folder's ``shardindex.json``.
- Staging: a run writes its files in a private folder it creates inside the output folder
  (``.vclip-shard-XXXXXXXX``, mode 0700), each opened with ``O_CREAT | O_EXCL | O_NOFOLLOW``, so
  no file or link planted there is ever written through.
- The swap, once every file is written and synced: the old description goes first, then every
  file of the old family, then the new files are moved in (one rename each, which replaces a link
  at a final name instead of following it), the new description last. A run stopped before the
  swap leaves the old set as it was (and its staging folder, which can be deleted); one stopped
  during it leaves no description and shards missing, never old and new shards side by side.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import BinaryIO

from .._bytes.descriptions import DESCRIPTION_NAME
from .._bytes.shards import member_index_names
from ..errors import ArgumentError

__all__ = ["PLACEHOLDER", "ShardFamily", "Staging", "index_name", "synced"]

PLACEHOLDER = re.compile(r"\{(0+)\}|%0?(\d*)d")
_STAGING_PREFIX = ".vclip-shard-"
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))


def index_name(shard: str) -> str:
    """The ``wds2idx`` member index beside ``shard``: ``NAME.idx`` for ``NAME.tar``, where a reader
    looks first."""
    return member_index_names(shard)[0]


class ShardFamily:
    """The files a shard pattern names in its folder.

    Args:
        out: ``"folder/shard-{000000}.tar"`` (zero-padded to the width of the braces) or with
            ``%06d``; the placeholder must be in the file name.

    Raises:
        ArgumentError: No placeholder, more than one, or one in a folder's name.
    """

    def __init__(self, out: str | os.PathLike):
        text = os.fspath(out)
        found = list(PLACEHOLDER.finditer(text))
        if len(found) != 1:
            raise ArgumentError(f"out ({text!r}) must hold one shard-number placeholder, e.g. "
                                "'out/shard-{000000}.tar' (or %06d)")
        folder, name = os.path.split(os.path.abspath(text))
        match = PLACEHOLDER.search(name)
        if match is None:
            raise ArgumentError(f"out ({text!r}): the shard-number placeholder must be in the file name, not in a "
                                "folder's (e.g. 'out/shard-{000000}.tar')")
        self.folder = folder
        self.width = len(match.group(1)) if match.group(1) else int(match.group(2) or 0)
        self._around = text[:found[0].start()], text[found[0].end():]  # ``out`` as written, around its placeholder
        digits = r"\d{" + str(max(self.width, 1)) + ",}"
        self._names = re.compile(re.escape(name[:match.start()]) + digits + re.escape(name[match.end():]))

    def shard(self, number: int) -> str:
        """The path of shard ``number`` as ``out`` names it (relative where ``out`` is)."""
        head, tail = self._around
        return f"{head}{number:0{self.width}d}{tail}"

    def existing(self) -> list[str]:
        """The family's files there now (shards, their indexes, the description), links included."""
        try:
            entries = sorted(entry.name for entry in os.scandir(self.folder))
        except FileNotFoundError:
            return []
        present = set(entries)
        shards = [name for name in entries if self._names.fullmatch(name)]
        indexes = [index_name(name) for name in shards if index_name(name) in present]
        found = shards + indexes + ([DESCRIPTION_NAME] if DESCRIPTION_NAME in present else [])
        return [os.path.join(self.folder, name) for name in found]


class Staging:
    """A private folder inside ``folder`` where a run writes its files, and the swap that moves them
    into ``folder`` (see the module docstring).

    Raises:
        OSError: The folder cannot be made or opened.
    """

    def __init__(self, folder: str):
        self.folder = folder
        self._folder_fd = os.open(folder, _DIRECTORY)
        try:
            self.path = tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=folder)  # mode 0700, made exclusively
            self._fd = os.open(os.path.basename(self.path), _DIRECTORY | getattr(os, "O_NOFOLLOW", 0),
                               dir_fd=self._folder_fd)
        except BaseException:
            os.close(self._folder_fd)
            raise
        self._staged: list[str] = []

    def create(self, final: str) -> BinaryIO:
        """A new, empty file that becomes ``final`` (a path in the folder) at the swap."""
        name = os.path.basename(final)
        descriptor = os.open(name, _NEW_FILE, 0o644, dir_fd=self._fd)
        self._staged.append(name)
        return os.fdopen(descriptor, "w+b")

    def size_of(self, final: str) -> int:
        """The size of the staged file that becomes ``final``."""
        return os.stat(os.path.basename(final), dir_fd=self._fd, follow_symlinks=False).st_size

    def scratch(self, name: str) -> str:
        """A path inside the private folder for a tool that writes by name (FFmpeg), not staged."""
        return os.path.join(self.path, name)

    def swap(self, old: list[str]) -> None:
        """Move the staged files into the folder in place of the ``old`` family (see the module
        docstring); the description, when staged, last."""
        os.fsync(self._fd)
        names = [os.path.basename(path) for path in old]
        for name in sorted(names, key=lambda name: name != DESCRIPTION_NAME):  # the description first
            try:
                os.unlink(name, dir_fd=self._folder_fd)
            except FileNotFoundError:
                pass
        for name in sorted(self._staged, key=lambda name: name == DESCRIPTION_NAME):  # the description last
            os.replace(name, name, src_dir_fd=self._fd, dst_dir_fd=self._folder_fd)
        os.fsync(self._folder_fd)
        self._staged.clear()

    def close(self) -> None:
        """Remove the private folder and whatever is left in it."""
        os.close(self._fd)
        os.close(self._folder_fd)
        shutil.rmtree(self.path, ignore_errors=True)


def synced(file: BinaryIO) -> None:
    """Flush ``file`` to the disk: a write the disk could not take shows here at the latest."""
    file.flush()
    os.fsync(file.fileno())
