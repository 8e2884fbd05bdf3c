"""Train a tiny 3D-convolution network on clips from vclip.ClipLoader, on the GPU when there is one.

Makes a small labelled set of synthetic videos in one folder per class: "slow" videos pan across
their texture over 96 frames, "fast" ones over 24 (the motion a network has to tell apart), at two
frame sizes. The loader draws random 8-frame clips at stride 2, resizes them to 64x64, flips half
of them, normalizes them and delivers [B, 3, T, H, W] batches (layout CTHW), ready for Conv3d.

    python samples/train_action_recognition.py [--epochs 12] [--device auto] [--folder DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a source checkout

import vclip  # noqa: E402
from vclip.synthetic import make_video  # noqa: E402

CLASSES = {"fast": 24, "slow": 96}  # frames over which the view pans across the whole texture


def make_dataset(root: Path, videos_per_class: int = 4) -> Path:
    """One folder per class of synthetic videos (made once)."""
    for name, num_frames in CLASSES.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for number in range(videos_per_class):
            path = root / name / f"{name}_{number}.mp4"
            if not path.exists():
                width, height = (160, 120) if number % 2 else (192, 144)
                make_video(
                    path,
                    num_frames=num_frames,
                    width=width,
                    height=height,
                    keyframe_interval=24,
                    seed=number + 10 * len(name),
                )
    return root


def tiny_3d_network(classes: int) -> nn.Module:
    """Two 3D convolutions, global pooling and a linear classifier: [B, 3, T, H, W] -> [B, classes]."""
    return nn.Sequential(
        nn.Conv3d(3, 16, kernel_size=3, stride=(1, 2, 2), padding=1),
        nn.ReLU(),
        nn.Conv3d(16, 32, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool3d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default)")
    parser.add_argument("--folder", default=None, help="where the synthetic videos go (default: a temp folder)")
    parser.add_argument("--decode-processes", type=int, default=0, help="decode worker processes (default 0: threads)")
    arguments = parser.parse_args()
    torch.manual_seed(0)

    root = make_dataset(Path(arguments.folder or tempfile.mkdtemp(prefix="vclip-actions-")))
    loader = vclip.ClipLoader(
        str(root),
        vclip.strided(8, 2),
        transform=vclip.TransformSpec.imagenet(64, train=True, layout="CTHW"),
        batch_size=8,
        clips_per_video=4,
        shuffle=True,
        seed=0,
        device=arguments.device,
        decode_processes=arguments.decode_processes,
    )
    device = torch.device(loader.device)
    print(f"{loader}\nclasses {loader.class_names}; memory estimate {loader.memory_estimate}")
    model = tiny_3d_network(len(loader.class_names)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    for epoch in range(arguments.epochs):
        loader.set_epoch(epoch)
        started, clips, losses = time.perf_counter(), 0, []
        for batch in loader:
            loss = nn.functional.cross_entropy(model(batch.data), batch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            clips += len(batch)
        seconds = time.perf_counter() - started
        waited = loader.stats().seconds.consumer_wait
        print(
            f"epoch {epoch}: loss {sum(losses) / len(losses):.3f} (last {losses[-1]:.3f}), "
            f"{clips / seconds:.1f} clips/s, {len(losses)} steps; waited {waited:.2f} s for data so far"
        )
    loader.close()


if __name__ == "__main__":
    main()
