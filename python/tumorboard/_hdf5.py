"""HDF5 attribute values as TRIDENT writes and reads them, shared by coords and features files.

TRIDENT's coords and features files (mahmoodlab/TRIDENT@a91fa84, the attributes of the
``coords`` dataset) store ``None`` as the string ``"None"`` and dictionaries as JSON text;
integral floats are written as integers so that attributes such as ``patch_size`` keep an
integer type. Reading applies the inverse mapping.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ._json import json_text

__all__ = ["attr_from_hdf5", "attr_to_hdf5"]


def attr_to_hdf5(value: Any) -> Any:
    """Return ``value`` in the form it is stored as an HDF5 attribute.

    Parameters
    ----------
    value : Any
        An attribute value: None, a dict, a number, a string or an array.

    Returns
    -------
    Any
        ``"None"`` for None, sorted-key JSON text for a dict, an int for an integral float, the
        value itself otherwise.
    """
    if value is None:
        return "None"
    if isinstance(value, dict):
        return json_text(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def attr_from_hdf5(value: Any) -> Any:
    """Return the Python value of an attribute read from an HDF5 file.

    Parameters
    ----------
    value : Any
        What h5py returned: bytes, a numpy scalar or array, a string, a number.

    Returns
    -------
    Any
        Text for bytes, plain Python scalars and lists for numpy values, None for ``"None"``,
        a dict for JSON object text; anything else unchanged.
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str):
        if value == "None":
            return None
        if value.startswith("{"):
            try:
                return json.loads(value)
            except ValueError:
                return value
    return value
