"""Renamed keywords keep working for one release, with a DeprecationWarning naming the new one.

Two decorators for public functions:

* :func:`renamed_keywords` - ``old=`` is passed on as ``new=`` (``tokenize=`` -> ``tokenizer=``,
  ``workers=`` -> ``threads=``, Krippendorff's ``level=`` -> ``level_of_measurement=``);
* :func:`options_keywords` - the resampling keywords the statistics took before
  :class:`~tumorboard.stats.BootstrapOptions` (``n_resamples=``, ``level=``, ``method=``,
  ``seed=``, ``threads=``) are folded into ``options=``.

Giving the old and the new spelling together is refused (:class:`InvalidArgumentError`), so a
script that half-migrated does not silently use one of them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import InvalidArgumentError

__all__ = ["OPTIONS_KEYWORDS", "options_keywords", "renamed_keywords"]

F = TypeVar("F", bound=Callable[..., Any])

#: The keywords :class:`~tumorboard.stats.BootstrapOptions` replaced.
OPTIONS_KEYWORDS = ("n_resamples", "level", "method", "seed", "threads")


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Accept each ``old=`` keyword (``renames`` maps old -> new) as its new spelling.

    Parameters
    ----------
    **renames : str
        Old keyword name -> new keyword name.

    Returns
    -------
    callable
        The decorator.
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise InvalidArgumentError(
                        f"{fn.__name__}: {old}= is the deprecated spelling of {new}=; give one"
                    )
                warnings.warn(
                    f"{fn.__name__}({old}=...) is deprecated and will be removed in the next "
                    f"release; use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def options_keywords(options_type: type, *names: str) -> Callable[[F], F]:
    """Fold the pre-``BootstrapOptions`` keywords ``names`` into ``options=``.

    Parameters
    ----------
    options_type : type
        :class:`~tumorboard.stats.BootstrapOptions` (passed in: this module imports no
        package).
    *names : str
        The old keywords this function took (default: all of :data:`OPTIONS_KEYWORDS`).

    Returns
    -------
    callable
        The decorator.
    """
    keys = names or OPTIONS_KEYWORDS

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            old = {k: kwargs.pop(k) for k in keys if k in kwargs}
            if old:
                if kwargs.get("options") is not None:
                    raise InvalidArgumentError(
                        f"{fn.__name__}: {', '.join(f'{k}=' for k in old)} and options= given; "
                        "the former are the deprecated spelling of options=BootstrapOptions(...)"
                    )
                spelled = ", ".join(f"{k}={v!r}" for k, v in old.items())
                warnings.warn(
                    f"{fn.__name__}({', '.join(f'{k}=' for k in old)}...) is deprecated and will "
                    f"be removed in the next release; use options=BootstrapOptions({spelled})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs["options"] = options_type(**old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
