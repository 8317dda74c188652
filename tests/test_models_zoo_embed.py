"""The zoo's encoders run through the embedding engine as UNI2-h does (random weights, CPU).

One small encoder per family (timm ViT, Hugging Face-free CNN, hybrid Swin): the native patch
loader, the encoder's own input size and normalisation from its registry row, TRIDENT's
features layout, and the width the row promises.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("tifffile")

from test_embed_jobs import cli  # noqa: E402
from test_slides_readers import write_test_slide  # noqa: E402
from tumorboard import models  # noqa: E402
from tumorboard.embed import EmbedOptions, embed_slides, read_features  # noqa: E402
from tumorboard.slides import TilingOptions  # noqa: E402


@pytest.fixture(scope="module")
def slide(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "a.tif"
    write_test_slide(path)
    return path


@pytest.mark.parametrize("name", ["kaiko-vits16", "resnet50", "ctranspath"])
def test_zoo_encoder_embeds_a_slide(slide, tmp_path, name):
    info = models.info(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = embed_slides([slide], model=name, random_weights=True, out=tmp_path,
                           tiling=TilingOptions(threads=1),
                           options=EmbedOptions(batch_size=16, device="cpu"),
                           progress=False)  # fmt: skip
    assert rep.ok and len(rep.done) == 1, rep.summary()
    feats, coords, attrs = read_features(rep.done[0].features_path)
    assert feats.shape == (len(coords), info.embed_dim) and len(coords) > 0
    assert np.isfinite(feats).all()
    assert rep.done[0].features_path.parent.name == f"features_{name}-random-weights"


def test_cli_embeds_with_a_zoo_encoder(slide, tmp_path):
    out = cli("embed", str(slide), "--model", "kaiko_vits16", "--random-weights", "--out",
              str(tmp_path / "out"), "--quiet")  # fmt: skip
    assert out.returncode == 0, out.stderr
    h5 = list((tmp_path / "out").rglob("features_kaiko-vits16-random-weights/a.h5"))
    assert len(h5) == 1 and read_features(h5[0])[0].shape[1] == 384
