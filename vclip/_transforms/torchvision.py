"""A torchvision.transforms.v2 pipeline translated into vclip's fused :class:`~vclip.TransformSpec`.

The transforms are read from their public attributes (``size``, ``scale``, ``ratio``,
``interpolation``, ``antialias``, ``p``, ``brightness``..., ``mean``, ``std``, ``dtype``), so
torchvision need not be importable here: on machines where its wheel does not load beside the CPU
build of torch, objects that carry the same attributes translate the same way. What the one pass
of the kernel cannot reproduce is refused, naming the transform and the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentError
from .augment import ColorJitter, RandomResizedCrop

__all__ = ["spec_fields", "looks_like_torchvision", "FUSED"]

_SPATIAL = ("Resize", "RandomResizedCrop", "RandomCrop", "CenterCrop", "RandomHorizontalFlip")
_COLOUR = ("ColorJitter", "RandomGrayscale")
FUSED = _SPATIAL + _COLOUR + ("ToDtype", "Normalize")
"""The torchvision v2 transforms vclip fuses, by class name."""
_PHASES = {**{name: 0 for name in _SPATIAL}, **{name: 1 for name in _COLOUR}, "Normalize": 2}
_PHASE_WORDS = ("the spatial transforms", "the colour transforms", "Normalize")
_DTYPES = {"torch.uint8": "uint8", "torch.float16": "float16", "torch.float32": "float32", "torch.bfloat16": "bfloat16"}


def looks_like_torchvision(value: Any) -> bool:
    """Whether ``value`` is a torchvision v2 transform or ``Compose`` (or an object named like one)."""
    kind = type(value)
    return kind.__module__.startswith("torchvision.") or kind.__name__ in FUSED + ("Compose",)


def _transforms(value: Any) -> list[Any]:
    """The transforms of a Compose (nested ones flattened), a sequence, or one transform."""
    if type(value).__name__ == "Compose" and hasattr(value, "transforms"):
        return [item for inner in value.transforms for item in _transforms(inner)]
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [item for inner in value for item in _transforms(inner)]
    return [value]


def _refuse(name: str, position: int, reason: str) -> ArgumentError:
    return ArgumentError(f"torchvision transform {name} (position {position} of the pipeline) cannot be fused into "
                    f"vclip's one pass: {reason}")


def _size(value: Any) -> int | tuple[int, int]:
    """torchvision's size: an int or a 1-element sequence (the shorter side), or ``(height, width)``."""
    if isinstance(value, int):
        return value
    items = [int(v) for v in value]
    return items[0] if len(items) == 1 else (items[0], items[1])


def _pair(value: Any) -> tuple[int, int]:
    size = _size(value)
    return (size, size) if isinstance(size, int) else size


def _antialias(transform: Any, name: str, position: int) -> bool:
    """Whether a resampling transform antialiases; refused unless it is bilinear."""
    mode = getattr(transform, "interpolation", "bilinear")
    mode_name = str(getattr(mode, "value", mode)).lower()
    if mode_name != "bilinear":
        raise _refuse(name, position, f"it resamples with {mode_name} interpolation, and vclip resamples bilinearly "
                                      "(antialiased, as torchvision's default) or by area: use "
                                      "InterpolationMode.BILINEAR")
    return getattr(transform, "antialias", True) in (True, None, "warn")


def _dtype(transform: Any, position: int) -> str:
    value = transform.dtype
    if isinstance(value, dict):  # per tv_tensor type: one dtype for all of them
        found = {str(v) for v in value.values() if v is not None}
        if len(found) != 1:
            raise _refuse("ToDtype", position, f"it maps input types to different dtypes ({value!r})")
        (name,) = found
    else:
        name = str(value)
    if name not in _DTYPES:
        raise _refuse("ToDtype", position, f"vclip's outputs are {', '.join(_DTYPES)}, not {name}")
    dtype = _DTYPES[name]
    if dtype != "uint8" and not getattr(transform, "scale", False):
        raise _refuse("ToDtype", position, "scale=False keeps 0-255 values in a float tensor, and vclip's float "
                                           "outputs are 0-1: use ToDtype(..., scale=True)")
    return dtype


