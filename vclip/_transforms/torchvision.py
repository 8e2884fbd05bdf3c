"""A torchvision.transforms.v2 pipeline translated into vclip's fused :class:`~vclip.TransformSpec`.

The transforms are read from their public attributes (``size``, ``scale``, ``ratio``,
``interpolation``, ``antialias``, ``p``, ``brightness``..., ``mean``, ``std``, ``dtype``), so
torchvision need not be importable here: on machines where its wheel does not load beside the CPU
build of torch, objects that carry the same attributes translate the same way. Steps may come in
any order that means the same as the one pass's (resize, crop, flip, colour, dtype, normalize):
a step that moves into that order only moves past steps it commutes with. What the one pass
cannot reproduce is refused, naming the transform and the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ArgumentError
from .augment import ColorJitter, RandomResizedCrop

__all__ = ["spec_fields", "looks_like_torchvision", "FUSED"]

_SPATIAL = ("Resize", "RandomResizedCrop", "RandomCrop", "CenterCrop", "RandomHorizontalFlip")
_COLOUR = ("ColorJitter", "RandomGrayscale")
_LAYOUT_STEPS = ("ConvertBCHWtoCBHW",)  # torchvision's video-classification reference: TCHW clips to CTHW
FUSED = _SPATIAL + _COLOUR + ("ToDtype", "ConvertImageDtype", "Normalize") + _LAYOUT_STEPS
"""The torchvision transforms vclip fuses, by class name (v2's, and the v1 names its video
classification presets use)."""
_CROPS = ("RandomResizedCrop", "RandomCrop", "CenterCrop")
# Where vclip applies each step: the one pass resizes, crops, flips, changes colour, converts and
# normalizes, in this order. A pipeline in another order is the same pipeline when every step that
# moves only moves past steps it commutes with (see _reason_not_commuting).
_STAGES = {"Resize": 0, "RandomResizedCrop": 1, "RandomCrop": 1, "CenterCrop": 1, "RandomHorizontalFlip": 2,
           "ColorJitter": 3, "RandomGrayscale": 4, "ToDtype": 5, "ConvertImageDtype": 5, "Normalize": 6,
           "ConvertBCHWtoCBHW": 7}
_ORDER_WORDS = "Resize, the crop, the flip, ColorJitter, RandomGrayscale, ToDtype, Normalize"
_DTYPES = {"torch.uint8": "uint8", "torch.float16": "float16", "torch.float32": "float32", "torch.bfloat16": "bfloat16"}
_WRAPPERS = ("VideoClassificationPresetTrain", "VideoClassificationPresetEval")  # objects holding a Compose


def looks_like_torchvision(value: Any) -> bool:
    """Whether ``value`` is a torchvision v2 transform or ``Compose`` (or an object named like one)."""
    kind = type(value)
    return kind.__module__.startswith("torchvision.") or kind.__name__ in FUSED + ("Compose",) + _WRAPPERS


def _transforms(value: Any) -> list[Any]:
    """The transforms of a Compose (nested ones flattened), a preset holding one (torchvision's
    ``VideoClassificationPresetTrain``), a sequence, or one transform."""
    if type(value).__name__ in ("Compose",) + _WRAPPERS and hasattr(value, "transforms"):
        inner = value.transforms
        if type(value).__name__ in _WRAPPERS:
            return _transforms(inner)
        return [item for step in inner for item in _transforms(step)]
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
    """The output dtype of ``ToDtype`` (or ``ConvertImageDtype``, which always scales)."""
    name_of_step = type(transform).__name__
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
    if dtype != "uint8" and not getattr(transform, "scale", name_of_step == "ConvertImageDtype"):
        raise _refuse("ToDtype", position, "scale=False keeps 0-255 values in a float tensor, and vclip's float "
                                           "outputs are 0-1: use ToDtype(..., scale=True)")
    return dtype


def _reason_not_commuting(later: Any, earlier: Any) -> str | None:
    """Why step ``later`` cannot move before step ``earlier`` into vclip's order without changing
    what the pipeline does (None: they commute).

    A flip commutes with everything (a random crop's window is drawn symmetrically); a crop with
    every per-pixel step but a contrast change, which blends with the mean of the whole picture;
    resampling (Resize, RandomResizedCrop) with the linear per-pixel steps (grayscale, ToDtype,
    Normalize) but not with ColorJitter, which clamps and changes hue and saturation non-linearly;
    the colour steps work on pictures in [0, 1], not on normalized values.
    """
    name, other = type(later).__name__, type(earlier).__name__
    if name == "RandomHorizontalFlip":
        return None
    if name in _CROPS and other in ("RandomHorizontalFlip", "RandomGrayscale", "ToDtype", "ConvertImageDtype",
                                    "Normalize"):
        return None
    if name in ("RandomCrop", "CenterCrop") and other == "ColorJitter":
        if not getattr(earlier, "contrast", None):
            return None
        return ("ColorJitter's contrast blends each picture with its mean, and a crop changes that mean: put the "
                "crop before ColorJitter")
    if name in ("Resize", "RandomResizedCrop") and other in ("RandomHorizontalFlip", "RandomGrayscale", "ToDtype",
                                                             "ConvertImageDtype", "Normalize"):
        return None
    if name in ("Resize", "RandomResizedCrop") and other == "ColorJitter":
        return ("resampling does not commute with ColorJitter (it clamps to [0, 1] and changes hue and saturation "
                "non-linearly): put the spatial transforms before the colour ones")
    if name == "Resize" and other in _CROPS:
        return "vclip resizes first: put Resize before the crop"
    if name == "ColorJitter" and other == "RandomGrayscale":
        return "vclip turns pictures gray after the colour jitter (ColorJitter before RandomGrayscale)"
    if name in _COLOUR and other == "Normalize":
        return "the colour transforms work on pictures in [0, 1], not on normalized values: put Normalize last"
    if name in _COLOUR and other in ("ToDtype", "ConvertImageDtype"):
        return None  # vclip changes colour in float; torchvision on uint8 rounds after each step
    return f"vclip applies {name} before {other}"


def spec_fields(value: Any, *, layout: str = "TCHW") -> dict[str, Any]:
    """The :class:`~vclip.TransformSpec` fields of a torchvision v2 pipeline (see
    :meth:`vclip.TransformSpec.from_torchvision`, which makes the spec of them).

    Raises:
        ArgumentError: A transform that cannot be fused, or an order vclip cannot reproduce.
    """
    fields: dict[str, Any] = {"layout": layout}
    seen: dict[str, int] = {}
    steps = _transforms(value)
    antialias: bool | None = None
    for position, transform in enumerate(steps):
        name = type(transform).__name__
        if name not in FUSED:
            raise _refuse(name, position, f"vclip fuses {', '.join(FUSED)}; apply {name} to the tensors vclip gives "
                                          "(uint8 or float, channels last with layout='THWC') yourself")
        kind = "crop" if name in _CROPS else "ToDtype" if name == "ConvertImageDtype" else name
        if kind in seen:
            earlier = "a crop" if kind == "crop" else name
            raise _refuse(name, position, f"it follows {earlier} at position {seen[kind]}, and vclip takes one of each")
        for before in range(position):  # the steps this one moves past into vclip's order
            earlier_step = steps[before]
            if _STAGES[type(earlier_step).__name__] > _STAGES[name]:
                reason = _reason_not_commuting(transform, earlier_step)
                if reason is not None:
                    raise _refuse(name, position, f"it follows {type(earlier_step).__name__} at position {before}, "
                                                  f"and vclip applies its steps in the order {_ORDER_WORDS}: moved "
                                                  f"there, the pipeline would not do the same ({reason})")
        if name == "Resize":
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
            fields["color_jitter"] = ColorJitter(transform.brightness, transform.contrast, transform.saturation,
                                                 transform.hue)
        elif name == "RandomGrayscale":
            fields["grayscale_probability"] = float(transform.p)
        elif name in ("ToDtype", "ConvertImageDtype"):
            fields["dtype"] = _dtype(transform, position)
        elif name == "Normalize":
            if fields.get("dtype", "uint8") == "uint8":
                raise _refuse(name, position, "it needs a float tensor: put ToDtype(torch.float32, scale=True) "
                                              "before it")
            fields["mean"], fields["std"] = tuple(transform.mean), tuple(transform.std)
        else:  # ConvertBCHWtoCBHW: the reference scripts' last step, a [T, C, H, W] clip as [C, T, H, W]
            if position != len(steps) - 1:
                raise _refuse(name, position, "it reorders the clip's axes and must be the last step")
            if layout != "TCHW":
                raise _refuse(name, position, f"it turns TCHW clips into CTHW, and layout={layout!r} was asked "
                                              "for: leave layout at its default")
            fields["layout"] = "CTHW"
        if name in ("Resize", "RandomResizedCrop"):
            smooth = _antialias(transform, name, position)
            if antialias is not None and smooth != antialias:
                raise _refuse(name, position, "its antialias differs from the earlier resampling's, and vclip "
                                              "resamples once")
            antialias = smooth
            fields["antialias"], fields["interpolation"] = smooth, "bilinear"
        seen[kind] = position
    return fields
