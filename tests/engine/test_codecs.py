"""VP9, MPEG-4 Part 2 and AV1 on NVDEC: which streams go there (the capability decision), the packets
they get (MPEG-4 stream headers, B-VOPs skipped), and, on a GPU, frames equal to the CPU path's."""

import warnings

import av
import numpy as np
import pytest
from av.video.frame import PictureType

import vclip
from vclip._engine import capability_refusal, nvdec_unsupported_reason
from vclip._index.bitstream import is_reference_packet, nvdec_packet_converter
from vclip._index.packets import read_packets
from vclip.synthetic import make_video, read_barcode

H200_VP9_8BIT = {
    "supported": 1,
    "num_decoder_engines": 7,
    "width_min": 128,
    "height_min": 128,
    "width_max": 8192,
    "height_max": 8192,
}


@pytest.fixture(scope="module")
def codec_videos(tmp_path_factory) -> dict[str, str]:
    """Small videos of each codec (B-frames where the codec has them)."""
    folder = tmp_path_factory.mktemp("codecs")
    options = {"num_frames": 20, "width": 128, "height": 96, "keyframe_interval": 10}
    return {
        "vp9": make_video(folder / "vp9.webm", codec="libvpx-vp9", **options),
        "mpeg4_avi": make_video(folder / "mpeg4.avi", codec="mpeg4", b_frames=2, **options),
        "mpeg4_mp4": make_video(folder / "mpeg4.mp4", codec="mpeg4", b_frames=2, **options),
        "mjpeg": make_video(folder / "mjpeg.avi", codec="mjpeg", pixel_format="yuvj420p", b_frames=0, **options),
    }


def test_capability_answer_decides():
    assert capability_refusal("vp9", 8, 1920, 1080, H200_VP9_8BIT) is None
    assert (
        capability_refusal("av1", 8, 1920, 1080, {"supported": 0, "width_max": 0})
        == "NVDEC on this GPU cannot decode 8-bit av1"
    )
    assert capability_refusal("vp9", 8, 96, 1080, H200_VP9_8BIT) == "96x1080 is below NVDEC's minimum 128x128"
    assert capability_refusal("vp9", 8, 8200, 4320, H200_VP9_8BIT) == "8200x4320 is above NVDEC's maximum 8192x8192"
    assert capability_refusal("mpeg4", 8, 64, 48, {}) is None  # no answer: decoding will tell
    assert (
        capability_refusal("hevc", 10, 640, 480, {**H200_VP9_8BIT, "num_decoder_engines": 0})
        == "NVDEC on this GPU cannot decode 10-bit hevc"
    )


def test_streams_vclip_can_hand_to_nvdec(codec_videos, videos):
    for name in ("vp9", "mpeg4_avi", "mpeg4_mp4"):
        assert nvdec_unsupported_reason(vclip.index_video(codec_videos[name])) is None, name
    assert (
        nvdec_unsupported_reason(vclip.index_video(codec_videos["mjpeg"])) == "NVDEC decoding of mjpeg is not supported"
    )
    assert (
        nvdec_unsupported_reason(vclip.index_video(videos["h264_10bit"])) == "10-bit H.264 cannot be decoded by NVDEC"
    )


@pytest.mark.parametrize("name", ["mpeg4_avi", "mpeg4_mp4"])
def test_mpeg4_b_vops_are_the_non_reference_packets(codec_videos, name):
    index = vclip.index_video(codec_videos[name])
    with av.open(codec_videos[name]) as container:
        b_frames = np.array([frame.pict_type == PictureType.B for frame in container.decode(video=0)])
    assert b_frames.any()
    assert int(np.count_nonzero(~index.packet_is_reference)) == int(b_frames.sum())
    assert np.array_equal(~index.is_reference, b_frames)  # presentation order


@pytest.mark.parametrize("name", ["mpeg4_avi", "mpeg4_mp4", "vp9"])
def test_skipping_non_reference_pictures_keeps_the_frames(codec_videos, name):
    wanted = list(range(1, 20, 3))
    lean = vclip.VideoDecoder(codec_videos[name], device="cpu")
    full = vclip.VideoDecoder(codec_videos[name], device="cpu", skip_non_reference=False)
    a, b = lean.get_frames(wanted), full.get_frames(wanted)
    assert np.array_equal(a.data, b.data)
    assert [read_barcode(frame) for frame in a.data] == wanted
    if name.startswith("mpeg4"):
        assert lean.stats.packets_sent < full.stats.packets_sent
    else:  # VP9: no packet is skippable (see vclip/_index/bitstream.py)
        assert lean.stats.packets_sent == full.stats.packets_sent


def test_every_vp9_packet_counts_as_a_reference(codec_videos):
    index = vclip.index_video(codec_videos["vp9"])
    assert index.packet_is_reference.all()
    assert is_reference_packet("vp9", b"\x86\x00\x40", None)


def _decode_without_extradata(codec: str, packets: list[bytes]) -> list[int]:
    """Barcodes of what a fresh decoder with no extradata makes of ``packets``."""
    context = av.CodecContext.create(codec, "r")
    barcodes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for data in packets + [None]:
            try:
                frames = context.decode(av.Packet(data) if data is not None else None)
            except av.error.FFmpegError:
                continue
            barcodes += [read_barcode(frame.to_ndarray(format="rgb24")) for frame in frames]
    return barcodes


