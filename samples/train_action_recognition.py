"""Train a small SlowFast network with a published augmentation recipe, then evaluate it with 10 x 3 views.

Makes a labelled set of synthetic videos in one folder per class: "slow" videos pan across their
texture over 96 frames, "fast" ones over 24 (the motion a network has to tell apart), at two frame
sizes and in both orientations, split into training and validation videos. Everything the recipe
draws happens inside vclip's one pass from the decoded picture to the batch, and is recorded per
clip (``batch.augmentations``).

Training (``--recipe slowfast``, the default): SlowFast's Kinetics recipe, scaled to these small
videos. SlowFast trains on 64 frames at stride 2 whose shorter side is jittered in [256, 320]
pixels, a random 224 crop and a left-right flip; here 16 consecutive frames (the fast videos have
24), shorter side in [64, 80], a random 56 crop and the flip. ``--recipe videomae``: VideoMAE's
random resized crop (scale (0.08, 1), ratio (3/4, 4/3)) to 56, resampled as torchvision's
antialiased bilinear, with the flip and the colour changes of contrastive video recipes (CVRL):
ColorJitter(0.4, 0.4, 0.4, 0.1) and RandomGrayscale(0.2) per clip; it learns more slowly.

Evaluation: SlowFast's test protocol, every validation video exactly once (``evaluation=True``):
``--clips`` evenly spaced clips (10 in the paper) x 3 spatial crops along the longer side of the
frame resized to the crop size (256 in the paper, 64 here), each clip decoded once and converted 3
times; the softmax scores of a video's clips and views are averaged (``batch.video_ids``).

The network: a SlowFast of two 3D-convolution pathways, the slow one on every 4th frame (alpha 4)
with 4x the channels of the fast one on every frame (beta 1/4 here, 1/8 in the paper), a lateral
connection from fast to slow, global average pooling and a linear classifier over both.

    python samples/train_action_recognition.py [--epochs 12] [--recipe slowfast|videomae] [--device auto]
        [--folder DIR] [--clips 4] [--decode-processes 0]
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
FRAMES, STRIDE, CROP, ALPHA = 16, 1, 56, 4
COLOUR = dict(color_jitter=vclip.ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.2)
NORMALIZE = dict(mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD, dtype="float32", layout="CTHW")
RECIPES = {
    "slowfast": vclip.TransformSpec(resize=vclip.RandomShortSideScale(64, 80), crop=CROP, crop_mode="random",
                                    flip_probability=0.5, **NORMALIZE),
    "videomae": vclip.TransformSpec(crop=vclip.RandomResizedCrop(CROP, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
                                    flip_probability=0.5, interpolation="bilinear", **COLOUR, **NORMALIZE),
}
EVALUATION = vclip.TransformSpec(resize=64, crop=64, spatial_views=3, **NORMALIZE)  # 3 crops of 64 along the long side


def make_dataset(root: Path, videos_per_class: int = 6) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Training and validation ``(path, label)`` lists of synthetic videos (made once): a third of
    each class is held out."""
    train, validation = [], []
    for label, (name, num_frames) in enumerate(sorted(CLASSES.items())):
        (root / name).mkdir(parents=True, exist_ok=True)
        for number in range(videos_per_class):
            path = root / name / f"{name}_{number}.mp4"
            if not path.exists():
                width, height = ((160, 120), (192, 144), (120, 160))[number % 3]  # the last one portrait
                make_video(path, num_frames=num_frames, width=width, height=height, keyframe_interval=24,
                           seed=number + 10 * len(name))
            (validation if number % 3 == 2 else train).append((str(path), label))
    return train, validation


