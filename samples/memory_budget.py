"""Budget GPU memory before a run: bytes by the formula, what each choice saves, what fits.

    python samples/memory_budget.py                 # a few typical configurations, 8 GiB budget
    python samples/memory_budget.py --budget 80GB

    bytes = W x H x C x bytes_per_element x batch x T x (1 + augmentation_factor)

It ends by decoding a real batch on the CPU and checking that the tensor takes exactly the bytes
the formula says (the formula counts the batch, not decode surfaces or the CUDA context).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import vclip
from vclip.synthetic import make_video

CONFIGURATIONS = [  # (what it is, estimate_memory arguments)
    ("1080p RGB uint8, the reference", dict(width=1920, height=1080, batch_size=32, sequence_length=16)),
    ("1080p float16", dict(width=1920, height=1080, batch_size=32, sequence_length=16, dtype="float16")),
    ("1080p float32", dict(width=1920, height=1080, batch_size=32, sequence_length=16, dtype="float32")),
    ("1080p uint8 at scaling factor 0.5 (960x540)", dict(width=960, height=540, batch_size=32, sequence_length=16)),
    (
        "1080p kept as NV12 (1.5 bytes/pixel)",
        dict(width=1920, height=1080 + 540, channels=1, batch_size=32, sequence_length=16),
    ),
    (
        "training input [8, 16, 3, 224, 224] float32",
        dict(width=224, height=224, batch_size=8, sequence_length=16, dtype="float32"),
    ),
    (
        "... with one augmented copy",
        dict(width=224, height=224, batch_size=8, sequence_length=16, dtype="float32", augmentation_factor=1),
    ),
]


def print_estimates(budget: str) -> None:
    reference = vclip.estimate_memory(**CONFIGURATIONS[0][1]).bytes
    print(f"{'configuration':<46}{'bytes':>44}  {'vs reference':>12}")
    for label, inputs in CONFIGURATIONS:
        estimate = vclip.estimate_memory(**inputs)
        print(f"{label:<46}{str(estimate):>44}  {estimate.bytes / reference:>11.2f}x")
    print(f"\nwhat fits {budget} ({vclip.format_bytes(vclip.parse_bytes(budget))}):")
    for label, inputs in CONFIGURATIONS:
        options = {k: v for k, v in inputs.items() if k not in ("batch_size", "sequence_length")}
        batch = vclip.largest_batch_size(budget, sequence_length=inputs["sequence_length"], **options)
        length = vclip.largest_sequence_length(budget, batch_size=inputs["batch_size"], **options)
        print(
            f"  {label:<46} batch <= {batch:>5} at T={inputs['sequence_length']},"
            f"  T <= {length:>5} at batch {inputs['batch_size']}"
        )


def check_against_a_real_batch() -> None:
    with tempfile.TemporaryDirectory() as folder:
        video = make_video(Path(folder) / "clip.mp4", num_frames=60, width=320, height=240)
        decoder = vclip.VideoDecoder(video, device="cpu")
        clips = decoder.get_clips(
            vclip.strided(8, 2, clips_per_video=4, seed=0), transform=vclip.TransformSpec.imagenet(112)
        )
    estimate = vclip.estimate_memory(width=112, height=112, batch_size=4, sequence_length=8, dtype="float32")
    verdict = "equal" if clips.data.nbytes == estimate.bytes else "DIFFERENT"
    print(
        f"\nreal batch {clips.data.shape} {clips.data.dtype}: {clips.data.nbytes:,} bytes, "
        f"formula: {estimate.bytes:,} bytes ({verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="GPU memory by the formula, and what fits a budget.")
    parser.add_argument("--budget", default="8GiB", help="memory available (default 8GiB)")
    args = parser.parse_args()
    print_estimates(args.budget)
    check_against_a_real_batch()


if __name__ == "__main__":
    main()
