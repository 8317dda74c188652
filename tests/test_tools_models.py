"""``conch_zero_shot`` and ``ihc_positive_percentage`` end to end on scikit-image's IHC image.

Both run with the tiny model configs (random weights).

Oracles: the preprocessing is redone with Pillow (bicubic resize of the shorter side, centre crop)
and numpy; similarities, softmax, rounding and bins are recomputed in numpy from the model's
towers called directly; the IHC estimate is recomputed from Pillow-resized tiles, the encoder and
the regressor called directly; the bins and reply sentences are MTBBench's, written out here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
models = pytest.importorskip("tumorboard.models")
skimage_data = pytest.importorskip("skimage.data")
pytest.importorskip("tokenizers")
from PIL import Image  # noqa: E402
from tumorboard.tools import (  # noqa: E402
    CONCH_CAVEAT,
    conch_zero_shot,
    confidence_bin,
    ihc_positive_percentage,
    mtbbench_reply,
)

IHC = skimage_data.immunohistochemistry()
OPENAI_MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
OPENAI_STD = np.array([0.26862954, 0.26130258, 0.27577711])


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels

    tok = Tokenizer(tmodels.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<start_of_text>", "<end_of_text>"],
        show_progress=False,
    )
    corpus = ["invasive ductal carcinoma", "normal breast tissue", "lymphocytes and stroma",
              "adenocarcinoma of the colon", "necrosis"] * 20  # fmt: skip
    tok.train_from_iterator(corpus, trainer)
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def conch(tokenizer_json):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = models.load_conch("conch-tiny", tokenizer=tokenizer_json, device="cpu",
                              image_size=64)  # fmt: skip
    with torch.no_grad():
        m.logit_scale.fill_(np.log(100.0))  # CONCH's trained scale is large; makes bins vary
    return m


def test_confidence_bins_hand_worked():
    cases = {0.0: "very low", 0.19: "very low", 0.2: "low", 0.39: "low", 0.4: "medium",
             0.59: "medium", 0.6: "high", 0.79: "high", 0.8: "very high",
             1.0: "very high"}  # fmt: skip
    for p, b in cases.items():
        assert confidence_bin(p) == b, p
    with pytest.raises(ValueError):
        confidence_bin(1.01)


def oracle_conch(model, rgb, labels):
    h, w = rgb.shape[:2]
    s = model.image_size
    nh, nw = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
    r = np.asarray(Image.fromarray(rgb).resize((nw, nh), Image.BICUBIC)) / 255.0
    t, left = int(round((nh - s) / 2)), int(round((nw - s) / 2))
    x = ((r[t : t + s, left : left + s] - OPENAI_MEAN) / OPENAI_STD).transpose(2, 0, 1)[None]
    with torch.no_grad():
        img = model.encode_image(torch.tensor(x, dtype=torch.float32)).double().numpy()
        ids = model.tokenizer.encode(labels)
        txt = model.encode_text(torch.from_numpy(ids)).double().numpy()
        scale = float(model.logit_scale.exp())
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    logits = scale * img @ txt.T
    p = np.exp(logits - logits.max())
    return (p / p.sum())[0]


def test_conch_zero_shot_matches_oracle(conch, tmp_path):
    labels = ["invasive ductal carcinoma", "normal breast tissue", "necrosis"]
    roi = IHC[50:350, 100:500]  # non-square: exercises the shorter-side resize and centre crop
    res = conch_zero_shot(roi, labels, model=conch)
    probs = oracle_conch(conch, roi, labels)
    i = int(np.argmax(probs))
    np.testing.assert_allclose(list(res.probabilities.values()), probs, atol=1e-5)
    assert res.label == labels[i]
    assert res.probability == round(float(probs[i]), 2)
    assert res.confidence == confidence_bin(round(float(probs[i]), 2))
    assert res.reply == f"The image resembles {labels[i]} with {res.confidence} probability."
    path = tmp_path / "roi_CONCH.png"
    Image.fromarray(roi).save(path)
    assert conch_zero_shot(path, labels, model=conch).label == res.label
    msg = mtbbench_reply([res, res])
    assert msg == res.reply + "\n" + res.reply + CONCH_CAVEAT
    # a prompt ensemble of one prompt per label is the plain case
    ens = conch_zero_shot(roi, labels, model=conch, prompts=[[lab] for lab in labels])
    np.testing.assert_allclose(list(ens.probabilities.values()), probs, atol=1e-5)
    with pytest.raises(ValueError, match="labels"):
        conch_zero_shot(roi, [], model=conch)
    with pytest.raises(ValueError, match="prompts"):
        conch_zero_shot(roi, labels, model=conch, prompts=[["a"]])


def test_ihc_positive_percentage_matches_oracle():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = models.load("uni2-tiny", device="cpu", dtype="fp32")
        reg = models.load("mtbbench-regressor", in_dim=enc.embed_dim, hidden=16, device="cpu")
    with torch.no_grad():  # a non-zero last bias so the clamp to [0, 100] is not trivially 0
        reg.regressor[11].bias.fill_(37.0)
    res = ihc_positive_percentage(IHC, encoder=enc, regressor=reg, segmentation=None,
                                  name="IHC_CD3.png")  # fmt: skip
    # MTBBench geometry: 1 um/px = 10x, 256 px at 20x -> 128 px tiles; 512 / 128 = 4x4 tiles
    assert res.n_patches == 16
    expect = [(x, y) for y in range(0, 512, 128) for x in range(0, 512, 128)]
    assert [tuple(c) for c in res.coords.tolist()] == expect
    mean, std = np.array(enc.mean), np.array(enc.std)
    s = enc.image_size
    tiles = []
    for x, y in expect:
        crop = Image.fromarray(IHC[y : y + 128, x : x + 128])
        t = np.asarray(crop.resize((s, s), Image.BILINEAR))
        tiles.append(((t / 255.0 - mean) / std).transpose(2, 0, 1))
    with torch.no_grad():
        feats = enc(torch.tensor(np.stack(tiles), dtype=torch.float32))
        want = float(reg.predict_percentage(feats)[0])
    assert res.percentage == pytest.approx(want, abs=1e-3)
    assert 0.0 <= res.percentage <= 100.0
    assert res.reply == (
        f"According to IHC tool around {round(res.percentage, 1)}% of the cells in IHC_CD3.png "
        "are positively stained."
    )
    seg = ihc_positive_percentage(IHC, encoder=enc, regressor=reg)
    grid = set(expect)
    assert 1 <= seg.n_patches <= 16 and {tuple(c) for c in seg.coords.tolist()} <= grid
