"""Renamed public keywords and flags keep working for one release, with a DeprecationWarning.

Each old spelling gives the same result as the new one, warns naming the new spelling, and is
refused when given together with it.
"""

from __future__ import annotations

import numpy as np
import pytest
from tumorboard import stats, text
from tumorboard.errors import InvalidArgumentError

OPTS = stats.BootstrapOptions(n_resamples=200, level=0.9, seed=3)
X = np.random.default_rng(0).random(50)


@pytest.mark.parametrize(
    "call",
    [
        lambda **kw: stats.bootstrap(X, **kw),
        lambda **kw: stats.paired_bootstrap(X, X[::-1].copy(), **kw),
        lambda **kw: stats.cohen_kappa([0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 1, 1], ci=True, **kw),
    ],
)
def test_resampling_keywords_fold_into_options(call):
    want = call(options=OPTS)
    with pytest.warns(DeprecationWarning, match=r"options=BootstrapOptions\(n_resamples=200"):
        got = call(n_resamples=200, level=0.9, seed=3)
    assert repr(got) == repr(want)
    with pytest.raises(InvalidArgumentError, match="deprecated spelling of options="):
        call(n_resamples=200, options=OPTS)


def test_krippendorff_level_is_the_measurement_scale():
    data = np.array([[1, 2, 3, 3, 2], [1, 2, 3, 3, 1]], dtype=float)
    want = stats.krippendorff_alpha(data, level_of_measurement="ordinal")
    with pytest.warns(DeprecationWarning, match="use level_of_measurement="):
        got = stats.krippendorff_alpha(data, level="ordinal")
    assert got.estimate == want.estimate


def test_text_tokenize_and_workers():
    hyps, refs = ["the cat sat on the mat"], [["the cat is on the mat"]]
    want = text.corpus_bleu(hyps, refs, tokenizer="13a")
    with pytest.warns(DeprecationWarning, match="use tokenizer="):
        got = text.corpus_bleu(hyps, refs, tokenize="13a")
    assert got.score == want.score
    with pytest.warns(DeprecationWarning, match="use threads="):
        text.rouge(["a b c"], ["a b d"], workers=1)
    with pytest.raises(InvalidArgumentError, match="deprecated spelling of tokenizer="):
        text.corpus_bleu(hyps, refs, tokenize="13a", tokenizer="13a")


def test_cli_resamples_flag(tmp_path):
    from test_compare import _store_of_three_models

    cli, _ = _store_of_three_models(tmp_path)
    store = tmp_path / "mtb"
    imp = cli("import", "jsonl", str(tmp_path / "logs"), "--store", str(store),
              "--benchmark", "mtbbench")  # fmt: skip
    assert imp.returncode == 0, imp.stderr
    new = cli("score", str(store), "--n-resamples", "50", "--format", "json")
    old = cli("score", str(store), "--resamples", "50", "--format", "json")
    assert old.returncode == 0, old.stderr
    assert "--resamples is deprecated" in old.stderr and "--n-resamples" in old.stderr
    assert old.stdout == new.stdout
