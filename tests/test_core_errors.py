"""The exception map of the compiled core: every C++ exception arrives as its documented class.

One test per row of the table in ``tumorboard.errors`` (thrown by ``_core.testing``), then real
failures from each domain submodule: a bad choice string, a core check, a bad offsets array and a
wrong Python type, each with the one message format of the binding layer.
"""

from __future__ import annotations

import numpy as np
import pytest
from tumorboard import _core
from tumorboard.errors import (
    CoreError,
    InvalidArgumentError,
    InvalidTypeError,
    TumorboardError,
)

# (C++ exception thrown by _core.testing.throw_exception, Python class, builtin parent)
ROWS = [
    ("invalid_type", InvalidTypeError, TypeError),
    ("invalid_argument", InvalidArgumentError, ValueError),
    ("domain_error", InvalidArgumentError, ValueError),
    ("out_of_range", InvalidArgumentError, ValueError),
    ("length_error", InvalidArgumentError, ValueError),
    ("logic_error", CoreError, RuntimeError),
    ("runtime_error", CoreError, RuntimeError),
    ("range_error", CoreError, RuntimeError),
    ("overflow_error", CoreError, RuntimeError),
    ("exception", CoreError, RuntimeError),
]


@pytest.mark.parametrize(("kind", "cls", "builtin"), ROWS)
def test_each_row_of_the_map(kind: str, cls: type, builtin: type) -> None:
    """Each C++ exception type arrives as exactly its class, with its builtin parent."""
    message = f"{kind}: the message survives the crossing"
    with pytest.raises(cls) as info:
        _core.testing.throw_exception(kind, message)
    assert type(info.value) is cls
    assert isinstance(info.value, TumorboardError)
    assert isinstance(info.value, builtin)
    assert str(info.value) == message


def test_bad_alloc_is_memory_error() -> None:
    """std::bad_alloc arrives as the builtin MemoryError (not a TumorboardError)."""
    with pytest.raises(MemoryError) as info:
        _core.testing.throw_exception("bad_alloc", "ignored")
    assert type(info.value) is MemoryError
    assert not isinstance(info.value, TumorboardError)
    assert "bad_alloc" in str(info.value)


def test_unknown_choice_message_format() -> None:
    """The one choice parser names the argument, the value and every accepted value in order."""
    with pytest.raises(InvalidArgumentError) as info:
        _core.testing.throw_exception("segfault", "x")
    assert str(info.value).startswith(
        "kind: unknown value 'segfault'; expected one of 'invalid_type', 'invalid_argument', "
    )
    assert str(info.value).endswith("'overflow_error', 'exception'")


def test_submodules_per_domain() -> None:
    """_core holds one submodule per core domain plus the test hooks, nothing else."""
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert public == {"stats", "text", "tiling", "slides", "seqmask", "traj", "testing"}
    assert _core.stats.__name__ == "tumorboard._core.stats"


# ----------------------------------------------------------------------------- stats


def test_stats_bad_method_choice() -> None:
    """A bad interval method reaches the stats binding's choice parser."""
    values = np.arange(6, dtype=np.float64).reshape(6, 1)
    counts = np.ones((3, 6))
    with pytest.raises(InvalidArgumentError) as info:
        _core.stats.bootstrap_from_counts(values, counts, "mean", [], "median", 0.95, False)
    assert str(info.value) == (
        "method: unknown value 'median'; expected one of 'percentile', 'basic', 'bca'"
    )


def test_stats_bad_resampler_choice() -> None:
    """The resampler option goes through the same parser and message."""
    values = np.ones((4, 1))
    keys = np.zeros(1, dtype=np.uint64)
    with pytest.raises(InvalidArgumentError, match=r"^resampler: unknown value 'fast'; expected"):
        _core.stats.bootstrap_multinomial(
            values, None, 1, None, 1, None, 1, keys, "mean", [], 0, 10, 1, 1, "fast",
            "percentile", 0.95, False,
        )  # fmt: skip


def test_stats_core_check_arrives_typed() -> None:
    """A std::invalid_argument from the statistic registry is an InvalidArgumentError."""
    with pytest.raises(InvalidArgumentError, match="unknown statistic 'median'"):
        _core.stats.evaluate_statistic("median", [], np.array([1.0]), 1.0)


def test_stats_hash_offsets_check() -> None:
    """The one offsets check guards hash_strings: offsets past the data are refused."""
    with pytest.raises(InvalidArgumentError) as info:
        _core.stats.hash_strings(np.array([0, 2, 9], np.int64), np.zeros(4, np.uint8))
    assert str(info.value) == (
        "offsets[2] is 9; expected offsets that do not decrease and lie in [0, 4]"
    )


