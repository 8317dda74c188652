"""CONCH in plain torch (tumorboard.models.conch) and its tokenizer.

Oracles: the key/shape table of the released checkpoint (mahmoodlab/CONCH
``conch/open_clip_custom/``@141cc09; full-size model on the meta device);
``torch.nn.MultiheadAttention`` for our attention (same parameter names, loaded from our state
dict); the CLS-row mask quirk written out by hand; an independent text-tower forward with an
explicitly built mask; the contrastive pooler recomputed with torch's MultiheadAttention;
the bilinear load-time grid resampling computed with F.interpolate; a tokenizer JSON built
here with the ``tokenizers`` package, whose raw encodings give the expected ids.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tumorboard import models  # noqa: E402
from tumorboard.models.conch import (  # noqa: E402
    CONCH,
    ConchTextEncoder,
    MultiheadAttention,
    text_attention_mask,
)
from tumorboard.models.weights import CheckpointKeyError, save_state_dict  # noqa: E402


def conch_table():
    """Return the expected CONCH keys and shapes (mahmoodlab/CONCH@141cc09).

    Less the unreleased decoder and the caption pooler that only feeds it.
    """
    t = {
        "logit_scale": (),
        "visual.trunk.cls_token": (1, 1, 768),
        "visual.trunk.pos_embed": (1, 785, 768),
        "visual.trunk.patch_embed.proj.weight": (768, 3, 16, 16),
        "visual.trunk.patch_embed.proj.bias": (768,),
        "visual.trunk.norm.weight": (768,),
        "visual.trunk.norm.bias": (768,),
        "visual.attn_pool_contrast.query": (1, 512),
        "visual.attn_pool_contrast.attn.q_proj_weight": (512, 512),
        "visual.attn_pool_contrast.attn.k_proj_weight": (512, 768),
        "visual.attn_pool_contrast.attn.v_proj_weight": (512, 768),
        "visual.attn_pool_contrast.attn.in_proj_bias": (1536,),
        "visual.attn_pool_contrast.attn.out_proj.weight": (512, 512),
        "visual.attn_pool_contrast.attn.out_proj.bias": (512,),
        "visual.attn_pool_contrast.ln_q.weight": (512,),
        "visual.attn_pool_contrast.ln_q.bias": (512,),
        "visual.attn_pool_contrast.ln_k.weight": (768,),
        "visual.attn_pool_contrast.ln_k.bias": (768,),
        "visual.ln_contrast.weight": (512,),
        "visual.ln_contrast.bias": (512,),
        "visual.proj_contrast": (512, 512),
        "text.token_embedding.weight": (32007, 768),
        "text.positional_embedding": (128, 768),
        "text.cls_emb": (768,),
        "text.ln_final.weight": (768,),
        "text.ln_final.bias": (768,),
        "text.text_projection": (768, 512),
    }
    for i in range(12):
        b = f"visual.trunk.blocks.{i}."
        for name, shape in {
            "norm1.weight": (768,), "norm1.bias": (768,),
            "attn.qkv.weight": (2304, 768), "attn.qkv.bias": (2304,),
            "attn.proj.weight": (768, 768), "attn.proj.bias": (768,),
            "norm2.weight": (768,), "norm2.bias": (768,),
            "mlp.fc1.weight": (3072, 768), "mlp.fc1.bias": (3072,),
            "mlp.fc2.weight": (768, 3072), "mlp.fc2.bias": (768,),
        }.items():  # fmt: skip
            t[b + name] = shape
        r = f"text.transformer.resblocks.{i}."
        for name, shape in {
            "ln_1.weight": (768,), "ln_1.bias": (768,),
            "attn.in_proj_weight": (2304, 768), "attn.in_proj_bias": (2304,),
            "attn.out_proj.weight": (768, 768), "attn.out_proj.bias": (768,),
            "ln_2.weight": (768,), "ln_2.bias": (768,),
            "mlp.c_fc.weight": (3072, 768), "mlp.c_fc.bias": (3072,),
            "mlp.c_proj.weight": (768, 3072), "mlp.c_proj.bias": (768,),
        }.items():  # fmt: skip
            t[r + name] = shape
    return t


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        return fn(*args, device="cpu", **kw)


def test_conch_keys_and_shapes_match_reference_table():
    with torch.device("meta"):
        full = CONCH(models.CONCH_B16)
        vision = models.build("conch")
    assert {k: tuple(v.shape) for k, v in full.state_dict().items()} == conch_table()
    want_visual = {k[7:]: s for k, s in conch_table().items() if k.startswith("visual.")}
    assert {k: tuple(v.shape) for k, v in vision.state_dict().items()} == want_visual
    assert (vision.embed_dim, vision.image_size) == (512, 448)
    assert vision.mean == (0.48145466, 0.4578275, 0.40821073)
    assert vision.std == (0.26862954, 0.26130258, 0.27577711)
    assert vision.interpolation == "bicubic"
    assert full.logit_scale.shape == ()


@pytest.mark.parametrize("kdim", [None, 12])
def test_attention_matches_torch_multihead_attention(kdim):
    torch.manual_seed(0)
    ours = MultiheadAttention(8, 2, kdim=kdim, vdim=kdim)
    with torch.no_grad():
        ours.in_proj_bias.normal_()
        ours.out_proj.bias.normal_()
    ref = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, batch_first=True)
    ref.load_state_dict(ours.state_dict())  # identical parameter names
    q = torch.randn(3, 5, 8)
    kv = torch.randn(3, 7, kdim or 8)
    allowed = torch.rand(3, 5, 7) > 0.3
    allowed[..., 0] = True
    additive = torch.zeros(3, 5, 7).masked_fill(~allowed, float("-inf"))
    want, _ = ref(q, kv, kv, attn_mask=additive.repeat_interleave(2, dim=0), need_weights=False)
    got = ours(q, kv, kv, attn_mask=allowed.unsqueeze(1))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_text_cls_mask_is_shifted_by_one_position():
    ids = torch.tensor([[1, 7, 9, 2, 0, 0]])  # BOS, two tokens, EOS, two pads (last id dropped)
    # rows 0-5: causal; row 6 (CLS): key 0 always, key j iff ids[j-1] != pad.
    expected = [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 0, 0],  # sees the first pad (key 4), not itself
    ]
    assert text_attention_mask(ids).int().tolist() == [expected]
    full = torch.tensor([[1, 5, 6, 7]])  # no padding: the CLS row sees everything, itself too
    assert text_attention_mask(full)[0, 4].tolist() == [True] * 5


def reference_text(enc: ConchTextEncoder, ids: torch.Tensor, *, shifted=True) -> torch.Tensor:
    """Run an independent text forward (open_clip ``TextTransformer``), mask built element-wise.

    ``shifted=False`` gives the unshifted mask (CLS sees key j iff token j is not a pad, and
    itself).
    """
    c = enc.config
    sd = {k: v.detach().double() for k, v in enc.state_dict().items()}
    ids = ids[:, :-1]
    b, n = ids.shape
    w, h = c.text_width, c.text_heads
    x = sd["token_embedding.weight"][ids]
    x = torch.cat([x, sd["cls_emb"].expand(b, 1, w)], dim=1) + sd["positional_embedding"][: n + 1]
    neg = torch.zeros(b, n + 1, n + 1, dtype=torch.double)
    for bi in range(b):
        for i in range(n + 1):
            for j in range(n + 1):
                if i < n:
                    ok = j <= i
                elif shifted:
                    ok = j == 0 or int(ids[bi, j - 1]) != c.pad_id
                else:
                    ok = j == n or int(ids[bi, j]) != c.pad_id
                if not ok:
                    neg[bi, i, j] = float("-inf")
    for li in range(c.text_layers):
        p = f"transformer.resblocks.{li}."
        y = F.layer_norm(x, (w,), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"])
        qkv = y @ sd[p + "attn.in_proj_weight"].T + sd[p + "attn.in_proj_bias"]
        q, k, v = (t.reshape(b, n + 1, h, w // h).transpose(1, 2) for t in qkv.split(w, dim=-1))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(w // h) + neg[:, None], dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, n + 1, w)
        x = x + o @ sd[p + "attn.out_proj.weight"].T + sd[p + "attn.out_proj.bias"]
        y = F.layer_norm(x, (w,), sd[p + "ln_2.weight"], sd[p + "ln_2.bias"])
        hid = F.gelu(y @ sd[p + "mlp.c_fc.weight"].T + sd[p + "mlp.c_fc.bias"])
        x = x + hid @ sd[p + "mlp.c_proj.weight"].T + sd[p + "mlp.c_proj.bias"]
    pooled = F.layer_norm(x[:, -1], (w,), sd["ln_final.weight"], sd["ln_final.bias"])
    return pooled @ sd["text_projection"]


def test_text_tower_matches_independent_reference():
    model = quiet(models.load_conch, "conch-tiny")
    g = torch.Generator().manual_seed(0)
    ids = torch.zeros(3, 128, dtype=torch.long)
    for row, n in enumerate((5, 40, 128)):
        ids[row, :n] = torch.randint(3, 30000, (n,), generator=g)
        ids[row, 0], ids[row, n - 1] = 1, 2
    with torch.no_grad():
        got = model.text(ids)
        normed = model.encode_text(ids)
    want = reference_text(model.text, ids)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(normed.norm(dim=-1), torch.ones(3))
    # The quirk matters: without the one-position shift the padded texts embed differently
    # (the full-length third text has no pads, so both masks agree there).
    plain = reference_text(model.text, ids, shifted=False)
    assert not torch.allclose(got[:2].double(), plain[:2], atol=1e-3)
    torch.testing.assert_close(got[2].double(), plain[2], atol=1e-5, rtol=1e-4)


def test_contrastive_pooler_and_embeddings():
    model = quiet(models.load_conch, "conch-tiny")
    vis = model.visual
    x = torch.randn(2, 3, 448, 448, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        tokens = vis.trunk.forward_features(x)
        assert tokens.shape == (2, 1 + 28 * 28, 32)  # all 785 tokens, CLS included
        pool = vis.attn_pool_contrast
        ref = torch.nn.MultiheadAttention(16, 2, kdim=32, vdim=32, batch_first=True)
        ref.load_state_dict(pool.attn.state_dict())
        kv = F.layer_norm(tokens, (32,), pool.ln_k.weight, pool.ln_k.bias)
        q = F.layer_norm(pool.query, (16,), pool.ln_q.weight, pool.ln_q.bias).expand(2, 1, 16)
        pooled = ref(q, kv, kv, need_weights=False)[0][:, 0]
        trident = F.layer_norm(pooled, (16,), vis.ln_contrast.weight, vis.ln_contrast.bias)
        zero_shot = F.normalize(trident @ vis.proj_contrast, dim=-1)
        torch.testing.assert_close(vis.encode_image(x), zero_shot, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(
            vis.encode_image(x, proj_contrast=False, normalize=False), trident, atol=1e-5,
            rtol=1e-4,
        )  # fmt: skip
        encoder = quiet(models.load, "conch-tiny")  # TRIDENT conch_v1 feature by default
        torch.testing.assert_close(encoder(x), trident, atol=1e-5, rtol=1e-4)
        projected = quiet(models.load, "conch-tiny", proj_contrast=True, normalize=True)
        torch.testing.assert_close(projected(x), zero_shot, atol=1e-5, rtol=1e-4)
        # zero-shot probabilities: softmax(exp(logit_scale) * img @ txt.T)
        txt = F.normalize(torch.randn(3, 16, generator=torch.Generator().manual_seed(2)), dim=-1)
        probs = model.zero_shot_probs(zero_shot, txt).numpy()
    logits = math.exp(math.log(1 / 0.07)) * zero_shot.numpy() @ txt.numpy().T
    want = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(probs, want / want.sum(1, keepdims=True), rtol=1e-5)


def test_full_checkpoint_loads_into_vision_encoder_and_resamples_grid(tmp_path):
    src = quiet(models.load_conch, "conch-tiny", seed=3)
    sd = dict(src.state_dict())
    sd["text_decoder.ln_final.weight"] = torch.ones(4)  # released file: decoder keys absent or
    sd["visual.attn_pool_caption.query"] = torch.zeros(256, 32)  # ignored when present
    path = tmp_path / "conch.safetensors"
    save_state_dict(sd, path)
    x = torch.randn(1, 3, 448, 448, generator=torch.Generator().manual_seed(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", models.RandomWeightsWarning)
        enc = models.load("conch-tiny", weights=path, device="cpu")
        full = models.load_conch("conch-tiny", weights=path, device="cpu")
        big = models.load("conch-tiny", weights=path, device="cpu", image_size=512)
    with torch.no_grad():
        want = src.visual.encode_image(x, proj_contrast=False, normalize=False)
        torch.testing.assert_close(enc(x), want)
        torch.testing.assert_close(full.encode_image(x), src.encode_image(x))
    assert float(full.logit_scale.detach()) == pytest.approx(float(src.logit_scale.detach()))
    # force_image_size: grid 28x28 -> 32x32, bilinear without antialias, CLS row kept.
    pos = src.visual.trunk.pos_embed.detach()
    grid = pos[:, 1:].reshape(1, 28, 28, 32).permute(0, 3, 1, 2)
    want_grid = F.interpolate(grid, size=(32, 32), mode="bilinear", align_corners=False)
    got = big.trunk.pos_embed.detach()
    assert big.image_size == 512 and got.shape == (1, 1 + 32 * 32, 32)
    torch.testing.assert_close(got[:, :1], pos[:, :1])
    torch.testing.assert_close(got[:, 1:], want_grid.permute(0, 2, 3, 1).reshape(1, 1024, 32))
    del sd["visual.ln_contrast.bias"]
    save_state_dict(sd, tmp_path / "broken.pt")
    with pytest.raises(CheckpointKeyError, match="missing from the checkpoint"):
        models.load("conch-tiny", weights=tmp_path / "broken.pt", device="cpu")


# --- tokenizer -------------------------------------------------------------------------------

SPECIALS = ["<pad>", "<start_of_text>", "<end_of_text>", "<|person|>", "<|mrn|>",
            "<|specimen_id|>", "<|date|>"]  # fmt: skip
CORPUS = [
    "an h&e image of invasive ductal carcinoma",
    "an h&e image of normal breast tissue",
    "squamous cell carcinoma with keratin pearls",
    "lymphocytes infiltrating the tumor stroma",
    "mitotic figures and necrosis",
] * 20


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    tk = pytest.importorskip("tokenizers")
    from tokenizers import decoders, normalizers, pre_tokenizers, processors, trainers

    tok = tk.Tokenizer(tk.models.BPE())
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()]
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    # HF-style template: BOS $A EOS. The CONCH rules must not add them twice.
    tok.post_processor = processors.TemplateProcessing(
        single="<start_of_text> $A <end_of_text>",
        special_tokens=[("<start_of_text>", 1), ("<end_of_text>", 2)],
    )
    path = tmp_path_factory.mktemp("tok") / "conch_tokenizer.json"
    tok.save(str(path))
    return path, tok


def test_tokenizer_encoding_rules(tokenizer_json):
    path, raw = tokenizer_json
    tok = models.ConchTokenizer(path)
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    texts = ["An H&E image of Carcinoma", "mitotic figures"]
    ids = tok(texts)
    assert ids.dtype == np.int64 and ids.shape == (2, 128)
    for row, text in enumerate(texts):
        body = raw.encode(text, add_special_tokens=False).ids
        want = [1, *body, 2] + [0] * (127 - len(body) - 2) + [0]
        assert ids[row].tolist() == want
    # the JSON's normaliser (NFD + strip accents + lowercase) is applied
    assert tok("CAFÉ carcinoma").tolist() == tok("cafe carcinoma").tolist()
    # special tokens inside the text keep their ids
    assert 3 in tok("seen by <|person|> today")[0].tolist()
    # truncation keeps BOS and EOS: 125 text ids + 2 markers = 127, then the extra pad
    long = tok(" ".join(["carcinoma"] * 300))[0]
    body = raw.encode(" ".join(["carcinoma"] * 300), add_special_tokens=False).ids
    assert long.tolist() == [1, *body[:125], 2, 0]
    assert tok("").tolist() == [[1, 2] + [0] * 126]
    assert tok([]).shape == (0, 128)
    with pytest.raises(TypeError, match=r"texts\[1\]: expected a str"):
        tok(["ok", 3])
    # through the model: prompts -> normalised 16-d embeddings (conch-tiny)
    model = quiet(models.load_conch, "conch-tiny", tokenizer=path)
    with torch.no_grad():
        emb = model.encode_prompts(texts)
        torch.testing.assert_close(emb, model.encode_text(torch.from_numpy(ids)))
        cls = model.class_embeddings([["carcinoma", "an h&e image of carcinoma"], ["stroma"]])
    assert emb.shape == (2, 16)
    torch.testing.assert_close(cls.norm(dim=-1), torch.ones(2))


def test_tokenizer_rejects_foreign_json(tmp_path):
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    path = tmp_path / "other.json"
    tok.save(str(path))
    with pytest.raises(ValueError, match="no '<pad>' token"):
        models.ConchTokenizer(path)
