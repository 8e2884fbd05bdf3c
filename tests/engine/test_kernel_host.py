"""kernels/nv12_transform.cu compiled for the host (tests/host_kernel/cuda_host_shim.h emulates the
launch grid) and checked against its NumPy twin, so a broken kernel fails CI without a GPU."""

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest
from helpers import ROOT, host_kernel_library
from kernel_cases import (
    CASES,
    assert_matches_twin,
    draws_of,
    kernel_arguments,
    pack_semi_planar,
    random_planes,
    storage_dtype,
    twin_clip,
)

import vclip
from vclip._engine import (
    BLOCK,
    JOB_DTYPE,
    OUTPUT_KINDS,
    PARAMS_DTYPE,
    kernel_source_path,
)
from vclip.transforms import ColorJitter, MultiScaleCrop, Orientation, RandomResizedCrop, TransformSpec

HARNESS = ROOT / "tests" / "host_kernel"


@pytest.fixture(scope="module")
def host_library(tmp_path_factory):
    return host_kernel_library("harness.cpp", "nv12_transform.cu", tmp_path_factory.mktemp("kernel"))


@pytest.fixture(scope="module")
def host_transform(host_library):
    """``host_transform(input_bytes, output_kind, params, jobs, count, extended=0)`` (addresses of
    ``TransformParams`` and ``count`` ``FrameJob`` values; ``extended``: the kernels with the
    training extensions, colour adjustments and the triangle filter)."""
    function = host_library.vclip_host_transform
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return lambda input_bytes, output_kind, params, jobs, count, extended=0: function(
        input_bytes, output_kind, params, jobs, count, extended
    )


def run_on_host(host_transform, case, draw, planes_per_frame):
    """The clip the host-compiled kernel writes for ``draw`` (a SampleDraw or a FrameGeometry), one
    launch per frame as the backends launch it, into poisoned memory."""
    width, height, bit_depth, *_, spec, _ = case
    geometry = getattr(draw, "geometry", draw)
    packed = [pack_semi_planar(y, u, v, bit_depth, pad=7) for y, u, v in planes_per_frame]
    frames = len(packed)
    shape = {
        "THWC": (frames, geometry.output_height, geometry.output_width, 3),
        "TCHW": (frames, 3, geometry.output_height, geometry.output_width),
        "CTHW": (3, frames, geometry.output_height, geometry.output_width),
    }[spec.layout]
    poison = 77 if spec.dtype == "uint8" else 0x7FC0 if spec.dtype == "bfloat16" else np.nan
    output = np.full(shape, poison, dtype=storage_dtype(spec.dtype))
    gray_sums = np.zeros(frames, np.uint64)
    addresses = [(luma.ctypes.data, chroma.ctypes.data, luma.strides[0], chroma.strides[0]) for luma, chroma in packed]
    launches = kernel_arguments(case, draw, frames, output.ctypes.data, addresses, gray_sums.ctypes.data)
    for params, job, extended in launches:
        params_array, job_array = np.array(params, dtype=PARAMS_DTYPE), np.array(job, dtype=JOB_DTYPE)
        host_transform(1 if bit_depth == 8 else 2, OUTPUT_KINDS[spec.dtype], params_array.ctypes.data,
                       job_array.ctypes.data, 1, int(extended))
    return output


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("frames", [1, 3])
def test_host_kernel_matches_numpy_twin(host_transform, name, frames):
    case = CASES[name]
    width, height, bit_depth, *_, spec, _ = case
    planes = [random_planes(width, height, bit_depth, seed=10 * frames + t) for t in range(frames)]
    for draw in draws_of(case, frames, seed=5):  # each spatial view
        result = run_on_host(host_transform, case, draw, planes)
        assert_matches_twin(result, twin_clip(planes, case, draw), spec.dtype)


def test_struct_layout_matches_c(host_library):
    layout = (ctypes.c_longlong * 12)()
    host_library.vclip_host_struct_layout(layout)
    expected = [
        PARAMS_DTYPE.itemsize,
        PARAMS_DTYPE.fields["stride_c"][1],
        PARAMS_DTYPE.fields["scale"][1],
        PARAMS_DTYPE.fields["bias"][1],
        JOB_DTYPE.itemsize,
        JOB_DTYPE.fields["luma_pitch"][1],
        JOB_DTYPE.fields["origin_x"][1],
        JOB_DTYPE.fields["bit_shift"][1],
        JOB_DTYPE.fields["color"][1],
        JOB_DTYPE.fields["gray_sum"][1],
        JOB_DTYPE.fields["color_ops"][1],
        JOB_DTYPE.fields["adjust"][1],
    ]
    assert list(layout) == expected


def test_kernel_launch_bounds_match_the_block_it_is_launched_with():
    """The kernel caps its registers for VCLIP_BLOCK_THREADS threads per block: the launch must use as many."""
    declared = re.search(r"#define VCLIP_BLOCK_THREADS (\d+)", kernel_source_path().read_text())
    assert declared and int(declared.group(1)) == BLOCK[0] * BLOCK[1] * BLOCK[2]


