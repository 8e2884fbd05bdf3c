"""``vclip shard``: write a dataset as WebDataset tar shards that loaders read by byte range."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import VideoError
from ._common import EXIT_FAILED, add_progress_option, exit_status, progress_bar, refused_arguments, report_error, say


def _run_shard(args: argparse.Namespace) -> int:
    """Write the shards; videos that cannot be read are reported and left out, never fatal; a
    write that fails (a full disk) is reported, with nothing of the run left."""
    from ..webdataset import write_shards

    bar = progress_bar(args, unit="video", leave=False)
    with refused_arguments():
        try:
            written = write_shards(args.source, args.out, max_size=args.max_size, max_count=args.max_count,
                                   overwrite=args.overwrite, on_video=bar.update)
        except (FileNotFoundError, VideoError) as error:
            raise ValueError(str(error)) from None
        except OSError as error:
            report_error("shard", error.strerror or str(error))
            return EXIT_FAILED
        finally:
            bar.close()
    for path, problem in written.skipped:
        say(f"vclip shard: skipped {path}: {problem}", sys.stderr)
    if args.json:
        print(json.dumps({
            "shards": list(written.shards), "index_files": list(written.index_files),
            "description": written.description, "videos": written.videos, "remuxed": written.remuxed,
            "skipped": [{"file": path, "problem": problem} for path, problem in written.skipped],
            "bytes": written.bytes, "seconds": written.seconds,
        }, indent=2))
    elif not written.videos:
        say(f"no video could be written ({len(written.skipped)} skipped); nothing was written or removed")
    else:
        say(f"{written.videos} videos ({written.remuxed} remuxed to faststart MP4), {len(written.skipped)} skipped "
             f"-> {len(written.shards)} shards, {written.bytes / 2**20:.1f} MiB, in {written.seconds:.1f} s; "
             f"dataset description {written.description}")
    return exit_status(written.videos + len(written.skipped), len(written.skipped))


def add_parser(commands) -> None:
    """The ``vclip shard`` sub-command."""
    shard = commands.add_parser(
        "shard", help="write a dataset as WebDataset tar shards (video + .cls/.json per sample)",
        description="Write the videos of SOURCE (a folder with one subfolder per class or of videos, a list "
                    "file, a catalog .parquet, or shards to re-shard) in its order into WebDataset tar shards: "
                    "per video KEY.mp4 (MP4s remuxed with their moov atom first when it came last, so a member "
                    "is read by byte range), KEY.cls (the label) and KEY.json (label, class_name, source). "
                    "Beside each shard a wds2idx member index (NAME.idx), and for the set a wids description "
                    "(shardindex.json, with the class names). Only videos go into shards: every file is opened as "
                    "a video first. Exit status 3 when some videos were skipped, 1 when the shards could not be "
                    "written (nothing of the run is then left).")
    shard.add_argument("source", metavar="SOURCE")
    shard.add_argument("--out", required=True, metavar="PATTERN",
                       help="shard files with a placeholder for the number, e.g. 'out/shard-{000000}.tar'")
    shard.add_argument("--max-size", default="1GB", metavar="SIZE", help="largest shard (default 1GB)")
    shard.add_argument("--max-count", type=int, metavar="N", help="largest number of videos per shard")
    shard.add_argument("--overwrite", action="store_true",
                       help="replace the shard set already there (every file the pattern names, their indexes and "
                            "the description, once the new set is written)")
    shard.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_progress_option(shard)
    shard.set_defaults(handler=_run_shard)
