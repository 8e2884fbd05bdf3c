"""The videos of WebDataset tar shards with their labels, as a dataset source: the class behind
:class:`vclip.webdataset.WebDatasetSource`, below the catalog and the loader that take it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .._bytes.shards import (
    DEFAULT_VIDEO_EXTENSIONS,
    LABEL_PAYLOAD_LIMIT,
    LabelRule,
    ShardSample,
    decode_member,
    list_shards,
    shard_names,
)
from .._bytes.sources import open_reader
from ..errors import ArgumentError, CorruptVideoError, check_integer, fail
from ..index import VideoIndex, index_video
from .inputs import LabeledVideo

__all__ = ["WebDatasetSource"]


class WebDatasetSource:
    """The videos of WebDataset tar shards, with their labels: a dataset for
    :class:`~vclip.ClipLoader` (``ClipLoader(WebDatasetSource(...), sampler)``; a string naming
    ``.tar`` shards is read with the defaults), :func:`vclip.catalog.build_catalog` and ``vclip index``.

    Each shard's member table comes from the ``wds2idx`` index beside it when there is one
    (``NAME.idx`` or ``NAME.tar.idx``, as ``vclip shard`` writes) and it fits the shard, else from one
    pass over the shard's headers (payloads are skipped; label members are read in the same
    requests). Members form samples by key, as WebDataset groups them; a sample's video is its
    first member with an extension of ``video_extensions``; samples without one are left out
    (counted in :attr:`without_video`).

    Args:
        shards: A shard (local path, ``https://`` or ``s3://`` URL: anything fsspec opens), a brace
            pattern (``"s3://bucket/shard-{000000..000127}.tar"``), a list of these, or a ``wids``
            dataset description (``.json``, with a ``shardlist``; vclip also reads its ``class_names``).
        video_extensions: Extensions of video members, in order of preference (lower case).
        label: Where a sample's label is: ``"auto"`` (default: the ``.cls`` member when every sample
            has one, no labels when none has); a member's extension whose text is the label
            (``"cls"``, ``"txt"``); ``"EXT:KEY.PATH"`` into a JSON member (``"json:label"``,
            ``"json:annotations.0.class"``); or None (every label -1). A label is an integer or a
            class name: names become positions in ``class_names``.
        class_names: Names of the labels (label ``i`` is ``class_names[i]``). Default: the wids
            description's ``class_names``, else the sorted distinct names when labels are names,
            else None.
        cache_dir: Folder for an on-disk cache of video indexes (as :class:`~vclip.ClipLoader`'s).
        workers: Shards whose member tables are read at once (default 16).

    Attributes:
        shards: The shards, in order (local ones as absolute paths).
        samples: One :class:`~vclip._bytes.shards.ShardSample` per video, in order.
        videos: ``LabeledVideo(name, label)`` per video, in the same order.
        class_names: As above.
        label_rule: The rule the labels came from (None: no labels).
        without_video: Samples left out for want of a video member.
        from_member_index: How many shards' member tables came from an index file.

    Raises:
        ArgumentError: Bad options; a label that is missing from some samples, not an integer or a
            name, or a name not in ``class_names``; no video in the shards.
        FileNotFoundError: A local shard that does not exist.
        VideoError: A shard that cannot be read, is compressed or is not a tar archive.
    """

    def __init__(
        self,
        shards: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        video_extensions: Sequence[str] = DEFAULT_VIDEO_EXTENSIONS,
        label: str | None = "auto",
        class_names: Sequence[str] | None = None,
        cache_dir: str | os.PathLike | None = None,
        workers: int = 16,
    ):
        if isinstance(video_extensions, str) or not video_extensions or not all(
                isinstance(extension, str) and extension for extension in video_extensions):
            raise fail("video_extensions", video_extensions, "a non-empty sequence of extensions, e.g. ('mp4', 'webm')")
        self.video_extensions = tuple(extension.lower().lstrip(".") for extension in video_extensions)
        rule = None if label is None or label == "auto" else LabelRule.parse(label)
        if label is not None and not isinstance(label, str):
            raise fail("label", label, "'auto', an extension such as 'cls', 'EXT:KEY.PATH' such as 'json:label', "
                       "or None")
        workers = check_integer("workers", workers, minimum=1)
        names, description = shard_names(shards)
        listings = list_shards(names, self.video_extensions, (rule or LabelRule("cls")).extension if label else None,
                               workers)
        self.shards: tuple[str, ...] = tuple(names)
        self.cache_dir = cache_dir
        self.samples: list[ShardSample] = [sample for listing in listings for sample in listing.samples]
        self.without_video = sum(listing.without_video for listing in listings)
        self.from_member_index = sum(listing.from_member_index for listing in listings)
        if not self.samples:
            raise ArgumentError(f"shards ({shards!r}) hold no video member (extensions "
                                f"{', '.join(self.video_extensions)}; {self.without_video} samples without one)")
        payloads = {(listing.shard, offset): data for listing in listings for offset, data in listing.payloads.items()}
        if class_names is None and isinstance(description, dict) and isinstance(description.get("class_names"), list):
            class_names = description["class_names"]
        labels, self.class_names, self.label_rule = _labels(self.samples, payloads, rule, label == "auto", class_names)
        self.videos: list[LabeledVideo] = [LabeledVideo(sample.name, value)
                                           for sample, value in zip(self.samples, labels)]

    def __len__(self) -> int:
        return len(self.videos)

    def __repr__(self) -> str:
        classes = f", {len(self.class_names)} classes" if self.class_names else ""
        return f"WebDatasetSource({len(self.shards)} shards, {len(self.videos)} videos{classes})"

    def index(self, number: int) -> VideoIndex:
        """The index of video ``number`` (one demux pass over its member's bytes; cached)."""
        return index_video(self.videos[number].path, cache_dir=self.cache_dir)

    stored_index = index

    def metadata(self, number: int) -> dict[str, Any]:
        """The other members of video ``number``'s sample, by extension, decoded as WebDataset
        decodes them (JSON parsed, ``cls`` an integer, ``txt`` a string, anything else bytes):
        e.g. ``{"json": {"caption": ...}, "txt": "..."}``. Read when asked for (one request).

        Raises:
            CorruptVideoError: A member that is not what its extension says (naming the sample).
        """
        sample = self.samples[number]
        others = [(extension, member) for extension, member in sample.members.items()
                  if extension != sample.video_extension]
        if not others:
            return {}
        data = open_reader(sample.shard).read_ranges([(member.offset, member.size) for _, member in others])
        found = {}
        for (extension, _), payload in zip(others, data):
            try:
                found[extension] = decode_member(extension, payload)
            except ValueError as error:
                raise CorruptVideoError(sample.name, f"its .{extension} member is {error}") from None
        return found


def _labels(samples: list[ShardSample], payloads: dict[tuple[str, int], bytes], rule: LabelRule | None, auto: bool,
            class_names: Sequence[str] | None) -> tuple[list[int], tuple[str, ...] | None, LabelRule | None]:
    """Each sample's label (-1 without a rule), the class names and the rule the labels came from."""
    names = tuple(class_names) if class_names is not None else None
    if rule is None and not auto:
        return [-1] * len(samples), names, None
    chosen = rule or LabelRule("cls")
    found: list[int | str] = []
    missing = []
    for sample in samples:
        member = sample.members.get(chosen.extension)
        data = payloads.get((sample.shard, member.offset)) if member is not None else None
        if data is None:
            missing.append(sample)
            continue
        try:
            found.append(chosen.value(data, _where(sample)))
        except ValueError as error:
            raise ArgumentError(str(error)) from None
    if auto and rule is None and len(missing) == len(samples):
        return [-1] * len(samples), names, None
    if missing:
        first = missing[0]
        raise ArgumentError(f"{len(missing)} of {len(samples)} samples have no .{chosen.extension} label member "
                            f"(of at most {LABEL_PAYLOAD_LIMIT:,} bytes), e.g. {_where(first)}; pass "
                            "label= with where the labels are (e.g. 'json:label'), or label=None")
    kinds = {type(value) for value in found}
    if kinds == {int}:
        return [int(value) for value in found], names, chosen
    if kinds != {str}:
        number = next(k for k, value in enumerate(found) if isinstance(value, int))
        name = next(k for k, value in enumerate(found) if isinstance(value, str))
        raise ArgumentError(f"labels ({chosen}) mix integers and class names, e.g. {_where(samples[number])} has "
                            f"{found[number]!r} and {_where(samples[name])} has {found[name]!r}; give them one kind")
    if names is None:
        names = tuple(sorted(set(map(str, found))))
    position = {name: number for number, name in enumerate(names)}
    unknown = [number for number, value in enumerate(found) if value not in position]
    if unknown:
        at = unknown[0]
        raise ArgumentError(f"labels ({chosen}) name classes not in class_names ({len(unknown)} samples), e.g. "
                            f"{_where(samples[at])} has {found[at]!r} (class_names: "
                            f"{', '.join(map(repr, names[:5]))}{', ...' if len(names) > 5 else ''})")
    return [position[str(value)] for value in found], names, chosen


def _where(sample: ShardSample) -> str:
    return f"{sample.shard}#{sample.key}"
