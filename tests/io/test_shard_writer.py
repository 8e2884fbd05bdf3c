"""The shard writer (``vclip shard``, ``vclip.webdataset.write_shards``) as the team that publishes
shards needs it: only videos go in, an output is written whole or not at all (a full disk, a run
killed part-way), an existing set is replaced as a set, the input is never the output, and no
file or link planted in the output folder is written through."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import child_environment, require_extra

import vclip
from vclip._datasets.shard_videos import checked_video
from vclip.cli import main
from vclip.synthetic import make_video
from vclip.webdataset import WebDatasetSource, write_shards

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
    listing.write_text(f"{key} 1\n{tmp_path / 'settings.mp4'} 1\n")  # nothing to write: the set stays
    before = {path: Path(path).read_bytes() for path in (tmp_path / "out").iterdir()}
    assert main(["shard", str(listing), "--out", str(out), "--overwrite", "--no-progress"]) == 1
    assert "no video could be written (2 skipped); nothing was written or removed" in capsys.readouterr().out
    assert {path: Path(path).read_bytes() for path in (tmp_path / "out").iterdir()} == before


# -- the output is not the input -------------------------------------------------------------------
def test_resharding_in_place_is_refused_and_keeps_the_input(videos, tmp_path):
    """``--out`` naming the input shards with ``--overwrite`` destroyed them (and wrote members of
    the wrong bytes as videos); also through a link to their folder."""
    written = write_shards(videos, tmp_path / "set" / "s-{000}.tar", max_count=2)
    before = {shard: Path(shard).read_bytes() for shard in written.shards}
    for out in (tmp_path / "set" / "s-{000}.tar", tmp_path / "set" / "s-%03d.tar"):
        with pytest.raises(vclip.ArgumentError, match=r"would replace .*s-000.tar, which the source reads"):
            write_shards(str(tmp_path / "set" / "s-{000..002}.tar"), out, overwrite=True)
    (tmp_path / "link").symlink_to(tmp_path / "set")
    with pytest.raises(vclip.ArgumentError, match="which the source reads"):
        write_shards(str(tmp_path / "set" / "shardindex.json"), tmp_path / "link" / "s-{000}.tar", overwrite=True)
    assert main(["shard", str(tmp_path / "set" / "s-{000..002}.tar"), "--out", str(tmp_path / "set" / "s-{000}.tar"),
                 "--overwrite", "--no-progress"]) == 2
    assert {shard: Path(shard).read_bytes() for shard in written.shards} == before
    assert frame_counts(list(written.shards)) == [12, 14, 16, 18, 20, 22]


# -- replacing a set --------------------------------------------------------------------------------
def test_a_set_is_replaced_as_a_set(videos, tmp_path):
    """An --overwrite run that wrote fewer shards left the old extra ones (a brace pattern then
    read 14 videos instead of 8); without --overwrite only shard 0 and the description were checked,
    so a user's s-0001.tar was overwritten."""
    out = tmp_path / "s-{000}.tar"
    write_shards(videos, out, max_count=1)
    assert len(list(tmp_path.glob("s-*.tar"))) == 6
    again = write_shards(videos, out, max_count=4, overwrite=True)
    assert family(tmp_path) == ["s-000.idx", "s-000.tar", "s-001.idx", "s-001.tar", "shardindex.json"]
    assert frame_counts(str(tmp_path / "s-{000..001}.tar")) == [12, 14, 16, 18, 20, 22]
    assert [entry["url"] for entry in json.loads((tmp_path / "shardindex.json").read_text())["shardlist"]] == [
        "s-000.tar", "s-001.tar"]
    assert list(again.shards) == [str(tmp_path / "s-000.tar"), str(tmp_path / "s-001.tar")]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "s-0001.tar").write_bytes(b"the user's own")
    with pytest.raises(vclip.ArgumentError, match=r"s-0001.tar exists; pass overwrite=True"):
        write_shards(videos, mine / "s-{0000}.tar")
    assert (mine / "s-0001.tar").read_bytes() == b"the user's own" and family(mine) == ["s-0001.tar"]


KILLER = """
import os, signal, sys
from vclip.webdataset import write_shards
folder, when = sys.argv[1], sys.argv[2]
if when == "swap":  # in the middle of moving the new files in: after the second rename
    real, done = os.replace, []
    def replace(*args, **kwargs):
        done.append(args)
        if len(done) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    os.replace = replace
calls = []
def on_video():
    calls.append(1)
    if when == "writing" and len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
write_shards(sys.argv[3], os.path.join(folder, "s-{000}.tar"), max_count=3, overwrite=True, on_video=on_video)
"""


