"""The options of a bootstrap confidence interval, as one validated value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._typing import Method
from ..errors import InvalidArgumentError, InvalidTypeError
from . import _validate


@dataclass(frozen=True, kw_only=True)
class BootstrapOptions:
    """How a bootstrap confidence interval is computed.

    One frozen, self-validating value passed as ``options=`` to every function that resamples:
    :func:`~tumorboard.stats.bootstrap`, :func:`~tumorboard.stats.paired_bootstrap`,
    :func:`~tumorboard.stats.bootstrap_sufficient`, :func:`~tumorboard.stats.poisson_partials`,
    the agreement statistics, :func:`~tumorboard.text.corpus_bleu` and the benchmark scorers
    (the pattern of scipy.stats' ``_resampling.py``, where the resampling options are checked
    once in one place). Fields are validated on construction; :func:`dataclasses.replace`
    validates again.

    Parameters
    ----------
    n_resamples : int, default 1000
        Number of bootstrap resamples B, in [1, 2^32). A call whose resample arrays would not
        fit in the machine's physical memory is refused at its start, with the largest B that
        fits (``stats._validate.resample_memory``).
    level : float, default 0.95
        Confidence level of the two-sided interval, strictly between 0 and 1.
    method : {"percentile", "basic", "bca"}, default "percentile"
        Interval method (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13-14;
        the definitions of ``scipy.stats.bootstrap``).
    seed : int, default 0
        Seed of the counter-based random streams, in [0, 2^64). A fixed seed gives bit-identical
        results on any number of threads.
    threads : int or None, default None
        Worker threads of the engine, in [1, 4096]; None uses all cores.

    Raises
    ------
    InvalidArgumentError
        A field is out of range or of the wrong kind; the message names the field.

    Examples
    --------
    >>> from tumorboard.stats import BootstrapOptions
    >>> BootstrapOptions(n_resamples=2000, seed=1).level
    0.95
    """

    n_resamples: int = 1000
    level: float = 0.95
    method: Method = "percentile"
    seed: int = 0
    threads: int | None = None

    def __post_init__(self) -> None:
        """Validate every field and store it in its canonical Python type."""
        checked = {
            "n_resamples": _validate.integer(
                self.n_resamples, name="n_resamples", low=1, high=2**32
            ),
            "level": _validate.level(self.level),
            "method": _validate.choice(self.method, _validate.METHODS, name="method"),
            "seed": _validate.integer(self.seed, name="seed", low=0, high=2**64),
            "threads": _validate.check_threads(self.threads) or None,  # None: all cores
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def resolve(cls, options: Any, *, ci: Any = True) -> BootstrapOptions:
        """Return ``options``, or the default options for None.

        The one check of an ``options=`` argument, shared by every function that takes one.

        Parameters
        ----------
        options : BootstrapOptions or None
            The caller's options.
        ci : bool, default True
            Whether the caller computes an interval (functions with a ``ci`` flag pass it):
            options given without one are an error rather than silently unused.

        Returns
        -------
        BootstrapOptions
            ``options``, or ``BootstrapOptions()``.

        Raises
        ------
        InvalidTypeError
            ``options`` is neither None nor a :class:`BootstrapOptions`.
        InvalidArgumentError
            ``ci`` is not a bool, or options were given with ``ci=False``.
        """
        if not isinstance(ci, bool):
            raise InvalidArgumentError(f"ci: expected True or False, got {ci!r}")
        if options is None:
            return cls()
        if not isinstance(options, BootstrapOptions):
            raise InvalidTypeError(
                "options: expected a tumorboard.stats.BootstrapOptions or None, got "
                f"{type(options).__name__}"
            )
        if not ci:
            raise InvalidArgumentError(
                "options: bootstrap options were given with ci=False; pass ci=True for an interval"
            )
        return options

    @property
    def engine_threads(self) -> int:
        """The thread count the C++ engine takes: ``threads``, or 0 for its default."""
        return 0 if self.threads is None else self.threads