def spec_fields(value: Any, *, layout: str = "TCHW") -> dict[str, Any]:
    """The :class:`~vclip.TransformSpec` fields of a torchvision v2 pipeline (see
    :meth:`vclip.TransformSpec.from_torchvision`, which makes the spec of them).

    Raises:
        ArgumentError: A transform that cannot be fused, or an order vclip cannot reproduce.
    """
    fields: dict[str, Any] = {"layout": layout}
    seen: dict[str, int] = {}
    phase = 0
    antialias: bool | None = None
    for position, transform in enumerate(_transforms(value)):
        name = type(transform).__name__
        if name not in FUSED:
            raise _refuse(name, position, f"vclip fuses {', '.join(FUSED)}; apply {name} to the tensors vclip gives "
                                          "(uint8 or float, channels last with layout='THWC') yourself")
        kind = "crop" if name in ("RandomResizedCrop", "RandomCrop", "CenterCrop") else name
        if kind in seen:
            earlier = "a crop" if kind == "crop" else name
            raise _refuse(name, position, f"it follows {earlier} at position {seen[kind]}, and vclip takes one of each")
        if name in _PHASES:
            if _PHASES[name] < phase:
                raise _refuse(name, position, f"it comes after {_PHASE_WORDS[phase]}; vclip applies the spatial "
                                              "transforms, then the colour ones (ColorJitter before RandomGrayscale), "
                                              "then Normalize, to the output picture")
            phase = _PHASES[name]
        if name == "Resize":
            if "crop" in seen:
                raise _refuse(name, position, f"it follows the crop at position {seen['crop']}; vclip resizes first")
            if getattr(transform, "size", None) is None or getattr(transform, "max_size", None) is not None:
                raise _refuse(name, position, "max_size caps the longer side, which vclip's resize does not; give "
                                              "Resize a size and no max_size")
            fields["resize"] = _size(transform.size)
        elif name == "RandomResizedCrop":
            fields["crop"] = RandomResizedCrop(_pair(transform.size), tuple(transform.scale), tuple(transform.ratio))
        elif name in ("RandomCrop", "CenterCrop"):
            if getattr(transform, "padding", None) or getattr(transform, "pad_if_needed", False):
                raise _refuse(name, position, "it pads the picture, which vclip does not; crop within the picture")
            fields["crop"] = _pair(transform.size)
            fields["crop_mode"] = "random" if name == "RandomCrop" else "center"
        elif name == "RandomHorizontalFlip":
            fields["flip_probability"] = float(transform.p)
        elif name == "ColorJitter":
            if "RandomGrayscale" in seen:
                raise _refuse(name, position, f"it follows RandomGrayscale at position {seen['RandomGrayscale']}; "
                                              "vclip turns pictures gray after the colour jitter (ColorJitter before "
                                              "RandomGrayscale)")
            fields["color_jitter"] = ColorJitter(transform.brightness, transform.contrast, transform.saturation,
                                                 transform.hue)
        elif name == "RandomGrayscale":
            fields["grayscale_probability"] = float(transform.p)
        elif name == "ToDtype":
            fields["dtype"] = _dtype(transform, position)
        else:  # Normalize
            if fields.get("dtype", "uint8") == "uint8":
                raise _refuse(name, position, "it needs a float tensor: put ToDtype(torch.float32, scale=True) "
                                              "before it")
            fields["mean"], fields["std"] = tuple(transform.mean), tuple(transform.std)
        if name in ("Resize", "RandomResizedCrop"):
            smooth = _antialias(transform, name, position)
            if antialias is not None and smooth != antialias:
                raise _refuse(name, position, "its antialias differs from the earlier resampling's, and vclip "
                                              "resamples once")
            antialias = smooth
            fields["antialias"], fields["interpolation"] = smooth, "bilinear"
        seen[kind] = position
    return fields