@pytest.mark.parametrize("when", ["writing", "swap"])
def test_a_run_killed_part_way_leaves_the_old_set_or_a_clearly_incomplete_one(videos, tmp_path, when):
    """A killed --overwrite run left an old/new mix that WebDatasetSource read as complete."""
    out = tmp_path / "set"
    old = write_shards([(path, 0) for path in sorted(videos.glob("v[0-3].mp4"))[::-1]], out / "s-{000}.tar",
                       max_count=1)  # 4 shards
    before = {name: (out / name).read_bytes() for name in family(out)}
    done = subprocess.run([sys.executable, "-c", KILLER, str(out), when, str(videos)], env=child_environment(),
                          capture_output=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    if when == "writing":  # before the swap: the old set, whole, and the run's staging folder
        assert {name: (out / name).read_bytes() for name in family(out) if not name.startswith(".")} == before
        assert [name for name in family(out) if name.startswith(".")] != []
        assert frame_counts(str(out / "shardindex.json")) == frame_counts(list(old.shards)) == [18, 16, 14, 12]
        return
    present = [name for name in family(out) if not name.startswith(".")]
    assert "shardindex.json" not in present  # no description of a set that is not whole
    with pytest.raises(FileNotFoundError):
        WebDatasetSource(str(out / "s-{000..003}.tar"))
    with pytest.raises(FileNotFoundError):
        WebDatasetSource(str(out / "s-{000..001}.tar"))
    new = [name for name in present if name.endswith(".tar")]
    assert new == ["s-000.tar"] and frame_counts(str(out / "s-000.tar")) == [12, 14, 16]  # the new shard 0


# -- links planted in the output folder --------------------------------------------------------------
def test_links_planted_in_the_output_folder_are_not_written_through(videos, tmp_path):
    """Threat: ``vclip shard`` followed symlinks planted at ``NAME.tar.partial`` and
    ``shardindex.json`` (and at the final names) and overwrote their targets, e.g. a user's
    ``~/.bashrc`` or another team's data, with shard bytes. Files are created exclusively under
    names of a private staging folder, and moved in by rename, which replaces a link."""
    victims = {name: tmp_path / f"victim-{name}" for name in ("partial", "description", "shard", "index")}
    for victim in victims.values():
        victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "s-000.tar.partial").symlink_to(victims["partial"])
    (out / "shardindex.json").symlink_to(victims["description"])
    (out / "s-000.tar").symlink_to(victims["shard"])
    (out / "s-000.idx").symlink_to(victims["index"])
    written = write_shards(videos, out / "s-{000}.tar", overwrite=True)
    assert all(victim.read_text() == "precious\n" for victim in victims.values())
    assert (out / "s-000.tar.partial").is_symlink()  # not the writer's: left alone
    for name in ("s-000.tar", "s-000.idx", "shardindex.json"):
        assert not (out / name).is_symlink()
    assert frame_counts(list(written.shards)) == [12, 14, 16, 18, 20, 22]


