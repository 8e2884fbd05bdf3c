"""Griffe extension for the API pages: Sphinx roles in docstrings shown as code.

vclip's docstrings name other objects as Sphinx does (``:class:`~vclip.ClipLoader```,
``:func:`estimate_memory```), which Markdown does not know. They are shown as inline code: the
last component of a name written with ``~`` (as Sphinx shows it), the name as written otherwise.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_as_code, obj.docstring.value)