class SlowFast(nn.Module):
    """Two pathways over ``[B, 3, T, H, W]`` clips: slow (every ``alpha``-th frame, wide) and fast
    (every frame, ``channels // 4`` wide), fused by a time-strided convolution from fast to slow."""

    def __init__(self, classes: int, channels: int = 32, alpha: int = ALPHA):
        super().__init__()
        fast = channels // 4
        self.alpha = alpha
        self.slow_stem = nn.Sequential(nn.Conv3d(3, channels, (1, 5, 5), (1, 2, 2), (0, 2, 2)),
                                       nn.BatchNorm3d(channels), nn.ReLU())
        self.fast_stem = nn.Sequential(nn.Conv3d(3, fast, (5, 5, 5), (1, 2, 2), (2, 2, 2)), nn.BatchNorm3d(fast),
                                       nn.ReLU())
        self.lateral = nn.Conv3d(fast, 2 * fast, (5, 1, 1), (alpha, 1, 1), (2, 0, 0))
        self.slow_block = nn.Sequential(nn.Conv3d(channels + 2 * fast, 2 * channels, (1, 3, 3), (1, 2, 2), (0, 1, 1)),
                                        nn.BatchNorm3d(2 * channels), nn.ReLU())
        self.fast_block = nn.Sequential(nn.Conv3d(fast, 2 * fast, (3, 3, 3), (1, 2, 2), (1, 1, 1)),
                                        nn.BatchNorm3d(2 * fast), nn.ReLU())
        self.head = nn.Linear(2 * channels + 2 * fast, classes)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        fast = self.fast_stem(clips)
        slow = self.slow_stem(clips[:, :, :: self.alpha])
        slow = self.slow_block(torch.cat([slow, self.lateral(fast)], dim=1))
        fast = self.fast_block(fast)
        pooled = torch.cat([slow.mean(dim=(2, 3, 4)), fast.mean(dim=(2, 3, 4))], dim=1)
        return self.head(pooled)


def evaluate(model: nn.Module, loader: vclip.ClipLoader, classes: int, device: torch.device) -> tuple[float, int]:
    """Top-1 accuracy of the per-video average of softmax scores over every clip and view, and the views seen."""
    model.eval()
    videos = len(loader.videos)
    scores = torch.zeros(videos, classes, device=device)
    labels = torch.full((videos,), -1, dtype=torch.long, device=device)
    seen = 0
    with torch.no_grad():
        for batch in loader:
            ids = batch.video_ids.to(device)
            scores.index_add_(0, ids, model(batch.data).softmax(dim=1))
            labels[ids] = batch.labels
            seen += len(batch)
    model.train()
    covered = labels >= 0
    return (scores[covered].argmax(1) == labels[covered]).float().mean().item(), seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="slowfast")
    parser.add_argument("--clips", type=int, default=4, help="evenly spaced clips per video in evaluation (paper: 10)")
    parser.add_argument("--device", default="auto", help="cuda, cuda:N, cpu or auto (default)")
    parser.add_argument("--folder", default=None, help="where the synthetic videos go (default: a temp folder)")
    parser.add_argument("--decode-processes", type=int, default=0, help="decode worker processes (default 0: threads)")
    arguments = parser.parse_args()
    torch.manual_seed(0)

    train, validation = make_dataset(Path(arguments.folder or tempfile.mkdtemp(prefix="vclip-actions-")))
    options = dict(device=arguments.device, decode_processes=arguments.decode_processes)
    loader = vclip.ClipLoader(train, vclip.strided(FRAMES, STRIDE), transform=RECIPES[arguments.recipe],
                              batch_size=8, clips_per_video=4, shuffle=True, seed=0, **options)
    evaluation = vclip.ClipLoader(
        validation, vclip.strided(FRAMES, STRIDE, starts="even", clips_per_video=arguments.clips),
        transform=EVALUATION, batch_size=4, evaluation=True, **options,
    )
    device = torch.device(loader.device)
    print(f"{loader}\nrecipe {arguments.recipe}: {loader.transform}\nmemory estimate {loader.memory_estimate}")
    print(f"evaluation: {evaluation}, {arguments.clips} clips x 3 views per video")
    model = SlowFast(len(CLASSES)).to(device)
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
        drawn = batch.augmentations  # what the recipe drew for the last batch, one row per clip
        accuracy, views = evaluate(model, evaluation, len(CLASSES), device)
        print(
            f"epoch {epoch}: loss {sum(losses) / len(losses):.3f} (last {losses[-1]:.3f}), "
            f"{clips / seconds:.1f} clips/s; last batch flipped {int(drawn.flipped.sum())}/{len(drawn)}, "
            f"scaled {drawn.scales.min():.2f}-{drawn.scales.max():.2f}x; "
            f"validation top-1 {accuracy:.2f} over {views} views of {len(evaluation.videos)} videos"
        )
    loader.close()
    evaluation.close()


if __name__ == "__main__":
    main()
