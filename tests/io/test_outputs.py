"""Safe output names and --out checks (vclip._outputs.files)."""

import io
import os
import re
from pathlib import Path

import pytest

from vclip._outputs.files import (
    check_output_file,
    check_output_folder,
    printable,
    safe_name,
    unique_names,
    written_whole,
)
from vclip.errors import OutputError


@pytest.mark.parametrize(
    "path, expected",
    [
        ("videos/clip one.mp4", "clip_one"),
        ("...mp4", "video"),
        ("..mp4", "video"),
        (".hidden.mp4", "hidden"),
        ("-rf.mp4", "rf"),
        ("a\\b:c*d?.mkv", "a_b_c_d_"),
        ("manifest.json.mp4", "manifest.json"),
        ("CON.mp4", "_CON"),
        ("Ünïcødé 映像.mp4", "Ünïcødé_映像"),
        (os.fsdecode(b"bad\xff\xfename.mp4"), "bad__name"),
    ],
)
def test_safe_name(path, expected):
    assert safe_name(path) == expected


def test_safe_name_is_short_enough_for_any_file_system():
    name = safe_name("映" * 300 + ".mp4")
    assert len(name.encode("utf-8")) <= 120 and set(name) == {"映"}


def test_unique_names_are_deterministic_whatever_the_order():
    paths = ["a/clip.mp4", "b/clip.mp4", "c/other.mp4", "d/CLIP.mkv"]
    names = unique_names(paths)
    assert names[2] == "other"
    assert all(re.fullmatch(r"(clip|CLIP)-[0-9a-f]{8}", n) for n in names[:2] + names[3:])
    assert len({n.lower() for n in names}) == 4  # unique on case-insensitive file systems too
    assert unique_names(paths[::-1]) == names[::-1]


def test_unique_names_avoid_taken_names_and_repeats():
    assert unique_names(["x/manifest.json.mp4"], taken={"manifest.json"})[0].startswith("manifest.json-")
    first, second, third = unique_names(["v.mp4", "v.mp4", "v.mp4"])
    assert first == "v" and re.fullmatch(r"v-[0-9a-f]{8}", second) and third == second + "-2"


def test_printable_escapes_what_the_stream_cannot_show():
    name = os.fsdecode(b"caf\xe9-\xff.mp4")  # Latin-1 bytes: not UTF-8
    assert printable(name, io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) == "caf\\xe9-\\xff.mp4"
    assert printable("café.mp4", io.TextIOWrapper(io.BytesIO(), encoding="ascii")) == "caf\\xe9.mp4"
    assert printable("café.mp4", io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) == "café.mp4"


def test_check_output_file(tmp_path):
    check_output_file(tmp_path / "c.npz")
    with pytest.raises(OutputError, match="its folder .*missing' does not exist"):
        check_output_file(tmp_path / "missing" / "c.npz")
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="its folder .*file' is a file, not a folder"):
        check_output_file(tmp_path / "file" / "c.npz")
    with pytest.raises(OutputError, match="is an existing folder; name a file"):
        check_output_file(tmp_path)


def test_check_output_folder(tmp_path):
    check_output_folder(tmp_path / "new" / "deeper")
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is an existing file, not a folder"):
        check_output_folder(tmp_path / "file")
    with pytest.raises(OutputError, match="file' is a file, not a folder"):
        check_output_folder(tmp_path / "file" / "below")


def test_written_whole_replaces_only_when_the_write_succeeds(tmp_path):
    out = tmp_path / "clips.npz"
    out.write_bytes(b"earlier")
    with pytest.raises(RuntimeError), written_whole(out) as temporary:
        assert temporary.endswith(".npz") and os.path.dirname(temporary) == str(tmp_path)  # writers go by the suffix
        Path(temporary).write_bytes(b"cut off")
        raise RuntimeError("the disk is full")
    assert out.read_bytes() == b"earlier" and os.listdir(tmp_path) == ["clips.npz"]
    with written_whole(out) as temporary:
        Path(temporary).write_bytes(b"whole")
    assert out.read_bytes() == b"whole" and os.listdir(tmp_path) == ["clips.npz"]
