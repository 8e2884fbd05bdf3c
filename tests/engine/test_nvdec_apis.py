"""The two ways into NVDEC (PyNvVideoCodec's decoder, the driver's own API through ctypes) give the
same pictures: both hand NVDEC's decoded surfaces to the same kernel, so their clips are equal
bit for bit. The choice of API by ``VCLIP_NVDEC_API`` and the layouts of the driver's structures
are checked without a GPU."""

import numpy as np
import pytest
from helpers import barcodes, host

import vclip
import vclip.synthetic


def test_the_api_follows_the_environment(monkeypatch):
    from vclip._engine import cuvid_unavailable_reason, nvdec_api

    monkeypatch.delenv("VCLIP_NVDEC_API", raising=False)
    assert nvdec_api() == "pynvvideocodec"
    monkeypatch.setenv("VCLIP_NVDEC_API", "PyNvVideoCodec")
    assert nvdec_api() == "pynvvideocodec"
    monkeypatch.setenv("VCLIP_NVDEC_API", "nvdec2")
    expected = r"VCLIP_NVDEC_API \('nvdec2'\) must be one of pynvvideocodec, driver"
    with pytest.raises(vclip.ArgumentError, match=expected):
        nvdec_api()
    monkeypatch.setenv("VCLIP_NVDEC_API", "driver")
    if cuvid_unavailable_reason() is None:
        assert nvdec_api() == "driver"
    else:  # no NVIDIA driver here: the choice says why it cannot be taken
        with pytest.raises(vclip.ArgumentError, match="VCLIP_NVDEC_API=driver: NVDEC's API cannot be loaded"):
            nvdec_api()


def test_driver_structures_have_the_sdk_layout():
    """Sizes and offsets of NVDEC's structures on 64-bit Linux, as the Video Codec SDK's headers lay
    them out (a field of the wrong width would shift every later one)."""
    import ctypes

    from vclip._engine import CuvidStructures

    sdk = CuvidStructures

    assert ctypes.sizeof(sdk.CUVIDEOFORMAT) == 64
    assert sdk.CUVIDEOFORMAT.chroma_format.offset == 40 and sdk.CUVIDEOFORMAT.seqhdr_data_length.offset == 60
    assert ctypes.sizeof(sdk.CUVIDSOURCEDATAPACKET) == 32
    assert ctypes.sizeof(sdk.CUVIDPARSERDISPINFO) == 24 and sdk.CUVIDPARSERDISPINFO.timestamp.offset == 16
    assert sdk.CUVIDPARSERPARAMS.pUserData.offset == 40 and sdk.CUVIDPARSERPARAMS.pfnSequenceCallback.offset == 48
    assert ctypes.sizeof(sdk.CUVIDPARSERPARAMS) == 136
    assert sdk.CUVIDDECODECREATEINFO.display_area.offset == 80 and sdk.CUVIDDECODECREATEINFO.vidLock.offset == 120
    assert ctypes.sizeof(sdk.CUVIDDECODECREATEINFO) == 176
    assert sdk.CUVIDPROCPARAMS.output_stream.offset == 56 and ctypes.sizeof(sdk.CUVIDPROCPARAMS) == 264


def _clips(path, api, frames, spec, stream_index=None):
    from vclip._device import Device
    from vclip._engine import ClipTarget, DecodeStats, NvdecBackend, ThreadDispatcher, VideoRequest, resolve_transform

    backend = NvdecBackend(Device("cuda", 0), api=api)
    runner = ThreadDispatcher(backend, num_workers=2)
    index = vclip.index_video(path, stream_index=stream_index)
    geometry = spec.geometry(index.width, index.height)
    clips = [np.asarray(f) for f in frames(index)]
    conversion = resolve_transform(spec)
    shape = (len(clips), len(clips[0]), geometry.output_height, geometry.output_width, 3)
    if spec.layout == "TCHW":
        shape = (len(clips), len(clips[0]), 3, geometry.output_height, geometry.output_width)
    output = backend.empty(shape, conversion.storage_dtype)
    jobs = [VideoRequest(index, (ClipTarget(clip, geometry, slot),)) for slot, clip in enumerate(clips)]
    result = runner.run(jobs, conversion, output, DecodeStats())
    runner.close()
    assert result.errors == [None] * len(jobs)
    for completion in result.completions:
        completion.synchronize()
    return host(output), clips


def _every_third(index):
    return [np.arange(start, start + 30, 3) for start in (0, 1, index.num_frames - 30)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h264", "hevc", "vfr", "offset", "long_gop"])
def test_driver_api_and_pynvvideocodec_write_the_same_clips(videos, name):
    spec = vclip.TransformSpec()
    driver, clips = _clips(videos[name], "driver", _every_third, spec)
    other, _ = _clips(videos[name], "pynvvideocodec", _every_third, spec)
    assert np.array_equal(driver, other)
    for clip, wanted in zip(driver, clips):
        assert barcodes(clip) == wanted.tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("name, stream_index", [("nasa_13013.mp4", 3), ("h265_10bits.mp4", None),
                                                ("bt709_full_range.mp4", None)])
def test_driver_api_on_real_videos(shared_videos, name, stream_index):
    spec = vclip.TransformSpec.imagenet(112, resize_mode="squash", layout="TCHW")
    driver, _ = _clips(shared_videos / name, "driver", _every_third, spec, stream_index)
    other, _ = _clips(shared_videos / name, "pynvvideocodec", _every_third, spec, stream_index)
    assert np.array_equal(driver, other)

