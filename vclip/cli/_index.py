"""``vclip index``: a dataset catalog (Parquet) that loaders start from."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ._common import (
    UsageError,
    add_ray_options,
    add_stream_option,
    exit_status,
    ray_options,
    refused_arguments,
)


def _run_index(args: argparse.Namespace) -> int:
    """Build or update a dataset catalog; bad videos are listed in it and reported, never fatal."""
    if Path(args.out).suffix.lower() != ".parquet":
        raise UsageError(f"--out ({args.out!r}) must end in .parquet (the catalog is one Parquet file)")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers ({args.workers}) must be >= 1")
    ray = ray_options(args)
    try:
        from ..catalog import build_catalog, check_catalog_out, resolve_sources
    except ImportError as error:  # pyarrow missing: an extra to install, as for every other command
        raise UsageError(str(error)) from None
    with refused_arguments():
        try:  # bad paths, list files and --out are usage errors, found before any work
            sources = resolve_sources(args.paths)
            check_catalog_out(os.path.abspath(args.out))
        except FileNotFoundError as error:
            raise ValueError(str(error)) from None
    built = build_catalog(sources, args.out, workers=args.workers, stream_index=args.stream_index,
                          incremental=not args.rebuild, **ray)
    for path, problem in built.unusable:
        print(f"vclip index: unusable {path}: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "catalog": built.path, "videos": built.videos, "indexed": len(built.indexed), "kept": built.kept,
            "unusable": [{"file": path, "problem": problem} for path, problem in built.unusable],
            "seconds": built.seconds, "videos_per_second": built.videos_per_second, "engine": built.engine,
            "workers": built.workers,
        }, indent=2))
    else:
        nbytes = os.path.getsize(built.path)
        size = f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"
        videos = f"{built.videos} video{'s' if built.videos != 1 else ''}"
        print(f"{videos} ({len(built.indexed)} indexed, {built.kept} unchanged), {len(built.unusable)} unusable "
              f"-> {built.path} ({size}) in {built.seconds:.1f} s "
              f"({built.videos_per_second:.1f} videos/s, {built.engine})")
    return exit_status(built.videos, len(built.unusable))


def add_parser(commands) -> None:
    index = commands.add_parser(
        "index", help="index every video of a dataset into one catalog (Parquet) that loaders start from",
        description="Index videos in parallel (every core, or a Ray cluster with --ray) and write one Parquet "
                    "table: per video its stream facts, label, content fingerprint and the per-frame arrays "
                    "loaders need, so they start without opening any video. PATHS are video files, folders "
                    "(one subfolder per class, or videos without classes), list files ('path label' per "
                    "line) and WebDataset shards (.tar paths, URLs or brace patterns such as "
                    "'s3://bucket/shard-{000000..000127}.tar': one row per video member, located by shard, "
                    "offset and size). Unusable videos are reported and listed in the catalog with the error. "
                    "Run again into the same --out to index only new or changed files; files no longer in PATHS "
                    "are dropped. Exit status 3 when some videos are unusable.")
    index.add_argument("paths", nargs="+", metavar="PATH")
    index.add_argument("--out", required=True, metavar="CATALOG.parquet", help="the catalog to write or update")
    index.add_argument("--workers", type=int, metavar="N",
                       help="videos indexed at once (default: every core; with --ray one per CPU of the cluster)")
    index.add_argument("--rebuild", action="store_true", help="index every video again, even if unchanged")
    add_ray_options(index, "index")
    index.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_stream_option(index)
    index.set_defaults(handler=_run_index)
