"""Hugging Face layout ViTs (tumorboard.models.hf_vit) against ``transformers`` as the oracle.

For tiny configurations of every block type (``ViTModel``; ``Dinov2Model`` with a GELU and with a
SwiGLU MLP; ``Dinov2WithRegistersModel`` with both) a random tumorboard state dict is written as a
Hugging Face model folder (``config.json`` + ``model.safetensors``) and loaded by
``transformers``' own ``from_pretrained``, which must report no missing, unexpected or mis-shaped
key (transformers 5 converts the checkpoint-layout names to its module names itself). Both models
then embed the same images, at the native size and at another one (position-embedding
interpolation), and agree within 1e-5; the pooled embedding is computed from transformers'
``last_hidden_state`` by hand. The registered full-size models are compared on the meta device
with the transformers model built from the same configuration (key names after mapping to the
checkpoint layout, shapes, parameter count).
"""

from __future__ import annotations

import json
import re
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from tumorboard import models  # noqa: E402
from tumorboard.errors import InvalidArgumentError  # noqa: E402
from tumorboard.models.hf_vit import HFVisionTransformer, HFViTConfig  # noqa: E402
from tumorboard.models.weights import CheckpointKeyError, save_state_dict  # noqa: E402

# --- the transformers side ------------------------------------------------------------------


def hf_config(c: HFViTConfig):
    """Return the transformers configuration equivalent to a tumorboard one."""
    common = dict(
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        image_size=c.image_size,
        patch_size=c.patch_size,
        layer_norm_eps=c.layer_norm_eps,
        hidden_act="gelu",
        qkv_bias=True,
    )
    if c.family == "vit":
        return transformers.ViTConfig(intermediate_size=c.mlp_hidden, **common)
    mlp_ratio = c.mlp_hidden // c.hidden_size
    if c.num_register_tokens:
        return transformers.Dinov2WithRegistersConfig(
            mlp_ratio=mlp_ratio,
            use_swiglu_ffn=c.use_swiglu_ffn,
            num_register_tokens=c.num_register_tokens,
            **common,
        )
    return transformers.Dinov2Config(
        mlp_ratio=mlp_ratio,
        use_swiglu_ffn=c.use_swiglu_ffn,
        use_mask_token=c.use_mask_token,
        **common,
    )


def hf_model_class(c: HFViTConfig):
    if c.family == "vit":
        return transformers.ViTModel
    return (
        transformers.Dinov2WithRegistersModel if c.num_register_tokens else transformers.Dinov2Model
    )


def hf_kwargs(c: HFViTConfig) -> dict:
    return {"add_pooling_layer": False} if c.family == "vit" else {}


#: transformers 5 module names -> checkpoint (transformers 4.x) names: the inverse of the
#: renamings of ``transformers/conversion_mapping.py`` (entries ViTModel, Dinov2Model,
#: Dinov2WithRegistersModel). SwiGLU ``gate_proj``/``up_proj`` are handled in checkpoint_shapes.
VIT_BACK = [
    (r"^layers\.", "encoder.layer."),
    (r"\.attention\.q_proj\.", ".attention.attention.query."),
    (r"\.attention\.k_proj\.", ".attention.attention.key."),
    (r"\.attention\.v_proj\.", ".attention.attention.value."),
    (r"\.attention\.o_proj\.", ".attention.output.dense."),
    (r"\.mlp\.fc1\.", ".intermediate.dense."),
    (r"\.mlp\.fc2\.", ".output.dense."),
]
DINOV2_BACK = [
    (r"\.attention\.q_proj\.", ".attention.attention.query."),
    (r"\.attention\.k_proj\.", ".attention.attention.key."),
    (r"\.attention\.v_proj\.", ".attention.attention.value."),
    (r"\.attention\.o_proj\.", ".attention.output.dense."),
    (r"\.mlp\.down_proj\.", ".mlp.weights_out."),
]


