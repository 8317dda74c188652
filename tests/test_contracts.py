"""Contracts the whole package keeps: the model registry, the public names, the typing marker.

Model registry (``tumorboard.models``): every name of ``available()`` has a complete
``ModelInfo``, builds, agrees with its metadata (name, width, input size, normalisation,
interpolation, output shape), and ``load`` reads a state dict produced by the same builder back
with strict keys, every tensor landing in its own slot. The real-size foundation models
(UNI2-h, UNI, CONCH and the zoo's encoders: every encoder with published weights) are built on
the meta device (random initialisation takes seconds each on a CPU and up to 4.5 GB); their
load round trip uses checkpoints of zero-stride tensors, which hold one number per key whatever
the shape, so the real
``load`` path (meta build, adaptation, strict key check, assignment) runs on them in kilobytes.
The small models also go through a real random round trip with equal outputs.

Public names: every package's ``__all__`` lists names that exist, once each, and lists every
public function or class its ``__init__`` defines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.resources
import importlib.util
import inspect
import warnings

import pytest

PACKAGES = (
    "tumorboard",
    "tumorboard.errors",
    "tumorboard.stats",
    "tumorboard.text",
    "tumorboard.slides",
    "tumorboard.seqmask",
    "tumorboard.models",
    "tumorboard.embed",
    "tumorboard.tools",
    "tumorboard.traj",
    "tumorboard.traj.importers",
    "tumorboard.score",
    "tumorboard.harness",
    "tumorboard.dist",
    "tumorboard.kernels",
)


def _missing_dependency(exc: BaseException) -> str | None:
    """Name the uninstalled third-party module behind an ImportError or its cause, if any."""
    while exc is not None:
        name = getattr(exc, "name", None)
        if name and not name.startswith("tumorboard"):
            top = name.split(".")[0]
            return top if importlib.util.find_spec(top) is None else None
        exc = exc.__cause__
    return None


def _resolve(call, what: str):
    """Run ``call``; skip only when an optional dependency is not installed."""
    try:
        return call()
    except ImportError as exc:
        missing = _missing_dependency(exc)
        if missing is None:
            raise
        pytest.skip(f"{what} needs {missing}, which is not installed")


def _import(name: str):
    return _resolve(lambda: importlib.import_module(name), name)


# --- public names ------------------------------------------------------------------------------


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_existing_names_once(package):
    module = _import(package)
    names = module.__all__
    assert isinstance(names, (list, tuple)) and names, f"{package}.__all__ is empty"
    assert all(isinstance(n, str) for n in names)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"{package}.__all__ lists {duplicates} more than once"
    private = [n for n in names if n.startswith("_") and n != "__version__"]
    assert not private, f"{package}.__all__ lists private names {private}"
    missing = [n for n in names if not _resolve(lambda n=n: hasattr(module, n), package)]
    assert not missing, f"{package}.__all__ lists {missing}, which do not exist"
    star: dict[str, object] = {}
    _resolve(lambda: exec(f"from {package} import *", star), package)  # as users would write
    assert set(names) <= set(star)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_every_public_definition(package):
    module = _import(package)
    defined = sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    )
    unlisted = sorted(set(defined) - set(module.__all__))
    assert not unlisted, f"{package} defines public {unlisted} but its __all__ omits them"


def test_package_ships_the_typing_marker():
    # Run against the install (make test) this checks the wheel, not only the source tree.
    marker = importlib.resources.files("tumorboard").joinpath("py.typed")
    assert marker.is_file()
    assert marker.read_bytes() == b""


# --- the model registry ------------------------------------------------------------------------

try:
    import torch
except ModuleNotFoundError:  # the registry tests below are collected with no parameters
    torch = None
else:
    from tumorboard import models
    from tumorboard.errors import InvalidArgumentError
    from tumorboard.models._device import resolve_dtype
    from tumorboard.models._info import RANDOM_WEIGHTS_SOURCE as RANDOM_SOURCE
    from tumorboard.models.weights import CheckpointKeyError, save_state_dict

needs_torch = pytest.mark.skipif(torch is None, reason="the models need torch ([embed] extra)")
NAMES = models.available() if torch is not None else ()
#: Options a model cannot build without (its ``embed_dim`` is decided by them).
REQUIRED_OPTIONS = {"abmil": {"in_dim": 24}}
#: Built on the meta device only: real-size random initialisation is too slow for a unit test.
#: These are the encoders with published weights (UNI2-h, UNI, CONCH and the encoder zoo).
META_ONLY = (
    {
        n
        for n in NAMES
        if models.info(n).kind == "encoder" and models.info(n).weights_source != RANDOM_SOURCE
    }
    if torch is not None
    else set()
)
#: Models with a full image-text variant (``load_conch``).
ZERO_SHOT = {"conch", "conch-tiny"} if torch is not None else set()
KINDS = {"encoder", "slide_encoder", "regressor"}


def _device(name: str):
    return torch.device("meta") if name in META_ONLY else contextlib.nullcontext()


def _quiet_load(loader, name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        return loader(name, device="cpu", **kw)


def _input(info, options):
    """Make a small valid input batch for a model of this kind."""
    g = torch.Generator().manual_seed(0)
    if info.kind == "encoder":
        return torch.randn(2, 3, info.image_size, info.image_size, generator=g)
    width = options.get("in_dim", 1536)
    return torch.randn(2, 5, width, generator=g)


def _constant_per_key(module) -> dict:
    """Make a checkpoint whose key number ``i`` holds ``i`` in every element.

    The tensors have the module's keys and shapes but are zero-stride views of one-element
    tensors: a few bytes per key on disk, whatever the model's size.
    """
    return {
        key: torch.full((), float(i), dtype=value.dtype).expand(value.shape)
        for i, (key, value) in enumerate(module.state_dict().items())
    }


@needs_torch
def test_registry_names_are_unique_and_resolve():
    assert NAMES and len(set(NAMES)) == len(NAMES)
    spellings: dict[str, str] = {}
    for name in NAMES:
        info = models.info(name)
        assert info.name == name
        for spelling in (name, name.upper(), name.replace("-", "_")):
            assert models.info(spelling) is info
        if info.trident_name is not None:
            assert models.info(info.trident_name) is info
        for spelling in {name, info.trident_name} - {None}:
            key = spelling.lower().replace("_", "-")
            assert spellings.setdefault(key, name) == name, f"{spelling!r} names two models"
    with pytest.raises(InvalidArgumentError, match="unknown model 'resnet-999'"):
        models.info("resnet-999")


@pytest.mark.parametrize("name", NAMES)
def test_metadata_is_complete(name):
    info = models.info(name)
    checked = {
        "name",
        "kind",
        "embed_dim",
        "image_size",
        "mean",
        "std",
        "interpolation",
        "gpu_dtype",
        "trident_name",
        "weights_source",
        "license",
        "gated",
        "magnification",
        "patch_size",
        "pooling",
    }
    # A new ModelInfo field must be added to this contract.
    assert {f.name for f in dataclasses.fields(models.ModelInfo)} == checked
    assert info.kind in KINDS
    assert isinstance(info.gpu_dtype, torch.dtype) and info.gpu_dtype.is_floating_point
    assert isinstance(info.weights_source, str) and info.weights_source.strip()
    assert info.trident_name is None or info.trident_name.strip()
    if info.kind == "encoder":
        assert isinstance(info.embed_dim, int) and info.embed_dim > 0
        assert isinstance(info.image_size, int) and info.image_size > 0
        for stats in (info.mean, info.std):
            assert isinstance(stats, tuple) and len(stats) == 3
            assert all(isinstance(v, float) and 0.0 < v < 1.0 for v in stats)
        assert info.interpolation in ("bilinear", "bicubic")
    else:
        assert (info.image_size, info.mean, info.std, info.interpolation) == (None,) * 4
        assert info.embed_dim is None or info.embed_dim > 0
    assert (info.embed_dim is None) == (name in REQUIRED_OPTIONS)
    # dtype="auto" means the row's dtype on CUDA and float32 elsewhere (no GPU needed to check).
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert resolve_dtype("auto", device=cuda, gpu_dtype=info.gpu_dtype) == info.gpu_dtype
    assert resolve_dtype("auto", device=cpu, gpu_dtype=info.gpu_dtype) == torch.float32


@pytest.mark.parametrize("name", NAMES)
def test_builds_and_agrees_with_its_metadata(name):
    info = models.info(name)
    options = REQUIRED_OPTIONS.get(name, {})
    with _device(name):
        module = models.build(name, **options)
        x = _input(info, options)
        with torch.no_grad():
            y = module(x)
    assert isinstance(module, torch.nn.Module) and module.training
    params = list(module.parameters())
    assert params and all(p.is_meta == (name in META_ONLY) for p in params)
    width = info.embed_dim if info.embed_dim is not None else options["in_dim"]
    if info.kind == "encoder":
        assert module.name == name
        assert (module.embed_dim, module.image_size) == (info.embed_dim, info.image_size)
        assert (tuple(module.mean), tuple(module.std)) == (info.mean, info.std)
        assert module.interpolation == info.interpolation
    if info.kind == "slide_encoder":
        assert module.embed_dim == width
    want = (2,) if info.kind == "regressor" else (2, width)  # the regressor squeezes its 1 output
    assert tuple(y.shape) == want
    if name not in META_ONLY:
        assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", NAMES)
def test_loads_its_own_state_dict_strictly(name, tmp_path):
    options = REQUIRED_OPTIONS.get(name, {})
    with torch.device("meta"):
        reference = models.build(name, **options)
    state = _constant_per_key(reference)
    path = tmp_path / f"{name}.pt"
    torch.save(state, path)  # not save_state_dict, which would materialise the views
    assert path.stat().st_size < 1_000_000

    loaded = models.load(name, weights=path, device="cpu", dtype="fp32", **options)
    got = loaded.state_dict()
    assert list(got) == list(state)
    for i, (key, value) in enumerate(got.items()):
        assert not value.is_meta and value.shape == state[key].shape, key
        assert value.reshape(-1)[0].item() == float(i), f"{key} did not land in its own slot"
    assert not loaded.training

    first = next(iter(state))
    torch.save({k: v for k, v in state.items() if k != first}, path)
    with pytest.raises(CheckpointKeyError, match="1 missing") as missing:
        models.load(name, weights=path, device="cpu", **options)
    assert set(missing.value.missing) == {first} and not missing.value.unexpected
    torch.save({**state, "extra.weight": torch.zeros(1)}, path)
    with pytest.raises(CheckpointKeyError, match="1 unexpected") as unexpected:
        models.load(name, weights=path, device="cpu", **options)
    assert set(unexpected.value.unexpected) == {"extra.weight"} and not unexpected.value.missing


@pytest.mark.parametrize("name", sorted(set(NAMES) - META_ONLY))
def test_random_weights_round_trip(name, tmp_path):
    info = models.info(name)
    options = REQUIRED_OPTIONS.get(name, {})
    source = _quiet_load(models.load, name, seed=11, **options)
    path = save_state_dict(source, tmp_path / f"{name}.safetensors")
    loaded = models.load(name, weights=path, device="cpu", **options)
    for (ka, va), (kb, vb) in zip(
        source.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), ka
    x = _input(info, options)
    with torch.no_grad():  # equal parameters; the kernels may still round differently
        torch.testing.assert_close(loaded(x), source(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(ZERO_SHOT))
def test_zero_shot_model_loads_its_own_state_dict(name, tmp_path):
    with torch.device("meta"):
        reference = models.CONCH(models.build(name).config)  # the registry's configuration
    state = _constant_per_key(reference)
    path = tmp_path / f"{name}-full.pt"
    torch.save(state, path)
    model = models.load_conch(name, weights=path, device="cpu")
    assert isinstance(model, models.CONCH) and model.name == name
    for i, (key, value) in enumerate(model.state_dict().items()):
        assert value.reshape(-1)[0].item() == float(i), key
    assert model.embed_dim == models.info(name).embed_dim


@pytest.mark.parametrize("name", sorted(set(NAMES) - ZERO_SHOT))
def test_only_conch_models_have_a_zero_shot_variant(name):
    with pytest.raises(InvalidArgumentError, match="load_conch takes one of 'conch', 'conch-tiny'"):
        models.load_conch(name)


def test_tabular_results_have_to_polars(tmp_path):
    """PatchGrid, EmbedReport and ImportReport are tables too (`.to_polars()`)."""
    import polars as pl
    from tumorboard.embed import EmbedReport, SlideResult
    from tumorboard.traj.importers import ImportReport

    rep = ImportReport(format="jsonl", source="logs", store="s", imported=("a.jsonl",),
                       skipped=(("b.txt", "not a log"),),
                       rejected=(("a.jsonl:3", "no model"),))  # fmt: skip
    t = rep.to_polars()
    assert t.columns == ["status", "where", "reason"]
    assert t.rows() == [("imported", "a.jsonl", None), ("skipped", "b.txt", "not a log"),
                        ("rejected", "a.jsonl:3", "no model")]  # fmt: skip
    res = (SlideResult("a.tif", "a", "done", n_patches=4), SlideResult("b.tif", "b", "failed"))
    er = EmbedReport(results=res, encoder="e", weights_fingerprint="w", job_dir=tmp_path,
                     features_dir=tmp_path, parquet_dir=tmp_path, coords_dir=tmp_path,
                     n_patches=4, seconds=1.0)  # fmt: skip
    et = er.to_polars()
    assert isinstance(et, pl.DataFrame) and et.get_column("status").to_list() == ["done", "failed"]
    assert et.get_column("n_patches").to_list() == [4, 0]
    pytest.importorskip("tifffile")
    from test_slides_readers import write_test_slide
    from tumorboard import slides

    write_test_slide(tmp_path / "a.tif")
    with slides.open(tmp_path / "a.tif") as s:
        grid = slides.patch_grid(s, None, magnification=20, patch_size=256)
    gt = grid.to_polars()
    assert gt.columns == ["x", "y", "tissue_fraction"] and gt.height == len(grid)
    assert gt.get_column("x").to_list() == grid.coords[:, 0].tolist()
