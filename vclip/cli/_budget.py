"""``vclip budget``: memory of a batch by the formula and of a ClipLoader, and what fits a budget."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .._engine.scheduler import resolve_decode_processes
from .._outputs.images import (
    CHART_FORMATS,
    ChartSeries,
    memory_chart,
)
from ..errors import VideoError, check_integer, format_bytes, parse_bytes
from ..index import index_video
from ..memory import (
    BYTES_PER_ELEMENT,
    MemoryEstimate,
    estimate_memory,
    fit_to_budget,
    largest_batch_size,
    largest_sequence_length,
    left_to_loader,
    plan_loader_memory,
)
from ..sampling import (
    check_scaling_factor,
    scaled_size,
)
from ._common import (
    EXIT_OK,
    UsageError,
    add_device_option,
    add_renamed_option,
    refused_arguments,
)


def _variants(args: argparse.Namespace, width: int, height: int) -> list[tuple[str, MemoryEstimate]]:
    """The configuration with one choice changed at a time: dtype, scaling factor, NV12, augmentation.
    Labels of the rows that are the configuration itself end in "(this)"."""
    common = dict(batch_size=args.batch_size, sequence_length=args.sequence_length,
                  augmentation_factor=args.augmentation_factor)
    this = {True: " (this)", False: ""}
    variants = []
    for dtype in ("uint8", "float16", "float32"):
        variants.append((f"dtype {dtype}{this[dtype == args.dtype]}",
                         estimate_memory(width=width, height=height, channels=args.channels, dtype=dtype, **common)))
    for factor in sorted({1.0, 0.5, 0.25, args.scaling_factor}, reverse=True):
        scaled_width, scaled_height = scaled_size(args.width, args.height, factor)
        label = f"scaling factor {factor:g} ({scaled_width}x{scaled_height}){this[factor == args.scaling_factor]}"
        variants.append((label, estimate_memory(width=scaled_width, height=scaled_height, channels=args.channels,
                                         dtype=args.dtype, **common)))
    variants.append(("NV12 surfaces (uint8, 1.5 bytes/pixel)",  # Y plane plus half-height interleaved UV
                     estimate_memory(width=width, height=height + (height + 1) // 2, channels=1, dtype="uint8",
                                     **common)))
    if args.augmentation_factor:
        variants.append(("no augmentation copies", estimate_memory(
            width=width, height=height, channels=args.channels, dtype=args.dtype,
            batch_size=args.batch_size, sequence_length=args.sequence_length)))
    return variants


def _budget_chart(args: argparse.Namespace, budget: int | None, batch: int | None,
                  lines: Sequence[tuple[str, Callable[[int], int], int | None]]) -> str:
    """Write ``args.chart``: memory against batch size, one line per ``(label, bytes of a batch size,
    largest batch that fits)``, with the budget and ``batch`` (``--batch-size``, when given) marked."""
    marked = {size for size in (batch, *(largest for _, _, largest in lines)) if size}
    top = max(*marked, 2) * 5 // 4 + 1
    batches = sorted(marked | set(np.linspace(1, top, min(top, 64)).round().astype(int).tolist()))
    series = [ChartSeries(label, [bytes_of(batch) for batch in batches], largest)
              for label, bytes_of, largest in lines]
    title = f"{args.width}x{args.height}x{args.channels} {args.dtype}, {args.sequence_length} frames per clip"
    if args.scaling_factor != 1:
        title += f", scaling factor {args.scaling_factor:g}"
    return memory_chart(args.chart, batches, series, title=title, budget=budget, batch_size=batch)


def _integer_or_text(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _loader_estimate(args: argparse.Namespace, width: int, height: int, batch: int):
    """What a ClipLoader with the given prefetch depth, decode threads and processes needs."""
    return plan_loader_memory(
        width=width, height=height, batch_size=batch, sequence_length=args.sequence_length, channels=args.channels,
        dtype=args.dtype, augmentation_factor=args.augmentation_factor, prefetch_queue_depth=args.prefetch_queue_depth,
        num_threads=args.num_threads, decode_processes=args.decode_processes, cpu_decoders=args.cpu_decoders,
        device=args.device, video_width=args.video_width, video_height=args.video_height,
    )


def _source_size(args: argparse.Namespace) -> None:
    """Fill ``args.video_width`` and ``args.video_height``: the videos the loader decodes, from
    ``--video`` (its size), the pair given, or the output size (clips not resized)."""
    given = args.video_width is not None or args.video_height is not None
    if args.video is not None:
        if given:
            raise UsageError("--video gives the source size: leave out --video-width and --video-height")
        try:
            index = index_video(args.video)
        except VideoError as error:
            raise UsageError(f"--video: {error}") from None
        args.video_width, args.video_height = index.width, index.height
    elif given:
        if args.video_width is None or args.video_height is None:
            raise UsageError("--video-width and --video-height go together (the size of the videos decoded)")
        with refused_arguments():
            check_integer("--video-width", args.video_width, minimum=1)
            check_integer("--video-height", args.video_height, minimum=1)
    else:
        args.video_width, args.video_height = args.width, args.height


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{setting} {count}" for setting, count in counts.items())


def _bottom_line(args: argparse.Namespace, batch_given: bool, budget: int | None, loader, fitted,
                 lowered: dict[str, int], loader_largest: int | None, formula_largest: int | None) -> str:
    """One sentence that answers the question asked: what fits the budget, or what a loader needs."""
    source = f"{args.video_width}x{args.video_height} videos"
    if budget is None:
        return f"a ClipLoader of batch_size={args.batch_size} from {source} needs {format_bytes(loader.total)}"
    formula = (f" (the formula alone allows {formula_largest:,}: it counts one batch and nothing else)"
               if formula_largest != loader_largest else "")
    within = args.budget.strip()
    if batch_given:
        verdict = "fits in" if fitted.total <= budget else "does not fit in"
        lowering = (f" once memory_budget lowers {_counts_text(lowered)}" if lowered and fitted.total <= budget
                    else "")
        return (f"batch_size={args.batch_size} {verdict} {within} with a ClipLoader from {source}{lowering}; the "
                f"largest that fits is batch_size={loader_largest:,}{formula}")
    return f"batch_size={loader_largest:,} is the largest a ClipLoader from {source} fits in {within}{formula}"


def _run_budget(args: argparse.Namespace) -> int:
    _source_size(args)
    batch_given = args.batch_size is not None
    if not batch_given:
        if args.budget is None:
            raise UsageError("--batch-size is needed, unless --budget asks for the largest batch that fits")
        args.batch_size = 1  # the figures below are per clip
    with refused_arguments():
        if args.prefetch_queue_depth != "auto":
            args.prefetch_queue_depth = check_integer("--prefetch-queue-depth",
                                                      _integer_or_text(args.prefetch_queue_depth), minimum=1)
        check_integer("--num-threads", args.num_threads, minimum=0)
        if args.decode_processes != "auto":
            args.decode_processes = check_integer("--decode-processes", _integer_or_text(args.decode_processes),
                                                  minimum=0)
        if args.cpu_decoders != "auto":
            args.cpu_decoders = check_integer("--cpu-decoders", _integer_or_text(args.cpu_decoders), minimum=0)
        base = dict(channels=args.channels, dtype=args.dtype, augmentation_factor=args.augmentation_factor)
        estimate_memory(width=args.width, height=args.height, batch_size=args.batch_size,
                        sequence_length=args.sequence_length, **base)
        check_scaling_factor(args.scaling_factor)
        budget = parse_bytes(args.budget, name="--budget") if args.budget is not None else None
    if budget is not None and budget < 2**20 and args.budget.strip().replace(".", "").isdigit():
        raise UsageError(f"--budget {args.budget} has no unit, so it reads as {budget:,} bytes; name the unit "
                         f"(e.g. --budget {args.budget.strip()}GiB or {args.budget.strip()}GB)")
    if args.chart is not None and Path(args.chart).suffix.lower() not in CHART_FORMATS:
        raise UsageError(f"--chart ({args.chart!r}) must end in {', '.join(CHART_FORMATS)}")
    width, height = scaled_size(args.width, args.height, args.scaling_factor)
    current = estimate_memory(width=width, height=height, batch_size=args.batch_size,
                              sequence_length=args.sequence_length, **base)
    variants = _variants(args, width, height)
    largest_batch = largest_sequence = None
    if budget is not None:
        largest_batch = largest_batch_size(budget, width=width, height=height,
                                           sequence_length=args.sequence_length, **base)
        largest_sequence = largest_sequence_length(budget, width=width, height=height,
                                                   batch_size=args.batch_size, **base)
    loader = _loader_estimate(args, width, height, args.batch_size)
    left = left_to_loader(vars(args))
    fitted, lowered = fit_to_budget(loader, budget, left) if budget is not None else (loader, {})
    # with memory_budget a loader lowers what was left to it: the largest batch is that of the least it runs with
    loader_largest = fit_to_budget(loader, 0, left)[0].largest_batch_size(budget) if budget is not None \
        else None
    chart = None
    if args.chart:
        def formula(batch: int) -> int:
            return estimate_memory(width=width, height=height, batch_size=batch,
                                   sequence_length=args.sequence_length, **base).bytes

        def loader_bytes(batch: int) -> int:
            return _loader_estimate(args, width, height, batch).total

        try:
            chart = _budget_chart(args, budget, args.batch_size if batch_given else None,
                                  [("formula", formula, largest_batch),
                                   ("ClipLoader", loader_bytes, loader_largest)])
        except ImportError as error:
            raise UsageError(f"--chart: {error}") from None
    loader_report = {
        "prefetch_queue_depth": args.prefetch_queue_depth, "buffers": loader.buffers, "decoders": loader.decoders,
        "num_threads": args.num_threads, "decode_processes": args.decode_processes,
        "cpu_decoders": args.cpu_decoders, "device": args.device, "on_gpu": loader.cuda_context > 0,
        "bytes": loader.total,
        "output_buffers": loader.output_buffers, "decode_surfaces": loader.decode_surfaces,
        "workspace": loader.workspace, "cuda_context": loader.cuda_context, "staging": loader.staging,
        "fits": None if budget is None or not batch_given else fitted.total <= budget,
        "lowered": lowered, "bytes_within_budget": fitted.total if budget is not None else None,
        "largest_batch_size": loader_largest,
        "video_width": args.video_width, "video_height": args.video_height,
    }
    bottom_line = _bottom_line(args, batch_given, budget, loader, fitted, lowered, loader_largest, largest_batch)
    if args.json:
        print(json.dumps({
            "width": width, "height": height, "channels": args.channels, "dtype": args.dtype,
            "bytes_per_element": BYTES_PER_ELEMENT[args.dtype], "batch_size": args.batch_size if batch_given else None,
            "sequence_length": args.sequence_length,
            "augmentation_factor": args.augmentation_factor, "scaling_factor": args.scaling_factor,
            "bytes": current.bytes, "gb": current.gb, "gib": current.gib,
            "variants": [{"choice": label, "bytes": estimate.bytes, "ratio": estimate.bytes / current.bytes}
                         for label, estimate in variants],
            "budget_bytes": budget, "fits": None if budget is None else current.bytes <= budget,
            "largest_batch_size": largest_batch, "chart": chart,
            "largest_sequence_length": largest_sequence if batch_given else None,
            "loader": loader_report, "bottom_line": bottom_line,
        }, indent=2))
        return EXIT_OK
    scaled = f" (scaling factor {args.scaling_factor:g} of {args.width}x{args.height})"
    scaled = "" if args.scaling_factor == 1 else scaled
    what = f"batch {args.batch_size}" if batch_given else "one clip (no --batch-size)"
    print(f"one batch: {width}x{height}{scaled}, {args.channels} channels, {args.dtype}, {what}, "
          f"{args.sequence_length} frames, augmentation factor {args.augmentation_factor:g}")
    print(f"  {width} x {height} x {args.channels} x {current.bytes_per_element} x {args.batch_size} x "
          f"{args.sequence_length} x (1 + {args.augmentation_factor:g}) = {current}")
    print(f"\n{'what each choice costs, the rest unchanged':<44}{'bytes':>16} {'GB':>9} {'GiB':>9} {'vs this':>9}")
    for label, estimate in variants:
        print(f"  {label:<42}{estimate.bytes:>16,} {estimate.gb:>9.2f} {estimate.gib:>9.2f} "
              f"{estimate.bytes / current.bytes:>8.2f}x")
    if budget is not None:
        verdict = (f"fits ({current.bytes / budget:.0%} of it)" if current.bytes <= budget
                   else f"does not fit (needs {current.bytes / budget:.2f}x)")
        print(f"\nbudget {format_bytes(budget)}" + (f": this batch {verdict}" if batch_given else ", by the formula:"))
        print(f"  {f'largest batch size at {args.sequence_length} frames':<42}{largest_batch:>16,}")
        if batch_given:
            print(f"  {f'largest sequence length at batch {args.batch_size}':<42}{largest_sequence:>16,}")
    place = f"{loader.decoders} NVDEC decoders" if loader.cuda_context else "the CPU (host memory)"
    if not loader.cuda_context and args.device == "auto":
        place += "; no usable GPU here: --device cuda plans for one"
    processes = resolve_decode_processes(args.decode_processes, gpu=bool(loader.cuda_context),
                                         num_threads=args.num_threads)
    print(f"\na ClipLoader (prefetch_queue_depth {args.prefetch_queue_depth}: {loader.buffers} output buffers; "
          f"{place}; {processes} decode processes) needs, for {what}:")
    print(f"  {format_bytes(loader.total)}")
    parts = [("output buffers", loader.output_buffers), ("decode surfaces", loader.decode_surfaces),
             ("workspace", loader.workspace), ("CUDA contexts", loader.cuda_context)]
    if loader.staging:
        parts.append(("CPU decoders' staging", loader.staging))
    for label, part in parts:
        print(f"  {label:<42}{part:>16,}")
    if budget is not None:
        verdict = "fits in" if loader.total <= budget else "does not fit in"
        if lowered and fitted.total <= budget:
            verdict = (f"the most it may run does not fit in; with memory_budget it runs with {_counts_text(lowered)}, "
                       f"{format_bytes(fitted.total)}")
        print(f"  budget {format_bytes(budget)}: {verdict}; largest batch size the loader fits: {loader_largest:,}")
        if loader_largest == 0:
            print(f"  (the parts that do not grow with the batch take {format_bytes(loader.fixed_bytes)})")
    if chart:
        print(f"\nchart: {chart}")
    print(f"\nbottom line: {bottom_line}")
    return EXIT_OK


def add_parser(commands) -> None:
    """The ``vclip budget`` sub-command."""
    budget = commands.add_parser(
        "budget", help="GPU memory of a batch by the formula and of a ClipLoader, and what fits a budget",
        description="bytes = W x H x C x bytes_per_element x batch x T x (1 + augmentation), what each choice "
                    "saves, and the largest batch size and sequence length that fit --budget; then what a "
                    "ClipLoader with these settings needs (its output buffers, decode "
                    "surfaces, workspace and CUDA contexts) and the largest batch it fits, for videos of "
                    "--video-width x --video-height (or --video's size) resized to --width x --height. "
                    "Without --batch-size (--budget needed) the figures are per clip and the question is the "
                    "largest batch. The last line gives the answer.")
    budget.add_argument("--width", type=int, required=True, metavar="W", help="frame width in pixels")
    budget.add_argument("--height", type=int, required=True, metavar="H", help="frame height in pixels")
    budget.add_argument("--video-width", type=int, metavar="W",
                        help="width of the videos the loader decodes, when clips are resized (default --width): "
                             "NVDEC surfaces are the video's size")
    budget.add_argument("--video-height", type=int, metavar="H", help="height of those videos (default --height)")
    budget.add_argument("--video", metavar="PATH", help="a video of the dataset: its size is the videos' size")
    add_renamed_option(budget, "--batch-size", "--batch", type=int, metavar="B",
                       help="clips per batch (optional with --budget)")
    add_renamed_option(budget, "--sequence-length", "--seq", type=int, required=True, metavar="T",
                       help="frames per clip")
    budget.add_argument("--channels", type=int, default=3, metavar="C", help="channels per pixel (default 3)")
    budget.add_argument("--dtype", choices=("uint8", "float16", "bfloat16", "float32"), default="uint8",
                        help="element type (default uint8)")
    add_renamed_option(budget, "--augmentation-factor", "--aug", type=float, default=0.0, metavar="A",
                       help="augmentation factor (default 0)")
    budget.add_argument("--scaling-factor", type=float, default=1.0, metavar="F",
                        help="frames downscaled by F, 0 < F <= 1 (default 1)")
    budget.add_argument("--budget", metavar="SIZE", help="memory available, e.g. 8GiB, 80GB, 512MiB")
    budget.add_argument("--chart", metavar="PATH",
                        help="draw memory against batch size into PATH (.png, .jpg, .svg or .pdf; needs "
                             "matplotlib: pip install 'vclip-nvdec[chart]')")
    budget.add_argument("--prefetch-queue-depth", default="auto", metavar="N",
                        help="the loader's prefetch_queue_depth: a count or auto (default auto: 6 with CPU "
                             "decoders beside NVDEC, else 2, which gives 4 output buffers)")
    budget.add_argument("--num-threads", type=int, default=0, metavar="N",
                        help="the loader's num_threads (default 0: 12 NVDEC decoders, 4 per process)")
    budget.add_argument("--decode-processes", default="auto", metavar="N",
                        help="the loader's decode_processes, each with its CUDA context: a count or auto "
                             "(default auto: 3 on a GPU with 8 cores or more unless --num-threads is set, else 0)")
    budget.add_argument("--cpu-decoders", default="auto", metavar="N",
                        help="the loader's cpu_decoders: a count or auto (default auto)")
    add_device_option(budget, what="where the loader decodes (cpu counts host buffers only)")
    budget.add_argument("--json", action="store_true", help="print the numbers as JSON")
    budget.set_defaults(handler=_run_budget)