# Sources of three shapes through the training presets: the kernel takes the resized size and the
# crop window from FrameGeometry, so keeping the aspect ratio is only a matter of geometry.
ASPECT_SOURCES = {"16:9": (96, 54), "4:3": (64, 48), "portrait_9:16": (54, 96)}
PRESETS = {
    "eval": vclip.TransformSpec.imagenet(32),
    "train": vclip.TransformSpec.imagenet(32, train=True, short_side=40),
    "squash": vclip.TransformSpec.imagenet(32, resize_mode="squash", layout="CTHW"),
}


@pytest.mark.parametrize("shape", sorted(ASPECT_SOURCES))
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_host_kernel_matches_twin_for_aspect_keeping_presets(host_transform, shape, preset):
    width, height = ASPECT_SOURCES[shape]
    spec = PRESETS[preset]
    case = (width, height, 8, "bt709", "limited", spec, None)
    geometry = spec.geometry(width, height, np.random.default_rng(3))
    short = spec.resize if isinstance(spec.resize, int) else None
    if short is not None:  # aspect kept: the short side is `short`, the long side follows
        scale = short / min(width, height)
        assert (geometry.resized_width, geometry.resized_height) == (round(width * scale), round(height * scale))
    planes = [random_planes(width, height, 8, seed=t) for t in range(2)]
    result = run_on_host(host_transform, case, geometry, planes)
    assert_matches_twin(result, twin_clip(planes, case, geometry), spec.dtype)


# The eight display orientations (turns by 90 degrees, with and without a mirror) through the
# native 4-pixel path, the 1-pixel path at native scale (transposed), area downscales with a crop
# and flip, and bilinear upscales: the kernel maps output to source coordinates as the twin does.
ORIENTATIONS = [Orientation.from_rotation(degrees, mirror) for degrees in (0, 90, 180, 270) for mirror in (False, True)]
ORIENTED_SPECS = {
    "native": (8, TransformSpec()),
    "native_crop_flip_float": (
        8,
        TransformSpec(crop=(30, 22), crop_mode="random", flip_probability=1.0, dtype="float32", layout="TCHW"),
    ),
    "area_crop_flip": (8, TransformSpec(resize=24, crop=(20, 18), crop_mode="random", flip_probability=1.0)),
    "bilinear_10bit": (10, TransformSpec(resize=(71, 53), dtype="float32", layout="CTHW")),
    "resized_crop_colour": (
        8,
        TransformSpec(crop=RandomResizedCrop((20, 14), scale=(0.2, 0.9)), flip_probability=1.0,
                      interpolation="bilinear", color_jitter=ColorJitter(0.4, 0.4, 0.4, 0.1), dtype="float32",
                      layout="TCHW"),
    ),
    "multi_scale_10bit_bfloat16": (10, TransformSpec(crop=MultiScaleCrop(24, fixed_offsets=None), dtype="bfloat16")),
}


@pytest.mark.parametrize("orientation", ORIENTATIONS, ids=lambda o: f"rot{o.rotation}{'_mirror' if o.hflip else ''}")
@pytest.mark.parametrize("name", sorted(ORIENTED_SPECS))
def test_host_kernel_matches_twin_in_every_orientation(host_transform, orientation, name):
    bit_depth, spec = ORIENTED_SPECS[name]
    width, height = 46, 34  # not square, so a wrong axis shows as a wrong size or wrong pixels
    case = (width, height, bit_depth, "bt709", "limited", spec, None)
    (draw,) = spec.draw(width, height, np.random.default_rng(7), frames=2, orientation=orientation)
    planes = [random_planes(width, height, bit_depth, seed=t) for t in range(2)]
    result = run_on_host(host_transform, case, draw, planes)
    assert_matches_twin(result, twin_clip(planes, case, draw), spec.dtype)


def test_each_kernel_compiles_on_its_own_under_its_name(tmp_path):
    """vclip compiles one kernel at a time (the source with VCLIP_SELECTED_KERNELS and the kernel's
    line appended): every name it asks for comes out of its line, the same names as the full source."""
    from vclip._engine import KERNEL_NAMES, kernel_instantiation

    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler is not None, "a C++ compiler (g++) is needed to check the CUDA kernel source on the host"

    def symbols(code: str, *defines: str) -> set[str]:
        source = tmp_path / "kernels.cpp"
        source.write_text(f'#include "cuda_host_shim.h"\n{code}')
        built = subprocess.run([compiler, "-std=c++17", "-c", "-Wall", "-Werror", f"-I{HARNESS}", *defines,
                                str(source), "-o", str(tmp_path / "kernels.o")], capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        listed = subprocess.run(["nm", "--defined-only", str(tmp_path / "kernels.o")], capture_output=True, text=True)
        return {line.split()[-1] for line in listed.stdout.splitlines() if line.split()[-1].startswith("vclip_")}

    full = kernel_source_path().read_text()
    assert symbols(full) == set(KERNEL_NAMES)
    for name in ("vclip_transform_nv12_float32", "vclip_transform_p016_bfloat16_extended", "vclip_gray_sum_p016"):
        assert symbols(f"{full}\n{kernel_instantiation(name)}\n", "-DVCLIP_SELECTED_KERNELS") == {name}
    lines = "\n".join(kernel_instantiation(name) for name in KERNEL_NAMES)
    assert symbols(f"{full}\n{lines}\n", "-DVCLIP_SELECTED_KERNELS") == set(KERNEL_NAMES)
