"""The version of kgeval: the one source that ``pyproject.toml`` (``[tool.setuptools.dynamic]``), the package's
``__version__`` and every document kgeval writes (``--json``, audit cards, many-graph results) read."""

__version__ = "0.1.0"

__all__ = ["__version__"]
