"""What every verb of the command line shares: its parser class and its option types.

Options are checked by ``argparse`` itself, before a verb does any work: each numeric or named
option takes one of the types below (``type=positive_int`` for ``--threads``, ``--batch-size``,
``--n-resamples``, ...), so ``--threads -3`` is refused with the option and the value before a
file is read or a model loaded. :class:`ArgumentParser` turns every usage error into a
:class:`UsageError` instead of printing the usage and exiting, so that ``tumorboard.cli.main``
prints it as its one line ``tumorboard: error: ...`` (exit status 2), like every other error.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import NoReturn

from ._checks import DEVICE_NAME, DEVICE_NAMES
from .errors import UsageError as UsageError  # re-exported

__all__ = [
    "KEYWORD_FLAGS",
    "ArgumentParser",
    "UsageError",
    "cli_message",
    "device_name",
    "fraction",
    "level",
    "nonnegative_int",
    "positive_float",
    "positive_int",
    "seed",
]


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose errors raise :class:`UsageError`.

    The standard parser prints its usage and the message and exits; here the caller prints one
    line. Sub-parsers made with ``add_subparsers().add_parser`` are of this class too.
    """

    def error(self, message: str) -> NoReturn:
        """Raise the usage error ``message`` (argparse calls this for every bad command line).

        Parameters
        ----------
        message : str
            argparse's message, e.g. ``"argument --threads: expected an integer >= 1, got
            '-3'"``.

        Raises
        ------
        UsageError
            Always.
        """
        raise UsageError(self.prog, message)


def _integer(text: str) -> int:
    """Parse a base-10 integer, or raise ``ArgumentTypeError`` naming the text."""
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _real(text: str) -> float:
    """Parse a finite real number, or raise ``ArgumentTypeError`` naming the text."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """Parse an integer >= 1 (threads, batch size, resamples, shards, patch size).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int
        The value.

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer, or < 1 (argparse adds the option's name to the message).
    """
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """Parse an integer >= 0 (overlap).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int
        The value.

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer, or negative.
    """
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def seed(text: str) -> int:
    """Parse a random seed, an integer in [0, 2^64).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int
        The seed.

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer in [0, 2^64).
    """
    value = _integer(text)
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2^64), got {text!r}")
    return value


def positive_float(text: str) -> float:
    """Parse a finite number > 0 (µm per pixel, magnification).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float
        The value.

    Raises
    ------
    argparse.ArgumentTypeError
        Not a finite number, or <= 0.
    """
    value = _real(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """Parse a number in [0, 1] (a minimum tissue fraction).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float
        The value.

    Raises
    ------
    argparse.ArgumentTypeError
        Not a number in [0, 1].
    """
    value = _real(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def level(text: str) -> float:
    """Parse a confidence level, strictly between 0 and 1.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float
        The level.

    Raises
    ------
    argparse.ArgumentTypeError
        Not a number in (0, 1).
    """
    value = _real(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a confidence level strictly between 0 and 1, got {text!r}"
        )
    return value


def device_name(text: str) -> str:
    """Parse a device name: auto, cpu, cuda, cuda:N or mps (its availability is checked later).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    str
        The name, lower-cased.

    Raises
    ------
    argparse.ArgumentTypeError
        Any other name.
    """
    name = text.strip().lower()
    if DEVICE_NAME.fullmatch(name) is None:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; expected {DEVICE_NAMES}")
    return name


#: Keyword names of the library functions behind ``tile`` and ``embed`` -> their command-line
#: flags. Library messages name keywords (``pass mpp=``, ``dtype='fp8'``); the command line
#: shows them as flags (``pass --mpp``, ``--dtype fp8``) through :func:`cli_message`.
KEYWORD_FLAGS = {
    "magnification": "--magnification",
    "patch_size": "--patch-size",
    "overlap": "--overlap",
    "min_tissue": "--min-tissue",
    "segmentation": "--preset",
    "seg_mpp": "--seg-mpp",
    "mpp": "--mpp",
    "reader": "--reader",
    "threads": "--threads",
    "model": "--model",
    "weights": "--weights",
    "random_weights": "--random-weights",
    "batch_size": "--batch-size",
    "backend": "--backend",
    "device": "--device",
    "dtype": "--dtype",
    "decode": "--decode",
    "compile": "--compile",
    "executor": "--executor",
    "force": "--force",
}

_KEYWORD = re.compile(
    r"(?<![\w.-])(" + "|".join(sorted(KEYWORD_FLAGS, key=len, reverse=True)) + r")="
    r"(?:'([^']*)'|\"([^\"]*)\"|(True)\b|([\w./:-]+))?(?:\s*\((--[\w-]+)\))?"
)
_LEADING = re.compile(r"^(" + "|".join(KEYWORD_FLAGS) + r"):")


def _flag_of(match: re.Match[str]) -> str:
    """Return the flag text of one ``keyword=value`` match of :data:`_KEYWORD`."""
    keyword, quoted, dquoted, true, bare, named = match.groups()
    flag = named or KEYWORD_FLAGS[keyword]
    value = quoted if quoted is not None else dquoted if dquoted is not None else bare
    if true or value is None:
        return flag
    return f"{flag} {value}"


def cli_message(message: object) -> str:
    """Rewrite the keyword names of a library message as command-line flags.

    ``pass mpp= (microns per pixel)`` becomes ``pass --mpp (microns per pixel)``,
    ``dtype='fp8'`` becomes ``--dtype fp8``, ``random_weights=True (--random-weights)`` becomes
    ``--random-weights``, and a leading ``threads:`` becomes ``--threads:``; only the keywords
    of :data:`KEYWORD_FLAGS` are rewritten.

    Parameters
    ----------
    message : object
        The message (an exception or a string).

    Returns
    -------
    str
        The message as the command line shows it.
    """
    text = _KEYWORD.sub(_flag_of, str(message))
    return _LEADING.sub(lambda m: f"{KEYWORD_FLAGS[m.group(1)]}:", text)
