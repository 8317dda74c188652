"""JSON text of stored payloads: one serialiser for everything tumorboard writes as JSON.

Trajectory rows (run configurations, event inputs and outputs), importer payloads, the store's
manifest and commit log, HDF5 attributes, tissue GeoJSON and model-file metadata are
all written with :func:`json_text`, so the same value always gives the same text: keys sorted
(at every depth), non-ASCII characters kept as they are (the text is stored as UTF-8), the
standard separators of ``json.dumps`` (``", "`` and ``": "``, no indentation), and values JSON
has no type for (dates, paths, numpy scalars, ...) written as their ``str()``.
"""

from __future__ import annotations

import json
from typing import Any, overload

__all__ = ["json_text"]


@overload
def json_text(value: None) -> None: ...


@overload
def json_text(value: Any) -> str: ...


def json_text(value: Any) -> str | None:
    """Serialise a payload to JSON text for storage.

    Parameters
    ----------
    value : Any
        A JSON-able value (dict, list, str, number, bool); nested values JSON cannot represent
        are written as their ``str()``. None (a missing payload) stays None rather than becoming
        the text ``null``, so nullable text columns stay null.

    Returns
    -------
    str or None
        The JSON text with sorted keys and non-ASCII characters kept, or None for None.

    Examples
    --------
    >>> json_text({"b": 1, "a": "é"})
    '{"a": "é", "b": 1}'
    """
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
