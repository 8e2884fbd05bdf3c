"""The package version, in one place: read by ``vclip.__version__``, the catalogs vclip writes and
the build (``[tool.hatch.version]`` in pyproject.toml)."""

__version__ = "0.1.0"