def checkpoint_shapes(hf_model, family: str) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a transformers model, with its keys in the checkpoint layout."""
    rules = VIT_BACK if family == "vit" else DINOV2_BACK
    out: dict[str, tuple[int, ...]] = {}
    for key, value in hf_model.state_dict().items():
        shape = tuple(value.shape)
        swiglu = re.search(r"\.mlp\.(gate_proj|up_proj)\.(weight|bias)$", key)
        if swiglu:  # the two halves of weights_in, stacked along the rows
            key = key[: swiglu.start()] + f".mlp.weights_in.{swiglu.group(2)}"
            if key in out:
                shape = (out[key][0] + shape[0], *shape[1:])
        else:
            for pattern, repl in rules:
                key = re.sub(pattern, repl, key)
        out[key] = shape
    return out


def shapes(module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


# --- tiny configurations: numerical equivalence -------------------------------------------

TINY = {
    "vit": HFViTConfig(family="vit", image_size=32, patch_size=8, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=4, mlp_hidden=64,
                       layer_norm_eps=1e-6, use_mask_token=False),
    "dinov2": HFViTConfig(family="dinov2", image_size=28, patch_size=7, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, mlp_hidden=128,
                          layer_norm_eps=1e-6),
    "dinov2-swiglu-cls+mean": HFViTConfig(family="dinov2", image_size=28, patch_size=7,
                                          hidden_size=48, num_hidden_layers=2,
                                          num_attention_heads=4, mlp_hidden=192,
                                          layer_norm_eps=1e-6, use_swiglu_ffn=True,
                                          pooling="cls+mean"),
    "dinov2-registers": HFViTConfig(family="dinov2", image_size=28, patch_size=7, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4, mlp_hidden=128,
                                    layer_norm_eps=1e-6, num_register_tokens=4),
    "dinov2-registers-swiglu-cls+mean": HFViTConfig(family="dinov2", image_size=28, patch_size=7,
                                                    hidden_size=48, num_hidden_layers=2,
                                                    num_attention_heads=4, mlp_hidden=192,
                                                    layer_norm_eps=1e-6, use_swiglu_ffn=True,
                                                    num_register_tokens=2, pooling="cls+mean"),
}  # fmt: skip


def randomized(config: HFViTConfig, seed: int = 0) -> HFVisionTransformer:
    """Build a tiny model with every tensor random (LayerScale, biases and tokens included)."""
    torch.manual_seed(seed)
    m = HFVisionTransformer(config).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return m


def reference_pool(hidden: torch.Tensor, config: HFViTConfig) -> torch.Tensor:
    """Compute the registry's pooled embedding from transformers' ``last_hidden_state``, by hand."""
    cls = hidden[:, 0]
    if config.pooling == "cls":
        return cls
    return torch.cat([cls, hidden[:, 1 + config.num_register_tokens :].mean(1)], dim=-1)


def load_into_transformers(module: HFVisionTransformer, tmp_path):
    """Write ``module`` as an HF folder and load it with transformers' from_pretrained."""
    c = module.config
    folder = tmp_path / "hf"
    folder.mkdir()
    hf_config(c).save_pretrained(folder)
    state = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
    safetensors_torch.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf, info = hf_model_class(c).from_pretrained(
            folder, output_loading_info=True, attn_implementation="eager", **hf_kwargs(c)
        )
    return hf.float().eval(), info


