"""Tests of the LAMMI segment adapter (python/tumorboard/models/adapter.py).

Tiny randomly initialized LLaMA and Qwen2 models built from configs (nothing downloaded). The
oracle for the adapted forward is a manual computation written here: forward hooks on an
untouched copy of the base model that multiply each MLP output by ``1 + γ[seg]`` with ``seg``
worked out by hand from where the markers were placed in the input.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from tumorboard.models.adapter import SegmentAdapter, segment_scale_torch  # noqa: E402

# Marker token ids in the tiny vocabulary: "Thought:" = 5 6, "Action:" = 7 6,
# "Action Input:" = 7 8 6, "Observation:" = 9 6.
MARKERS = {"thought": [5, 6], "action": [7, 6], "action_input": [7, 8, 6], "observation": [9, 6]}
#        0   1   2  3  4   5   6  7  8  9 10 11 12 13 14 15 16 17 18 19
IDS = [1, 20, 21, 5, 6, 22, 23, 7, 6, 24, 7, 8, 6, 25, 26, 9, 6, 27, 5, 6]
# seg by hand: thought after pos 4 (5, 6), action (9), action input (13, 14), observation
# closes, thought opens at 18-19 with nothing after it.
SEG = [0, 0, 0, 0, 0, 1, 1, 0, 0, 2, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0]


def _model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    common = dict(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    else:
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    return model.eval()


def _ids(batch: int = 2) -> torch.Tensor:
    return torch.tensor([IDS] * batch)


def _logits(model: torch.nn.Module, ids: torch.Tensor, **kw) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, **kw).logits


def _randomize(adapter: SegmentAdapter) -> None:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for gamma in adapter.gammas:
            gamma.copy_(torch.randn(gamma.shape, generator=g) * 0.5)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_identical_at_init_and_only_gamma_trainable(kind: str) -> None:
    model = _model(kind)
    ids = _ids()
    base = _logits(model, ids)
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    assert torch.equal(_logits(model, ids), base)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert [n for n, _ in trainable] == [f"model.layers.{i}.mlp.segment_gamma" for i in range(2)]
    assert sum(p.numel() for _, p in trainable) == 3 * 2 * 32
    assert sum(p.numel() for p in adapter.parameters()) == 3 * 2 * 32
    assert adapter.segment_ids(ids).tolist() == [SEG, SEG]

    model(input_ids=ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        if name.endswith("segment_gamma"):
            assert p.grad is not None and p.grad.abs().sum() > 0
        else:
            assert p.grad is None, name


def test_gamma_grad_zero_for_absent_segment() -> None:
    model = _model("llama")
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    ids = torch.tensor([IDS[:9]])  # thought and action markers only: no action-input tokens
    model(input_ids=ids, labels=ids).loss.backward()
    for g in adapter.gammas:
        assert g.grad[0].abs().sum() > 0  # thought tokens at 5, 6
        assert torch.equal(g.grad[1], torch.zeros(32))  # action opens at 9: beyond the input
        assert torch.equal(g.grad[2], torch.zeros(32))


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_nonzero_gamma_matches_manual_computation(kind: str) -> None:
    model = _model(kind)
    reference = copy.deepcopy(model)
    ids = _ids()
    base = _logits(model, ids)
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    _randomize(adapter)

    # Raw down_proj outputs and the MLP outputs the adapter produced.
    raw, scaled = {}, {}
    handles = []
    for i, layer in enumerate(model.model.layers):
        handles.append(
            layer.mlp.down_proj.register_forward_hook(
                lambda m, a, o, i=i: raw.__setitem__(i, o.detach().clone())
            )
        )
        handles.append(
            layer.mlp.register_forward_hook(
                lambda m, a, o, i=i: scaled.__setitem__(i, o.detach().clone())
            )
        )
    got = _logits(model, ids)
    for h in handles:
        h.remove()

    seg = torch.tensor([SEG, SEG])
    marked = seg != 0
    for i, gamma in enumerate(adapter.gammas):
        g = gamma.detach()
        expected = raw[i].clone()
        for k in (1, 2, 3):
            expected[seg == k] = raw[i][seg == k] * (1 + g[k - 1])
        torch.testing.assert_close(scaled[i], expected, rtol=1e-6, atol=1e-6)
        assert torch.equal(scaled[i][~marked], raw[i][~marked])
        assert not torch.allclose(scaled[i][marked], raw[i][marked])

    # End to end against the hand-built oracle on an untouched copy.
    gammas = [g.detach().clone() for g in adapter.gammas]

    def manual(i: int):
        def hook(module, args, out):
            scale = torch.ones(out.shape)
            for k in (1, 2, 3):
                scale[seg == k] = 1 + gammas[i][k - 1]
            return out * scale

        return hook

    for i, layer in enumerate(reference.model.layers):
        layer.mlp.register_forward_hook(manual(i))
    torch.testing.assert_close(got, _logits(reference, ids), rtol=1e-5, atol=1e-5)
    # Causal attention: logits before the first marked token (position 5) are unchanged.
    assert torch.equal(got[:, :5], base[:, :5])
    assert not torch.allclose(got[:, 5:], base[:, 5:])


def test_padding_and_explicit_segment_ids() -> None:
    model = _model("llama")
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    _randomize(adapter)
    ids = torch.tensor([[0, 0] + IDS])
    mask = torch.tensor([[0, 0] + [1] * len(IDS)])
    assert adapter.segment_ids(ids, mask).tolist() == [[0, 0] + SEG]
    with adapter.use_segment_ids(torch.zeros(1, len(IDS), dtype=torch.int8)):
        plain = _logits(model, _ids(1))
    adapter.detach()
    assert torch.equal(plain, _logits(model, _ids(1)))


def test_save_load_round_trip(tmp_path) -> None:
    model = _model("qwen2")
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    _randomize(adapter)
    ids = _ids()
    want = _logits(model, ids)
    path = tmp_path / "adapter.safetensors"
    adapter.save(path)

    other = _model("qwen2")
    loaded = SegmentAdapter.attach(other, markers=MARKERS).load(path)
    for a, b in zip(adapter.gammas, loaded.gammas, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(_logits(other, ids), want)

    small = SegmentAdapter.attach(_model_with_layers(1), markers=MARKERS)
    with pytest.raises(ValueError, match="unexpected"):
        small.load(path)


def _model_with_layers(n: int) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=n,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def test_detach_restores_model() -> None:
    model = _model("llama")
    model.lm_head.requires_grad_(False)
    keys = list(model.state_dict())
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    ids = _ids()
    base = _logits(model, ids)
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    _randomize(adapter)
    assert not torch.equal(_logits(model, ids), base)
    assert adapter.detach() is model
    assert list(model.state_dict()) == keys
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert torch.equal(_logits(model, ids), base)
    with pytest.raises(RuntimeError, match="not attached"):
        adapter.detach()
    # Attaching twice is refused; after detach it is allowed again.
    again = SegmentAdapter.attach(model, markers=MARKERS)
    with pytest.raises(RuntimeError, match="already carries"):
        SegmentAdapter.attach(model, markers=MARKERS)
    again.detach()


def test_markers_from_tokenizer_and_argument_errors() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r" ?\w+|[^\w\s]"), behavior="isolated"
    )
    vocab = ["[UNK]", "Thought", ":", "Action", " Input", "Observation", " Thought", " Action"]
    tok.model = tokenizers.models.WordLevel({w: i for i, w in enumerate(vocab)}, "[UNK]")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok)
    model = _model("llama")
    adapter = SegmentAdapter.attach(model, tokenizer=fast)
    assert adapter.markers["thought"] == ((1, 2), (6, 2))
    assert adapter.markers["action_input"] == ((3, 4, 2), (7, 4, 2))
    ids = torch.tensor([fast("Thought: x Action Input: y")["input_ids"]])
    assert adapter.segment_ids(ids).tolist() == [[0, 0, 1, 0, 0, 0, 3]]
    adapter.detach()

    with pytest.raises(ValueError, match="markers .token ids. or a tokenizer"):
        SegmentAdapter.attach(model)
    with pytest.raises(TypeError, match="need tokenizer"):
        SegmentAdapter.attach(model, markers={"thought": "Thought:"})
    with pytest.raises(TypeError, match="down_proj"):
        SegmentAdapter.attach(torch.nn.Linear(2, 2), markers=MARKERS)


def test_segment_scale_torch_hand_example() -> None:
    h = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    gamma = torch.tensor([[1.0, 0.0], [0.5, 0.5], [-1.0, 2.0]])
    out = segment_scale_torch(h, torch.tensor([0, 1, 3], dtype=torch.int8), gamma)
    assert out.tolist() == [[1.0, 2.0], [6.0, 4.0], [0.0, 18.0]]


def test_adapter_dispatch_on_kernel_device(kernel_device, monkeypatch) -> None:
    """Check that on CUDA the adapter scales through the Triton kernel.

    Logits and gamma gradients match the plain-torch run on the CPU (elsewhere both runs take
    the torch path).
    """
    from tumorboard.kernels import segment_scale as kernels_segment_scale

    calls = []
    real = kernels_segment_scale.segment_scale

    def spy(*a, **kw):
        calls.append(a[0].device.type)
        return real(*a, **kw)

    monkeypatch.setattr(kernels_segment_scale, "segment_scale", spy)
    model = _model("llama")
    adapter = SegmentAdapter.attach(model, markers=MARKERS)
    _randomize(adapter)
    ids = _ids()
    want = _logits(model, ids)
    model(input_ids=ids, labels=ids).loss.backward()
    want_grads = [g.grad.clone() for g in adapter.gammas]
    model.zero_grad()
    model.to(kernel_device)
    got = _logits(model, ids.to(kernel_device)).cpu()
    model(input_ids=ids.to(kernel_device), labels=ids.to(kernel_device)).loss.backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for g, w in zip(adapter.gammas, want_grads, strict=True):
        torch.testing.assert_close(g.grad.cpu(), w, rtol=1e-3, atol=1e-5)
    assert all(d == "cuda" for d in calls) and (len(calls) > 0) == (kernel_device == "cuda")
