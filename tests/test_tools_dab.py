"""``dab_positive_fraction`` and the tool schemas.

Oracles: scikit-image's ``rgb2hed`` (the same deconvolution divided by 6) on its real IHC image,
a hand-built 2x2 image of known stain amounts, and jsonschema validating tool calls against the
published schemas.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tumorboard import tools
from tumorboard.errors import InvalidArgumentError
from tumorboard.tools import (
    TOOL_SCHEMAS,
    anthropic_tool,
    color_deconvolution,
    dab_positive_fraction,
    openai_tool,
)

skimage_data = pytest.importorskip("skimage.data")
from skimage.color import rgb2hed  # noqa: E402

IHC = skimage_data.immunohistochemistry()


def test_deconvolution_matches_skimage():
    hed = color_deconvolution(IHC)
    np.testing.assert_allclose(hed / 6.0, rgb2hed(IHC), rtol=0, atol=1e-12)


def test_ihc_image_end_to_end_against_skimage():
    res = dab_positive_fraction(IHC)
    hed = rgb2hed(IHC) * 6.0  # skimage -> OD units
    dab = hed[..., 2]
    od_total = (-np.log(np.maximum(IHC / 255.0, 1e-6)) / np.log(10.0)).sum(-1)
    tissue = od_total >= 0.15
    positive = tissue & (dab >= 0.15) & (dab >= 3 * hed[..., 1])  # not eosin leaking into DAB
    assert res.n_tissue_pixels == int(tissue.sum())
    assert res.n_positive_pixels == int(positive.sum())
    assert res.fraction == pytest.approx(positive.sum() / tissue.sum(), abs=1e-12)
    assert res.percentage == pytest.approx(100 * res.fraction)
    assert 0.3 < res.fraction < 0.95  # the sample is strongly DAB-stained
    assert res.reply == (
        f"According to the DAB colour-deconvolution baseline around {res.percentage:.1f}% of the "
        "tissue area in the image is positively stained."
    )
    stricter = dab_positive_fraction(IHC, dab_threshold=0.5)
    not_eosin = dab >= 3 * hed[..., 1]
    assert stricter.n_positive_pixels == int((tissue & (dab >= 0.5) & not_eosin).sum())
    assert res.dab_found and stricter.dab_found
    assert stricter.fraction < res.fraction


def _stain_pixel(vector, amount):
    return np.round(255.0 * 10.0 ** (-amount * np.asarray(vector))).astype(np.uint8)


def test_hand_built_image():
    h, e, dab = tools.RGB_FROM_HED
    img = np.array(
        [
            [_stain_pixel(dab, 0.5), _stain_pixel(h, 0.5)],
            [[255, 255, 255], _stain_pixel(dab, 0.05)],  # white; faint DAB: total OD 0.08
        ],
        dtype=np.uint8,
    )
    hed = color_deconvolution(img)
    np.testing.assert_allclose(hed[0, 0], [0, 0, 0.5], atol=0.01)
    np.testing.assert_allclose(hed[0, 1], [0.5, 0, 0], atol=0.01)
    res = dab_positive_fraction(img, name="case 7")
    assert (res.n_tissue_pixels, res.n_positive_pixels, res.fraction) == (2, 1, 0.5)
    assert "50.0% of the tissue area in case 7" in res.reply
    white = dab_positive_fraction(np.full((4, 4, 3), 255, np.uint8))
    assert white.fraction == 0.0 and white.n_tissue_pixels == 0 and "no tissue" in white.reply
    # RGBA over white and float input give the same answer
    rgba = np.concatenate([img, np.full((2, 2, 1), 255, np.uint8)], -1)
    assert dab_positive_fraction(rgba).fraction == 0.5
    assert dab_positive_fraction(img / 255.0).fraction == 0.5


def test_file_input_and_errors(tmp_path):
    from PIL import Image

    p = tmp_path / "ihc_slide.png"
    Image.fromarray(IHC).save(p)
    res = dab_positive_fraction(p)
    assert res.fraction == dab_positive_fraction(IHC).fraction
    assert "in ihc_slide.png is" in res.reply
    with pytest.raises(FileNotFoundError, match="image"):
        dab_positive_fraction(tmp_path / "nope.png")
    with pytest.raises(ValueError, match="dab_threshold"):
        dab_positive_fraction(IHC, dab_threshold=-1)
    # an integer too large for a float is refused by name, not an OverflowError/TypeError
    with pytest.raises(ValueError, match=r"dab_threshold: expected a finite number, got 1000"):
        dab_positive_fraction(IHC, dab_threshold=10**400)
    with pytest.raises(ValueError, match=r"tissue_threshold: expected a finite number, got nan"):
        dab_positive_fraction(IHC, tissue_threshold=float("nan"))
    with pytest.raises(ValueError, match="RGB"):
        dab_positive_fraction(np.zeros((4, 4), np.uint8))


def test_schemas_validate_tool_calls():
    jsonschema = pytest.importorskip("jsonschema")
    assert set(TOOL_SCHEMAS) == {"conch_zero_shot", "ihc_positive_percentage",
                                 "dab_positive_fraction"}  # fmt: skip
    for name, fn in (("conch_zero_shot", tools.conch_zero_shot),
                     ("ihc_positive_percentage", tools.ihc_positive_percentage),
                     ("dab_positive_fraction", dab_positive_fraction)):  # fmt: skip
        schema = fn.schema
        assert schema is TOOL_SCHEMAS[name] and schema["name"] == name
        jsonschema.Draft202012Validator.check_schema(schema["parameters"])
        assert json.loads(json.dumps(schema)) == schema
        assert openai_tool(name) == {"type": "function", "function": schema}
        assert anthropic_tool(name)["input_schema"] == schema["parameters"]
    v = jsonschema.Draft202012Validator(TOOL_SCHEMAS["conch_zero_shot"]["parameters"])
    assert v.is_valid({"image": "roi.jpg", "labels": ["tumor", "stroma"]})
    assert not v.is_valid({"image": "roi.jpg", "labels": []})
    assert not v.is_valid({"image": "roi.jpg"})
    d = jsonschema.Draft202012Validator(TOOL_SCHEMAS["dab_positive_fraction"]["parameters"])
    assert d.is_valid({"image": "x.png", "dab_threshold": 0.2})
    assert not d.is_valid({"image": "x.png", "dab_threshold": -0.1})
    assert not d.is_valid({"image": "x.png", "model": "uni"})
    with pytest.raises(ValueError, match="unknown tool"):
        openai_tool("nope")


def _textured(colours, weights, seed=0, shape=(128, 128)):
    """Return an RGB patch of the given colours (with +-12 noise) in the given proportions."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(colours), size=shape, p=weights)
    rgb = np.asarray(colours, np.int64)[pick] + rng.integers(-12, 13, (*shape, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def test_an_he_patch_shows_no_dab_staining():
    # H&E: pink eosin stroma and purple haematoxylin nuclei, no brown
    he = _textured([(230, 150, 190), (222, 150, 196), (120, 70, 160), (245, 245, 245)],
                   [0.45, 0.25, 0.2, 0.1])  # fmt: skip
    res = dab_positive_fraction(he, name="the H&E patch")
    assert res.n_tissue_pixels > 0.85 * he.shape[0] * he.shape[1]
    assert not res.dab_found and res.fraction < 0.01
    assert res.reply.startswith("No DAB (brown) staining was found in the H&E patch")
    assert "%" not in res.reply.replace("1%", "")  # no positive percentage is given
    # without the eosin condition the DAB channel alone calls a fifth of this tissue positive
    hed = color_deconvolution(he)
    tissue = (-np.log10(np.maximum(he / 255.0, 1e-6))).sum(-1) >= 0.15
    assert ((hed[..., 2] >= 0.15) & tissue).sum() > 0.2 * tissue.sum()


def test_a_dab_brown_patch_is_measured():
    # brown DAB over a blue haematoxylin counterstain: a third of the tissue is brown
    ihc = _textured([(150, 100, 60), (110, 70, 40), (130, 140, 190), (245, 245, 245)],
                    [0.2, 0.1, 0.6, 0.1], seed=1)  # fmt: skip
    res = dab_positive_fraction(ihc, name="case 9")
    assert res.dab_found
    assert 0.30 < res.fraction < 0.37  # 0.3 of 0.9 tissue, give or take the noise
    assert f"around {res.percentage:.1f}% of the tissue area in case 9" in res.reply
    # the minimum is a documented option: above the brown share, the reply says none was found
    assert not dab_positive_fraction(ihc, min_dab_fraction=0.5).dab_found
    with pytest.raises(InvalidArgumentError, match="min_dab_fraction"):
        dab_positive_fraction(ihc, min_dab_fraction=1.5)
