"""Normalisation constants and the Triton backend choice each live in one place.

The constants live in ``tumorboard._constants`` and the backend is chosen in
``tumorboard.kernels.choose_backend``; every user takes them from there.

Oracles: the published values written out by hand (timm ``IMAGENET_DEFAULT_*``, openai/CLIP's
``Normalize``) and the documented backend rules.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import tumorboard._constants as C
from tumorboard.errors import InvalidArgumentError


def test_values_and_torch_free():
    assert C.IMAGENET_MEAN == (0.485, 0.456, 0.406) and C.IMAGENET_STD == (0.229, 0.224, 0.225)
    assert C.OPENAI_CLIP_MEAN == (0.48145466, 0.4578275, 0.40821073)
    assert C.OPENAI_CLIP_STD == (0.26862954, 0.26130258, 0.27577711)
    code = "import sys, tumorboard._constants; print(sorted({'torch', 'numpy'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "[]", done.stderr  # plain tuples: no torch, not even numpy


def test_every_user_shares_the_one_definition():
    from tumorboard import slides
    from tumorboard.slides import _loader, _preprocess

    assert slides.IMAGENET_MEAN is C.IMAGENET_MEAN and slides.IMAGENET_STD is C.IMAGENET_STD
    for fn in (_preprocess.preprocess_patches, _loader.PatchLoader.__init__):
        defaults = inspect.signature(fn).parameters
        assert defaults["mean"].default is C.IMAGENET_MEAN
        assert defaults["std"].default is C.IMAGENET_STD
    pytest.importorskip("torch")
    from tumorboard.embed._backends import encoder_meta
    from tumorboard.models import conch, vit

    assert encoder_meta(object()) == (224, C.IMAGENET_MEAN, C.IMAGENET_STD, "bilinear")
    assert inspect.signature(vit.VisionTransformer).parameters["mean"].default is C.IMAGENET_MEAN
    assert (
        conch.OPENAI_CLIP_MEAN is C.OPENAI_CLIP_MEAN and conch.OPENAI_CLIP_STD is C.OPENAI_CLIP_STD
    )


def test_conch_tool_normalises_with_the_clip_statistics():
    from tumorboard.tools import preprocess_conch

    img = np.full((8, 8, 3), 128, np.uint8)
    x = preprocess_conch(img, 8)
    want = (128 / 255 - np.array(C.OPENAI_CLIP_MEAN)) / np.array(C.OPENAI_CLIP_STD)
    np.testing.assert_allclose(x[0, :, 0, 0], want, rtol=1e-6)


class _Device:
    def __init__(self, kind: str) -> None:
        self.type = kind


def test_choose_backend_rules(monkeypatch):
    from tumorboard import kernels
    from tumorboard.kernels import _utils

    assert kernels.choose_backend is _utils.choose_backend
    choose = kernels.choose_backend
    monkeypatch.setattr(_utils, "triton_available", lambda: True)
    assert choose("auto", _Device("cuda")) == "triton"
    assert choose("auto", "cuda:1") == "triton"
    assert choose("auto", _Device("cuda"), auto_triton=False) == "torch"  # e.g. dropout on
    assert choose("auto", _Device("cpu")) == "torch"
    assert choose("torch", _Device("cuda")) == "torch"
    assert choose("triton", _Device("cuda")) == "triton"
    monkeypatch.setattr(_utils, "INTERPRET", False)
    with pytest.raises(InvalidArgumentError, match="needs CUDA tensors"):
        choose("triton", _Device("cpu"))
    monkeypatch.setattr(_utils, "INTERPRET", True)
    assert choose("triton", _Device("cpu")) == "triton"
    with pytest.raises(InvalidArgumentError, match="backend: expected 'auto', 'triton' or 'torch'"):
        choose("cuda", _Device("cuda"))
    monkeypatch.setattr(_utils, "triton_available", lambda: False)
    assert choose("auto", _Device("cuda")) == "torch"
    with pytest.raises(ImportError, match=r"needs triton, which is not installed.*\[gpu\]"):
        choose("triton", _Device("cuda"))


def test_kernels_and_models_dispatch_through_choose_backend(monkeypatch):
    torch = pytest.importorskip("torch")
    from tumorboard.models import abmil as abmil_model
    from tumorboard.models import adapter

    seen = []

    def spy(backend, device, *, auto_triton=True):
        seen.append((backend, device.type, auto_triton))
        return "torch"

    monkeypatch.setattr(abmil_model, "choose_backend", spy)
    monkeypatch.setattr(adapter, "choose_backend", spy)
    m = abmil_model.ABMIL(8, hidden=4, n_heads=1, dropout=0.5).train()
    m.forward_varlen(torch.zeros(3, 8), torch.tensor([0, 3]))
    m.eval().forward_varlen(torch.zeros(3, 8), torch.tensor([0, 3]), backend="torch")
    h = torch.ones(2, 4)
    out = adapter._scale(h, torch.tensor([0, 1]), torch.ones(3, 4))
    assert torch.equal(out, torch.tensor([[1.0] * 4, [2.0] * 4]))
    assert seen == [("auto", "cpu", False), ("torch", "cpu", True), ("auto", "cpu", True)]
