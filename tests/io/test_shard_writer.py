"""The shard writer (``vclip shard``, ``vclip.webdataset.write_shards``) as the team that publishes
shards needs it: only videos go in."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from helpers import require_extra

from vclip.cli import main
from vclip.synthetic import make_video
from vclip.webdataset import WebDatasetSource

torch = require_extra("torch")


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    """A folder of six small videos (12 to 22 frames)."""
    folder = tmp_path_factory.mktemp("writer") / "videos"
    folder.mkdir()
    for number in range(6):
        make_video(folder / f"v{number}.mp4", num_frames=12 + 2 * number, width=64, height=48, keyframe_interval=6,
                   seed=number)
    return folder


def frame_counts(shards) -> list[int]:
    source = WebDatasetSource(shards)
    return [source.index(number).num_frames for number in range(len(source))]


def family(folder: Path) -> list[str]:
    """What is in ``folder``, hidden entries (a staging folder) included."""
    return sorted(entry.name for entry in folder.iterdir())


def member_bytes(shards: list[str]) -> bytes:
    data = b""
    for shard in shards:
        with tarfile.open(shard) as archive:
            for member in archive.getmembers():
                data += archive.extractfile(member).read()
    return data


# -- only videos ----------------------------------------------------------------------------------
def test_only_videos_go_into_shards(videos, tmp_path, capsys):
    """Threat: ``vclip shard`` copied any listed file into the shards as a "video" without opening
    it: a list naming a private key and a JSON file gave exit 0, "5 videos", and a shard holding
    the key's text, which is then published. Every file is opened as a video first."""
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    (tmp_path / "settings.mp4").write_text(json.dumps({"token": "s3cr3t"}))  # a misleading name
    from PIL import Image

    Image.new("RGB", (32, 24), "red").save(tmp_path / "still.mp4", format="PNG")
    listing = tmp_path / "list.txt"
    listing.write_text(f"{videos / 'v0.mp4'} 0\n{key} 1\n{tmp_path / 'settings.mp4'} 1\n{tmp_path / 'still.mp4'} 2\n"
                       f"{videos / 'v1.mp4'} 1\n")
    out = tmp_path / "out" / "s-{000}.tar"
    assert main(["shard", str(listing), "--out", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert f"skipped {key}: not a video container" in err
    assert f"skipped {tmp_path / 'settings.mp4'}: not a video container" in err
    assert f"skipped {tmp_path / 'still.mp4'}: is a still image or text" in err
    shards = [str(path) for path in sorted((tmp_path / "out").glob("*.tar"))]
    assert frame_counts(shards) == [12, 14]
    data = member_bytes(shards)
    assert b"PRIVATE KEY" not in data and b"s3cr3t" not in data