@pytest.mark.parametrize("case", sorted(TINY))
def test_tiny_model_matches_transformers(case, tmp_path):
    config = TINY[case]
    ours = randomized(config)
    hf, info = load_into_transformers(ours, tmp_path)
    # transformers accepted every key of the file and found every parameter it needs in it.
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info.get("mismatched_keys"), info
    # ... and the key sets are equal once its module names are mapped back to the file layout.
    assert checkpoint_shapes(hf, config.family) == shapes(ours)

    g = torch.Generator().manual_seed(1)
    native = config.image_size
    other = native + 2 * config.patch_size  # another grid: the position embedding is resampled
    for size in (native, other):
        x = torch.randn(2, 3, size, size, generator=g)
        with torch.no_grad():
            kwargs = {"interpolate_pos_encoding": True} if config.family == "vit" else {}
            hidden = hf(pixel_values=x, **kwargs).last_hidden_state
            want = reference_pool(hidden, config)
            got = ours(x)
            tokens = ours.forward_features(x)
        assert got.shape == (2, config.embed_dim)
        torch.testing.assert_close(tokens, hidden, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_swiglu_gate_is_the_first_half_of_weights_in():
    config = TINY["dinov2-swiglu-cls+mean"]
    mlp = randomized(config).encoder.layer[0].mlp
    x = torch.randn(3, config.hidden_size)
    w, b = mlp.weights_in.weight, mlp.weights_in.bias
    half = w.shape[0] // 2
    gate, value = x @ w[:half].T + b[:half], x @ w[half:].T + b[half:]
    want = mlp.weights_out(torch.nn.functional.silu(gate) * value)
    torch.testing.assert_close(mlp(x), want)


def test_vit_pooler_keys_are_dropped_at_load(tmp_path):
    m = randomized(TINY["vit"])
    state = dict(m.state_dict())
    state["pooler.dense.weight"] = torch.zeros(32, 32)
    state["pooler.dense.bias"] = torch.zeros(32)
    assert set(m.adapt_state_dict(state)) == set(m.state_dict())


# --- the registered full-size models, on the meta device ------------------------------------

#: name -> (config, parameter count). Phikon: ViT-B/16, 85.8 M (owkin/phikon card: ViT-B/16,
#: "86M"); Phikon-v2: ViT-L/16, 303.35 M with its mask token (owkin/phikon-v2 card: ViT-L/16).
REGISTERED = {"phikon": 85_798_656, "phikon-v2": 303_351_808}


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_full_size_keys_and_shapes_match_transformers(name):
    with torch.device("meta"):
        ours = models.build(name)
        hf = hf_model_class(ours.config)(hf_config(ours.config), **hf_kwargs(ours.config))
    assert checkpoint_shapes(hf, ours.config.family) == shapes(ours)
    assert sum(p.numel() for p in ours.parameters()) == REGISTERED[name]
    info = models.info(name)
    assert (ours.embed_dim, ours.image_size) == (info.embed_dim, info.image_size)


def test_registry_rows():
    phikon, v2 = models.info("phikon"), models.info("phikon_v2")
    assert v2.name == "phikon-v2" and models.info("PHIKON-V2") is v2
    assert (phikon.embed_dim, v2.embed_dim) == (768, 1024)
    for row in (phikon, v2):
        assert row.gpu_dtype == torch.float32 and row.interpolation == "bilinear"
        assert row.mean == (0.485, 0.456, 0.406) and row.std == (0.229, 0.224, 0.225)
        assert row.gated is False and row.image_size == 224
    with pytest.raises(InvalidArgumentError, match="unknown model"):
        models.info("phikon-v3")


# --- loading through the registry ------------------------------------------------------------


def test_load_round_trips_a_random_checkpoint(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        source = models.load("phikon", device="cpu", seed=3)
    path = save_state_dict(source, tmp_path / "phikon.safetensors")
    loaded = models.load("phikon", weights=path, device="cpu")
    for (ka, va), (kb, vb) in zip(
        source.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), ka
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), source(x))


def test_renamed_key_is_refused_readably(tmp_path):
    with torch.device("meta"):
        ref = models.build("phikon-v2")
    state = {k: torch.zeros((), dtype=v.dtype).expand(v.shape) for k, v in ref.state_dict().items()}
    old = "encoder.layer.3.attention.attention.query.weight"
    new = "encoder.layer.3.attention.q_proj.weight"  # the transformers-5 module name
    state[new] = state.pop(old)
    path = tmp_path / "renamed.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointKeyError) as err:
        models.load("phikon_v2", weights=path, device="cpu")
    assert set(err.value.missing) == {old} and set(err.value.unexpected) == {new}
    message = str(err.value)
    assert old in message and new in message and "renamed.pt" in message


def test_hf_folder_config_round_trip(tmp_path):
    # The config transformers writes for a registered model agrees with the registry row.
    with torch.device("meta"):
        m = models.build("phikon-v2")
    hf_config(m.config).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["patch_size"], cfg["image_size"]) == (1024, 16, 224)
