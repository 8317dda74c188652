"""Hostile checkpoints for ``models.load``: refused, naming the file and the key; nothing runs.

Issue 18 (item 7). A seeded generator takes a real state dict (``uni2-tiny`` with random
weights), damages one tensor at a time in one of the ways the fuzzing run found to load
silently (cast to int64 or bool, all NaN, one inf, one NaN, complex) or breaks the file itself
(truncated, header bytes flipped, random bytes, zero bytes), in ``.safetensors`` and ``.pt``.
Each must raise :class:`~tumorboard.models.weights.WeightsError` (a TumorboardError) whose
message names the file and, for a tensor defect, the key (a flipped byte the reader never reads
may instead load weights equal to the source's); the untouched checkpoint loads and computes
the same features as the module it was saved from. Lower precision floats (float16, bfloat16)
are weights, not defects: they load.
"""

from __future__ import annotations

import random
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tumorboard import models  # noqa: E402
from tumorboard.errors import TumorboardError  # noqa: E402
from tumorboard.models.weights import WeightsError, save_state_dict  # noqa: E402

TENSOR_DEFECTS = ("int64", "bool", "all_nan", "one_inf", "one_nan", "complex")
FILE_DEFECTS = ("truncated", "flipped", "random", "empty")


@pytest.fixture(scope="module")
def source():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        m = models.load("uni2-tiny", device="cpu", seed=0)
    return m, {k: v.detach().clone() for k, v in m.state_dict().items()}


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", models.RandomWeightsWarning)
        return models.load("uni2-tiny", weights=path, device="cpu")


def _damage_tensor(t: torch.Tensor, kind: str, gen: torch.Generator) -> torch.Tensor:
    t = t.clone()
    if kind == "int64":
        return (t * 100).to(torch.int64)
    if kind == "bool":
        return t > 0
    if kind == "all_nan":
        return torch.full_like(t, float("nan"))
    if kind == "complex":
        return t.to(torch.complex64)
    flat = t.view(-1)
    i = int(torch.randint(flat.numel(), (1,), generator=gen))
    flat[i] = float("inf") if kind == "one_inf" else float("nan")
    return t


def test_good_checkpoints_load_in_every_float_precision(source, tmp_path):
    module, state = source
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = module(x)
    for suffix in (".safetensors", ".pt"):
        path = save_state_dict(state, tmp_path / f"good{suffix}")
        with torch.no_grad():
            assert torch.equal(_load(path)(x), want)
    for dtype in (torch.float16, torch.bfloat16):
        half = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        _load(save_state_dict(half, tmp_path / f"half_{dtype}.safetensors"))


def test_hostile_tensors_are_refused_naming_the_key(source, tmp_path):
    _, state = source
    rng = random.Random(18)
    gen = torch.Generator().manual_seed(18)
    float_keys = sorted(k for k, v in state.items() if v.is_floating_point())
    cases = 0
    for i in range(24):
        kind = TENSOR_DEFECTS[i % len(TENSOR_DEFECTS)]
        key = rng.choice(float_keys)
        bad = dict(state)
        bad[key] = _damage_tensor(state[key], kind, gen)
        suffix = ".pt" if kind == "complex" or i % 2 else ".safetensors"
        path = tmp_path / f"case{i:02d}_{kind}{suffix}"
        save_state_dict(bad, path)
        with pytest.raises(WeightsError) as info:
            _load(path)
        text = str(info.value)
        assert text.startswith(f"{path}: ") and repr(key) in text, text
        if kind in ("all_nan", "one_inf", "one_nan"):
            n_bad = state[key].numel() if kind == "all_nan" else 1
            assert f"got {n_bad} of {state[key].numel()} value(s) NaN or infinite" in text
        else:
            assert "tensor where the model holds torch.float32 weights" in text
        cases += 1
    assert cases == 24


def test_damaged_files_are_refused_naming_the_file(source, tmp_path):
    _, state = source
    rng = random.Random(7)
    for suffix in (".safetensors", ".pt"):
        data = save_state_dict(state, tmp_path / f"src{suffix}").read_bytes()
        for kind in FILE_DEFECTS:
            b = bytearray(data)
            if kind == "truncated":
                b = b[: rng.randrange(1, len(b) - 1)]
            elif kind == "flipped":
                for _ in range(8):
                    b[rng.randrange(0, 64)] ^= 0xFF
            elif kind == "random":
                b = bytearray(rng.randbytes(4096))
            else:
                b = bytearray()
            path = tmp_path / f"{kind}{suffix}"
            path.write_bytes(bytes(b))
            try:
                loaded = _load(path)
            except TumorboardError as exc:
                assert str(path) in str(exc)
                continue
            # bytes a reader never looks at (a zip entry's local header: torch reads the
            # central directory) may be damaged harmlessly: then the weights are the same
            assert kind == "flipped", f"{path} loaded"
            got = loaded.state_dict()
            assert all(torch.equal(got[k], state[k]) for k in state)
