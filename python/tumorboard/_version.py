"""The package version, as a constant: reading it costs no ``importlib.metadata`` lookup.

``importlib.metadata.version`` took about 110 ms on the 2-core machine, a fifth of the whole
``tumorboard --version`` budget; a test keeps this string equal to ``[project] version`` in
``pyproject.toml`` and to the installed distribution's metadata.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