# -- a full disk ------------------------------------------------------------------------------------
def shard_command_with_file_limit(*argv, file_size: int) -> subprocess.CompletedProcess:
    """``vclip shard ARGV`` in a child that may write no file larger than ``file_size`` bytes: its
    writes past that fail as on a full disk (EFBIG; the signal that would kill it is ignored)."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    script = "import sys\nfrom vclip.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", script, "shard", *map(str, argv), "--no-progress"],
                          capture_output=True, text=True, env=child_environment(), timeout=300, preexec_fn=limit)


@pytest.mark.parametrize("earlier_set", [False, True])
def test_a_full_disk_is_a_clean_error_that_leaves_nothing_behind(videos, tmp_path, earlier_set):
    """A full disk during ``vclip shard`` gave a traceback, a cut-off ``.partial`` and no description."""
    out = tmp_path / "out"
    if earlier_set:
        write_shards([(path, 0) for path in sorted(videos.glob("*.mp4"))[:2]], out / "s-{000}.tar")
    before = {name: (out / name).read_bytes() for name in family(out)} if earlier_set else {}
    done = shard_command_with_file_limit(videos, "--out", out / "s-{000}.tar", "--overwrite", file_size=20_000)
    assert done.returncode == 1, done.stderr
    assert "vclip shard: error: writing the shards in" in done.stderr and "File too large" in done.stderr
    assert "nothing of this run was kept" in done.stderr and "Traceback" not in done.stderr
    assert {name: (out / name).read_bytes() for name in family(out)} == before  # no staging folder either


# -- names that are not UTF-8 -----------------------------------------------------------------------
def test_a_video_whose_name_is_not_utf8_is_written_with_its_name_escaped(videos, tmp_path, capsys):
    """A name that is not UTF-8 stopped ``vclip shard`` with a UnicodeEncodeError on the sample's
    .json, and nothing was written for any video."""
    folder = tmp_path / "latin"
    folder.mkdir()
    name = os.fsdecode(b"caf\xe9.mp4")
    (folder / name).write_bytes((videos / "v0.mp4").read_bytes())
    (folder / "plain.mp4").write_bytes((videos / "v1.mp4").read_bytes())
    assert main(["shard", str(folder), "--out", str(tmp_path / "s-{0}.tar"), "--no-progress"]) == 0
    source = WebDatasetSource(str(tmp_path / "s-0.tar"))
    assert [source.metadata(number)["json"]["source"] for number in range(2)] == [
        str(folder) + "/caf\\xe9.mp4", str(folder / "plain.mp4")]
    assert frame_counts(str(tmp_path / "s-0.tar")) == [12, 14]


def test_a_video_that_fails_while_it_is_copied_is_taken_back_out(videos, tmp_path):
    """A slice that claims 100 kB more than its file holds opens as a video (a faststart MP4 with
    zeros after it), then ends while it is copied: its sample is cut back out of the shard, and the
    next videos follow it as if it had never been there."""
    make_video(tmp_path / "long.mp4", num_frames=300, width=192, height=112, keyframe_interval=30)
    first = write_shards([(tmp_path / "long.mp4", 0)], tmp_path / "in-{0}.tar")  # faststart
    with tarfile.open(first.shards[0]) as archive:
        faststart = archive.extractfile("000000000.mp4").read()
    (tmp_path / "padded.bin").write_bytes(faststart + bytes(4 << 20))
    claims = f"{tmp_path / 'padded.bin'}#long.mp4@0+{len(faststart) + (4 << 20) + 100_000}"
    assert checked_video(claims) == "mp4"  # it opens as a video
    source = [(str(videos / "v0.mp4"), 0), (claims, 1), (str(videos / "v1.mp4"), 2)]
    written = write_shards(source, tmp_path / "out" / "s-{0}.tar")
    assert [(name, "ends at byte" in problem) for name, problem in written.skipped] == [(claims, True)]
    assert written.videos == 2 and frame_counts(list(written.shards)) == [12, 14]
    assert [video.label for video in WebDatasetSource(list(written.shards)).videos] == [0, 2]
    with tarfile.open(written.shards[0]) as archive:
        assert archive.getnames() == ["000000000.mp4", "000000000.cls", "000000000.json", "000000001.mp4",
                                      "000000001.cls", "000000001.json"]


def test_a_video_whose_name_is_not_utf8_is_listed_unusable_by_the_catalog(videos, tmp_path, capsys):
    """A Latin-1 list file (read by the loader byte for byte) stopped ``vclip index``
    with a UnicodeEncodeError on the Parquet column, and nothing was written for any video. A
    Parquet text column cannot hold such a name: the video is listed unusable, saying why, and the
    others are catalogued."""
    require_extra("pyarrow")
    from vclip.catalog import read_catalog

    name = b"caf\xe9 \xe0 la cr\xe8me.mp4"  # Latin-1
    (tmp_path / os.fsdecode(name)).write_bytes((videos / "v0.mp4").read_bytes())
    (tmp_path / "plain.mp4").write_bytes((videos / "v1.mp4").read_bytes())
    listing = tmp_path / "latin1.txt"
    listing.write_bytes(name + b" 3\nplain.mp4 1\n")
    out = tmp_path / "c.parquet"
    assert main(["index", str(listing), "--out", str(out), "--workers", "1"]) == 3
    shown = f"{tmp_path}/caf\\xe9 \\xe0 la cr\\xe8me.mp4"
    assert f"unusable {shown}: its name is not valid UTF-8" in capsys.readouterr().err
    catalog = read_catalog(out)
    assert [(entry.path, entry.label) for entry in catalog.usable] == [(str(tmp_path / "plain.mp4"), 1)]
    assert [entry.path for entry in catalog.entries] == [shown, str(tmp_path / "plain.mp4")]
    loader = vclip.ClipLoader(str(out), vclip.contiguous(4), batch_size=1, device="cpu")
    try:
        assert {label for batch in loader for label in batch.labels.tolist()} == {1}
    finally:
        loader.close()