# ------------------------------------------------------------------------------ text


def test_text_bad_tokenizer_choice() -> None:
    """A bad tokenizer name reaches the text binding's choice parser."""
    with pytest.raises(InvalidArgumentError) as info:
        _core.text.rouge(["a b"], ["a"], "hyps", "refs", [1], "bpe", "none", 1)
    assert str(info.value) == (
        "tokenizer: unknown value 'bpe'; expected one of 'rouge', 'unicode', 'whitespace'"
    )


def test_text_bleu_choices() -> None:
    """BLEU's tokenize and smooth options use the same parser and message."""
    with pytest.raises(InvalidArgumentError, match=r"^tokenize: unknown value 'intl'; expected"):
        _core.text.bleu_tokenize(["a"], "intl", False)
    with pytest.raises(InvalidArgumentError) as info:
        _core.text.bleu_from_statistics(np.zeros((1, 10)), 4, "add-one", None, False, 0)
    assert str(info.value) == (
        "smooth: unknown value 'add-one'; expected one of 'exp', 'floor', 'add-k', 'none'"
    )


def test_text_column_errors() -> None:
    """The one string-column reader: wrong types and missing entries, named by position."""
    with pytest.raises(InvalidTypeError) as info:
        _core.text.check(["a", 3], "hyps")
    assert str(info.value) == "hyps[1]: expected a str, got int"
    with pytest.raises(InvalidArgumentError) as info:
        _core.text.check(["a", None], "refs")
    assert str(info.value) == "refs[1] is null (None); expected a str"
    with pytest.raises(InvalidTypeError) as info:
        _core.text.bleu_tokenize(5, "13a", False)
    assert str(info.value) == "texts: expected a sequence of str, got int"


def test_text_arrow_offsets_check() -> None:
    """Arrow-style (offsets, data, validity) columns go through the one offsets check."""
    data = np.frombuffer(b"abcd", np.uint8)
    good = (np.array([0, 2, 4], np.int64), data, None)
    assert _core.text.bleu_tokenize(good, "13a", False) == ["ab", "cd"]
    bad = (np.array([0, 3, 2], np.int64), data, None)
    with pytest.raises(InvalidArgumentError) as info:
        _core.text.bleu_tokenize(bad, "13a", False)
    assert str(info.value) == (
        "texts offsets[2] is 2; expected offsets that do not decrease and lie in [0, 4]"
    )


def test_python_errors_pass_through() -> None:
    """A Python exception raised while C++ reads a column arrives unchanged."""

    class Boom(Exception):
        pass

    def texts():
        yield "a"
        raise Boom("from the generator")

    with pytest.raises(Boom, match="from the generator"):
        _core.text.bleu_tokenize(texts(), "13a", False)


def test_signature_mismatch_is_pybind11_type_error() -> None:
    """Arguments that do not match the signature fail in pybind11 itself: a plain TypeError."""
    with pytest.raises(TypeError, match="incompatible function arguments") as info:
        _core.text.check("not a list", "hyps")
    assert not isinstance(info.value, TumorboardError)


# ---------------------------------------------------------------------------- tiling


def test_tiling_bad_interpolation_choice() -> None:
    """A bad interpolation name reaches the tiling binding's choice parser."""
    img = np.zeros((4, 4), np.uint8)
    with pytest.raises(InvalidArgumentError) as info:
        _core.tiling.resize(img, 2, 2, "nearest", 1)
    assert str(info.value) == (
        "interpolation: unknown value 'nearest'; expected one of 'bilinear', 'bicubic'"
    )


def test_tiling_core_check_arrives_typed() -> None:
    """A std::invalid_argument from the tiling core (even kernel size) is typed."""
    with pytest.raises(InvalidArgumentError, match="odd"):
        _core.tiling.median_blur(np.zeros((4, 4), np.uint8), 4, 1)


# --------------------------------------------------------------------------- seqmask


def test_seqmask_offsets_check() -> None:
    """Sequence offsets must span all token ids: the one offsets check, kWhole mode."""
    ids = np.array([1, 2, 3], np.int64)
    patterns = np.array([1], np.int64)
    pattern_offsets = np.array([0, 1], np.int64)
    labels = np.array([1], np.int8)
    args = (patterns, pattern_offsets, labels, False, 1)
    got = _core.seqmask.segment_ids(ids, np.array([0, 3], np.int64), *args)
    assert got.tolist() == [0, 1, 1]
    with pytest.raises(InvalidArgumentError) as info:
        _core.seqmask.segment_ids(ids, np.array([0, 2], np.int64), *args)
    assert str(info.value) == "offsets: expected offsets from 0 to 3, got 0 to 2"