def test_mpeg4_segments_carry_their_stream_headers(codec_videos):
    """MP4 keeps MPEG-4's VOL only in the extradata; NVDEC gets it before each segment's first packet,
    so that a decoder given nothing else decodes the segment (the second GOP here)."""
    index = vclip.index_video(codec_videos["mpeg4_mp4"])
    start = int(index.keyframe_indices[1])
    packets = list(range(int(index.frame_packet[start]), index.num_packets))
    payloads = read_packets(index, packets)
    converter = nvdec_packet_converter("mpeg4", index.extradata)
    converted = [converter.convert(data, with_parameter_sets=(k == 0)) for k, data in enumerate(payloads)]
    assert converted[0] == index.extradata + payloads[0] and converted[1:] == payloads[1:]
    assert _decode_without_extradata("mpeg4", converted) == list(range(start, index.num_frames))
    assert _decode_without_extradata("mpeg4", payloads) == []  # without the VOL nothing decodes


def test_avi_mpeg4_packets_with_their_own_headers_and_vp9_packets_go_as_they_are(codec_videos):
    index = vclip.index_video(codec_videos["mpeg4_avi"])
    first = read_packets(index, [0])[0]
    assert first.startswith(b"\x00\x00\x01\xb0")  # VOS, VO, VOL in the keyframe packet
    assert nvdec_packet_converter("mpeg4", index.extradata).convert(first, with_parameter_sets=True) == first
    vp9 = vclip.index_video(codec_videos["vp9"])
    data = read_packets(vp9, [0])[0]
    assert nvdec_packet_converter("vp9", vp9.extradata).convert(data, with_parameter_sets=True) == data


def host(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)


# -- on the GPU --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_codec_videos(tmp_path_factory) -> dict[str, str]:
    """Above NVDEC's minimum size, several GOPs, B-frames where the codec has them."""
    folder = tmp_path_factory.mktemp("gpu_codecs")
    options = {"num_frames": 60, "width": 320, "height": 240, "keyframe_interval": 25}
    return {
        "vp9": make_video(folder / "vp9.webm", codec="libvpx-vp9", **options),
        "mpeg4_avi": make_video(folder / "mpeg4.avi", codec="mpeg4", b_frames=2, **options),
        "mpeg4_mp4": make_video(folder / "mpeg4.mp4", codec="mpeg4", b_frames=2, **options),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["vp9", "mpeg4_avi", "mpeg4_mp4"])
def test_nvdec_decodes_the_frames_the_cpu_decodes(gpu_codec_videos, name):
    from helpers import ffmpeg_rgb24
    from kernel_cases import assert_matches_twin

    path = gpu_codec_videos[name]
    sampler = vclip.strided(6, 2, starts="even", clips_per_video=3)
    gpu = vclip.VideoDecoder(path, device="cuda").get_clips(sampler, seed=2)
    cpu = vclip.VideoDecoder(path, device="cpu").get_clips(sampler, seed=2)
    assert gpu.device == "cuda:0" and not gpu.fell_back_to_cpu
    assert np.array_equal(gpu.frame_indices, cpu.frame_indices)
    data = host(gpu.data)
    for clip, wanted in zip(data, cpu.frame_indices):
        assert [read_barcode(frame) for frame in clip] == wanted.tolist()
    reference = np.stack(ffmpeg_rgb24(path))
    every = vclip.VideoDecoder(path, device="cuda").get_frames(list(range(len(reference))))
    difference = np.abs(host(every.data).astype(np.int16) - reference.astype(np.int16))
    mean, p99 = difference.mean(), np.percentile(difference, 99)
    assert mean <= 1.5 and p99 <= 4, (mean, p99)
    spec = vclip.TransformSpec(resize=112, crop=(96, 96), crop_mode="random", flip_probability=0.5, dtype="float32")
    on_gpu = vclip.VideoDecoder(path, device="cuda").get_clips(sampler, transform=spec, seed=5)
    on_cpu = vclip.VideoDecoder(path, device="cpu").get_clips(sampler, transform=spec, seed=5)
    if name == "vp9":  # VP9 decoding is exact: the kernel and its twin see the same planes
        assert_matches_twin(host(on_gpu.data), on_cpu.data, "float32")
    else:  # MPEG-4 Part 2 lets decoders' inverse DCTs differ slightly: the native-size bar, in 0-1 units
        difference = np.abs(host(on_gpu.data) - on_cpu.data) * 255
        assert difference.mean() <= 1.5 and np.percentile(difference, 99) <= 4, difference.mean()


@pytest.mark.gpu
def test_nvdec_skips_mpeg4_b_vops(gpu_codec_videos):
    wanted = list(range(20, 50, 2))
    lean = vclip.VideoDecoder(gpu_codec_videos["mpeg4_avi"], device="cuda")
    full = vclip.VideoDecoder(gpu_codec_videos["mpeg4_avi"], device="cuda", skip_non_reference=False)
    a, b = lean.get_frames(wanted), full.get_frames(wanted)
    assert not a.fell_back_to_cpu and not b.fell_back_to_cpu
    assert np.array_equal(host(a.data), host(b.data))
    assert [read_barcode(frame) for frame in host(a.data)] == wanted
    assert lean.stats.packets_sent < full.stats.packets_sent
