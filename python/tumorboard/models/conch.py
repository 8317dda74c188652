"""CONCH (Lu et al., *Nature Medicine* 2024): a CoCa-style vision-language model for pathology.

In plain torch with the official state-dict keys (mahmoodlab/CONCH ``conch/open_clip_custom/``
``coca_model.py``, ``vision_tower.py``, ``transformer.py``@141cc09). The released configuration
:data:`CONCH_B16`, the test-sized :data:`CONCH_TINY` and their builders are at the end of this
module.

Vision tower (:class:`ConchVisionEncoder`, keys under ``visual.`` in the full model):
``trunk`` = ViT-B/16 at 448 px (timm keys, CLS token, no LayerScale) returning all 785 tokens
after its final norm; ``attn_pool_contrast`` = one learned query (``ln_q``) attending with 8
heads over all tokens including the ViT CLS (``ln_k`` on the tokens,
``nn.MultiheadAttention``-compatible keys with ``kdim = vdim = 768``); ``ln_contrast``; then
optionally ``@ proj_contrast`` (no bias) and L2 normalisation.

Text tower (:class:`ConchTextEncoder`, keys under ``text.``): open_clip ``TextTransformer``
with ``embed_cls``: the last of the 128 input ids is dropped, a learned ``cls_emb`` is appended
at position 127, ``positional_embedding`` is added, 12 pre-LN residual blocks run with a causal
mask plus open_clip's CLS-row padding mask (:func:`text_attention_mask`, which is shifted by one
position), and ``ln_final(x[:, -1]) @ text_projection`` is the 512-d text embedding.

The full model (:class:`CONCH`) adds ``logit_scale``. The captioning decoder (``text_decoder.*``)
was removed from the public checkpoint and is not built; the caption attentional pooler
(``visual.attn_pool_caption.*``, ``visual.ln_caption.*``) feeds only that decoder and is not
built either: these keys are ignored when a checkpoint has them (:data:`IGNORED_PREFIXES`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._constants import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from ..errors import InvalidArgumentError, InvalidTypeError
from .vit import TrunkPreprocessing, VisionTransformer, ViTConfig, fit_checkpoint_pos_embed

__all__ = [
    "CONCH",
    "CONCH_B16",
    "CONCH_TINY",
    "IGNORED_PREFIXES",
    "OPENAI_CLIP_MEAN",
    "OPENAI_CLIP_STD",
    "AttentionalPooler",
    "ConchConfig",
    "ConchTextEncoder",
    "ConchVisionEncoder",
    "MultiheadAttention",
    "conch_b16",
    "conch_b16_vision",
    "conch_tiny",
    "conch_tiny_vision",
    "text_attention_mask",
]

#: Checkpoint key prefixes of the full CONCH model that are not built here (see module docs).
IGNORED_PREFIXES = ("text_decoder.", "visual.attn_pool_caption.", "visual.ln_caption.")


@dataclass(frozen=True)
class ConchConfig:
    """Hyperparameters of CONCH (defaults: the released ``conch_ViT-B-16`` model).

    Attributes
    ----------
    vision : ViTConfig
        The ViT trunk (ViT-B/16 at 448 px).
    embed_dim : int, default 512
        Contrastive embedding width (attentional pooler query, ``proj_contrast``).
    pooler_heads : int, default 8
        Heads of the contrastive attentional pooler.
    context_length : int, default 128
        Token ids per text (the last one is dropped for the CLS embedding).
    vocab_size, text_width, text_heads, text_layers, text_mlp_ratio : int
        Text transformer (defaults 32007, 768, 12, 12, 4).
    pad_id : int, default 0
        The ``<pad>`` id used by the CLS attention mask.
    """

    vision: ViTConfig = ViTConfig(
        image_size=448, patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_hidden=3072
    )
    embed_dim: int = 512
    pooler_heads: int = 8
    context_length: int = 128
    vocab_size: int = 32007
    text_width: int = 768
    text_heads: int = 12
    text_layers: int = 12
    text_mlp_ratio: int = 4
    pad_id: int = 0

    def with_image_size(self, image_size: int) -> ConchConfig:
        """Return the same model built for another input size (CONCH ``force_image_size``)."""
        return replace(self, vision=replace(self.vision, image_size=int(image_size)))


class MultiheadAttention(nn.Module):
    """Batch-first multi-head attention with ``torch.nn.MultiheadAttention``'s names and math.

    Packed ``in_proj_weight [3E, E]`` when key/value widths equal ``E``, otherwise separate
    ``q_proj_weight [E, E]``, ``k_proj_weight [E, kdim]``, ``v_proj_weight [E, vdim]``;
    ``in_proj_bias [3E]``; ``out_proj``. Scores are scaled by ``1/sqrt(E/heads)``.

    Parameters
    ----------
    embed_dim : int
        Query and output width ``E``.
    num_heads : int
        Attention heads; must divide ``embed_dim``.
    kdim, vdim : int or None, default None
        Key and value widths (default ``E``).
    """

    def __init__(
        self, embed_dim: int, num_heads: int, *, kdim: int | None = None, vdim: int | None = None
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise InvalidArgumentError(
                f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}"
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.packed = self.kdim == embed_dim and self.vdim == embed_dim
        if self.packed:
            self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(embed_dim, embed_dim))
            self.k_proj_weight = nn.Parameter(torch.empty(embed_dim, self.kdim))
            self.v_proj_weight = nn.Parameter(torch.empty(embed_dim, self.vdim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise: Xavier-uniform projections, zero biases (as ``nn.MultiheadAttention``)."""
        if self.packed:
            nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            nn.init.xavier_uniform_(self.q_proj_weight)
            nn.init.xavier_uniform_(self.k_proj_weight)
            nn.init.xavier_uniform_(self.v_proj_weight)
        nn.init.zeros_(self.in_proj_bias)
        nn.init.zeros_(self.out_proj.bias)

    def _weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.packed:
            return self.in_proj_weight.chunk(3, dim=0)  # type: ignore[return-value]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from ``query`` over ``key`` / ``value``.

        Parameters
        ----------
        query : torch.Tensor
            ``[B, Lq, E]``.
        key : torch.Tensor
            ``[B, Lk, kdim]``.
        value : torch.Tensor
            ``[B, Lk, vdim]``.
        attn_mask : torch.Tensor or None, default None
            Boolean (True = may attend) or additive float, broadcastable to
            ``[B, heads, Lq, Lk]``.

        Returns
        -------
        torch.Tensor
            ``[B, Lq, E]``.
        """
        wq, wk, wv = self._weights()
        bq, bk, bv = self.in_proj_bias.chunk(3)
        b, lq, e = query.shape[0], query.shape[1], self.embed_dim
        lk = key.shape[1]
        h, d = self.num_heads, self.embed_dim // self.num_heads
        q = F.linear(query, wq, bq).reshape(b, lq, h, d).transpose(1, 2)
        k = F.linear(key, wk, bk).reshape(b, lk, h, d).transpose(1, 2)
        v = F.linear(value, wv, bv).reshape(b, lk, h, d).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return self.out_proj(out.transpose(1, 2).reshape(b, lq, e))


class AttentionalPooler(nn.Module):
    """Learned queries attending over a token sequence (open_clip ``AttentionalPooler``).

    ``attn(ln_q(query), ln_k(x), ln_k(x))`` -> ``[B, n_queries, d_model]``; no residual.
    LayerNorms use torch's default eps 1e-5.
    """

    def __init__(self, d_model: int, context_dim: int, n_head: int, n_queries: int) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(n_queries, d_model))
        self.attn = MultiheadAttention(d_model, n_head, kdim=context_dim, vdim=context_dim)
        self.ln_q = nn.LayerNorm(d_model)
        self.ln_k = nn.LayerNorm(context_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool tokens ``[B, L, context_dim]`` to ``[B, n_queries, d_model]``."""
        x = self.ln_k(x)
        q = self.ln_q(self.query).unsqueeze(0).expand(x.shape[0], -1, -1)
        return self.attn(q, x, x)


class ConchVisionEncoder(TrunkPreprocessing, nn.Module):
    """CONCH's image tower: ``forward(x [B, 3, H, W]) -> [B, 512]``.

    By default ``forward`` returns what TRIDENT stores as ``conch_v1`` patch features: the
    ``ln_contrast`` output, before ``proj_contrast`` and unnormalised
    (``encode_image(x, proj_contrast=False, normalize=False)``). Build with
    ``proj_contrast=True, normalize=True`` (or call :meth:`encode_image`) for the embedding that
    zero-shot classification compares with text embeddings.

    Parameters
    ----------
    config : ConchConfig, default ConchConfig()
        The hyperparameters.
    name : str, default "conch"
        The model name.
    proj_contrast, normalize : bool, default False
        Apply ``proj_contrast`` and L2 normalisation in ``forward``.

    Attributes
    ----------
    embed_dim : int
        512.
    image_size : int
        448 unless built for another size.
    mean, std : tuple of float
        OpenAI CLIP statistics.
    interpolation : str
        "bicubic".
    """

    def __init__(
        self,
        config: ConchConfig = ConchConfig(),
        *,
        name: str = "conch",
        proj_contrast: bool = False,
        normalize: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.name = name
        self.embed_dim = config.embed_dim
        self.use_proj_contrast = bool(proj_contrast)
        self.normalize = bool(normalize)
        self.trunk = VisionTransformer(
            config.vision,
            name=f"{name}.trunk",
            mean=OPENAI_CLIP_MEAN,
            std=OPENAI_CLIP_STD,
            interpolation="bicubic",
        )
        self.attn_pool_contrast = AttentionalPooler(
            config.embed_dim, config.vision.embed_dim, config.pooler_heads, 1
        )
        self.ln_contrast = nn.LayerNorm(config.embed_dim)
        scale = config.embed_dim**-0.5
        self.proj_contrast = nn.Parameter(scale * torch.randn(config.embed_dim, config.embed_dim))

    def encode_image(
        self, x: torch.Tensor, *, proj_contrast: bool = True, normalize: bool = True
    ) -> torch.Tensor:
        """Embed images as CONCH's ``encode_image`` does.

        The pooled CLS-query embedding ``[B, 512]``, then optionally ``@ proj_contrast`` and L2
        normalisation.

        Parameters
        ----------
        x : torch.Tensor
            ``[B, 3, H, W]`` normalised images.
        proj_contrast : bool, default True
            Apply ``proj_contrast``.
        normalize : bool, default True
            L2-normalise.

        Returns
        -------
        torch.Tensor
            ``[B, 512]``.
        """
        tokens = self.trunk.forward_features(x)
        pooled = self.ln_contrast(self.attn_pool_contrast(tokens)[:, 0])
        if proj_contrast:
            pooled = pooled @ self.proj_contrast
        if normalize:
            pooled = F.normalize(pooled, dim=-1)
        return pooled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed ``x [B, 3, H, W]`` with the projection and normalisation chosen at build."""
        return self.encode_image(x, proj_contrast=self.use_proj_contrast, normalize=self.normalize)

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Select this tower's keys from a checkpoint and fit ``trunk.pos_embed`` to the model.

        Accepts the full model's keys (``visual.*``; ``text.*``, ``logit_scale`` and
        :data:`IGNORED_PREFIXES` are dropped) or the tower's own keys. When the checkpoint's
        grid differs from this model's (built with another ``image_size``), the grid rows are
        resampled bilinearly without antialiasing and the CLS row is kept, as CONCH's loader
        does for ``force_image_size`` (mahmoodlab/CONCH ``conch/open_clip_custom/factory.py``,
        ``load_checkpoint``@141cc09).

        Parameters
        ----------
        state : Mapping of str to torch.Tensor
            The checkpoint's state dict.

        Returns
        -------
        dict of str to torch.Tensor
            The state dict for this tower.
        """
        if any(k.startswith("visual.") for k in state):
            out = {
                k[len("visual.") :]: v
                for k, v in state.items()
                if k.startswith("visual.") and not k.startswith(IGNORED_PREFIXES)
            }
        else:
            out = {
                k: v
                for k, v in state.items()
                if not k.startswith(("attn_pool_caption.", "ln_caption."))
            }
        if "trunk.pos_embed" in out:
            out["trunk.pos_embed"] = fit_checkpoint_pos_embed(
                out["trunk.pos_embed"], self.trunk.pos_embed.shape,
                grid=self.config.vision.grid_size,
                num_prefix_tokens=self.config.vision.num_prefix_tokens,
            )  # fmt: skip
        return out


def text_attention_mask(ids: torch.Tensor, *, pad_id: int = 0) -> torch.Tensor:
    """Build the CONCH/open_clip text attention mask for token ids ``[B, L]``.

    ``ids`` are the ids after the last one was dropped; the mask is boolean ``[B, L+1, L+1]``,
    True where a query may attend a key.

    Rows ``0..L-1`` (the text tokens) are causal: query ``i`` sees keys ``j <= i``. Row ``L`` (the
    appended CLS embedding) sees key ``0`` always and key ``j >= 1`` iff ``ids[j-1] != pad_id``:
    open_clip pads the non-pad mask by one column on the left, so the CLS row is shifted by one
    position. With ``n`` non-pad ids it sees keys ``0..n`` (one pad position more than the
    text), and sees itself only when ``ids[L-1]`` is not a pad. Reproduced as is, because the
    released weights were trained with it.

    Parameters
    ----------
    ids : torch.Tensor
        ``[B, L]`` token ids.
    pad_id : int, default 0
        The ``<pad>`` id.

    Returns
    -------
    torch.Tensor
        ``[B, L+1, L+1]`` bool.
    """
    b, n = ids.shape
    causal = torch.ones(n + 1, n + 1, dtype=torch.bool, device=ids.device).tril()
    nonpad = ids != pad_id
    cls_row = torch.cat([torch.ones(b, 1, dtype=torch.bool, device=ids.device), nonpad], dim=1)
    mask = causal.unsqueeze(0).expand(b, -1, -1).clone()
    mask[:, n, :] = cls_row
    return mask


class _TextMlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, hidden)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class _ResidualAttentionBlock(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = MultiheadAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = _TextMlp(width, width * mlp_ratio)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, attn_mask=mask)
        return x + self.mlp(self.ln_2(x))


class _Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(
            _ResidualAttentionBlock(width, heads, mlp_ratio) for _ in range(layers)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for block in self.resblocks:
            x = block(x, mask)
        return x


class ConchTextEncoder(nn.Module):
    """CONCH's text tower: ``forward(ids [B, L]) -> [B, embed_dim]``, unnormalised.

    ``L`` = ``context_length`` = 128 from
    :class:`~tumorboard.models.conch_tokenizer.ConchTokenizer`. See the module docstring and
    :func:`text_attention_mask`.
    """

    def __init__(self, config: ConchConfig = ConchConfig()) -> None:
        super().__init__()
        self.config = config
        w = config.text_width
        self.token_embedding = nn.Embedding(config.vocab_size, w)
        self.positional_embedding = nn.Parameter(torch.empty(config.context_length, w))
        self.cls_emb = nn.Parameter(torch.empty(w))
        self.transformer = _Transformer(
            w, config.text_layers, config.text_heads, config.text_mlp_ratio
        )
        self.ln_final = nn.LayerNorm(w)
        self.text_projection = nn.Parameter(torch.empty(w, config.embed_dim))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialise as open_clip does (normal with the usual CLIP scales)."""
        w, layers = self.config.text_width, self.config.text_layers
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        nn.init.normal_(self.cls_emb, std=0.01)
        proj_std = (w**-0.5) * ((2 * layers) ** -0.5)
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=w**-0.5)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=(2 * w) ** -0.5)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=w**-0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Embed token ids ``[B, L]`` (2 <= L <= context_length) to ``[B, embed_dim]``."""
        if ids.ndim != 2 or not (2 <= ids.shape[1] <= self.config.context_length):
            raise InvalidArgumentError(
                f"expected token ids [B, L] with 2 <= L <= {self.config.context_length}, "
                f"got shape {list(ids.shape)}"
            )
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise InvalidTypeError(f"token ids: expected an integer tensor, got {ids.dtype}")
        ids = ids[:, :-1].to(torch.long)  # room for the CLS embedding
        b, n = ids.shape
        x = self.token_embedding(ids)
        x = torch.cat([x, self.cls_emb.to(x.dtype).expand(b, 1, -1)], dim=1)
        x = x + self.positional_embedding[: n + 1].to(x.dtype)
        mask = text_attention_mask(ids, pad_id=self.config.pad_id).unsqueeze(1)
        x = self.transformer(x, mask)
        return self.ln_final(x[:, -1]) @ self.text_projection


class CONCH(nn.Module):
    """The full CONCH model for zero-shot use.

    ``visual`` (:class:`ConchVisionEncoder`), ``text`` (:class:`ConchTextEncoder`) and
    ``logit_scale``; keys match the released checkpoint (less :data:`IGNORED_PREFIXES`).

    ``tokenizer`` (a :class:`~tumorboard.models.conch_tokenizer.ConchTokenizer`, optional)
    lets :meth:`encode_prompts` take strings.
    """

    def __init__(self, config: ConchConfig = ConchConfig(), *, name: str = "conch") -> None:
        super().__init__()
        self.config = config
        self.name = name
        self.visual = ConchVisionEncoder(config, name=name, proj_contrast=True, normalize=True)
        self.text = ConchTextEncoder(config)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self.tokenizer = None

    @property
    def embed_dim(self) -> int:
        """Width of the image and text embeddings."""
        return self.config.embed_dim

    @property
    def image_size(self) -> int:
        """Input side in pixels."""
        return self.visual.image_size

    @property
    def mean(self) -> tuple[float, ...]:
        """Per-channel normalisation mean (OpenAI CLIP)."""
        return self.visual.mean

    @property
    def std(self) -> tuple[float, ...]:
        """Per-channel normalisation std (OpenAI CLIP)."""
        return self.visual.std

    def encode_image(
        self, x: torch.Tensor, *, proj_contrast: bool = True, normalize: bool = True
    ) -> torch.Tensor:
        """Return image embeddings ``[B, 512]`` (see :meth:`ConchVisionEncoder.encode_image`)."""
        return self.visual.encode_image(x, proj_contrast=proj_contrast, normalize=normalize)

    def encode_text(
        self, ids: torch.Tensor | np.ndarray, *, normalize: bool = True
    ) -> torch.Tensor:
        """Return text embeddings ``[B, 512]`` of token ids ``[B, 128]``."""
        ids_t = torch.as_tensor(ids, device=self.logit_scale.device)
        out = self.text(ids_t)
        return F.normalize(out, dim=-1) if normalize else out

    def encode_prompts(self, texts: str | Sequence[str], *, normalize: bool = True) -> torch.Tensor:
        """Tokenise ``texts`` with :attr:`tokenizer` and encode them: ``[N, 512]``."""
        if self.tokenizer is None:
            raise InvalidArgumentError(
                "this CONCH model has no tokenizer; pass tokenizer=PATH to load_conch or set "
                "model.tokenizer = ConchTokenizer(PATH)"
            )
        return self.encode_text(self.tokenizer(texts), normalize=normalize)

    def class_embeddings(self, prompts: Sequence[Sequence[str]]) -> torch.Tensor:
        """Embed prompt ensembles, one embedding per class.

        For each class, the mean of its L2-normalised prompt embeddings, re-normalised (CONCH
        zero-shot, mahmoodlab/CONCH ``conch/downstream/zeroshot_path.py``@141cc09).

        Parameters
        ----------
        prompts : sequence of sequence of str
            ``prompts[c]`` lists class ``c``'s prompts.

        Returns
        -------
        torch.Tensor
            ``[C, 512]``.
        """
        if not prompts or any(len(p) == 0 for p in prompts):
            counts = [len(p) for p in prompts or []]
            raise InvalidArgumentError(
                f"prompts: expected at least one prompt for every class, got counts {counts}"
            )
        out = [self.encode_prompts(list(p)).mean(dim=0) for p in prompts]
        return F.normalize(torch.stack(out), dim=-1)

    def zero_shot_probs(self, image_emb: torch.Tensor, text_emb: torch.Tensor) -> torch.Tensor:
        """Compute ``softmax(exp(logit_scale) * image_emb @ text_emb.T)`` over the classes.

        Both inputs should be L2-normalised; the result is ``[B, C]``.
        """
        logits = self.logit_scale.exp() * image_emb @ text_emb.to(image_emb.dtype).T
        return logits.softmax(dim=-1)

    def forward(
        self, images: torch.Tensor, ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return (normalised image embeddings, normalised text embeddings, exp(logit_scale))."""
        return self.encode_image(images), self.encode_text(ids), self.logit_scale.exp()

    def adapt_state_dict(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Drop :data:`IGNORED_PREFIXES` and fit ``visual.trunk.pos_embed`` to the built size.

        See :meth:`ConchVisionEncoder.adapt_state_dict`.
        """
        visual = self.visual.adapt_state_dict(state)
        out = {
            k: v
            for k, v in state.items()
            if not k.startswith("visual.") and not k.startswith(IGNORED_PREFIXES)
        }
        out.update({f"visual.{k}": v for k, v in visual.items()})
        return out


# --- named configurations (timm's model-file pattern: configs beside the classes) ------------

#: CONCH as released: ``conch_ViT-B-16`` (Lu et al., *Nature Medicine* 2024, Methods;
#: mahmoodlab/CONCH ``conch/open_clip_custom/model_configs/conch_ViT-B-16.json``@141cc09).
CONCH_B16 = ConchConfig()
#: CONCH scaled down for tests and the demo (same classes, same 128-id text input).
CONCH_TINY = ConchConfig(
    vision=ViTConfig(
        image_size=448, patch_size=16, embed_dim=32, depth=2, num_heads=2, mlp_hidden=128
    ),
    embed_dim=16,
    pooler_heads=2,
    context_length=128,
    vocab_size=32007,
    text_width=32,
    text_heads=2,
    text_layers=2,
)


def _sized(config: ConchConfig, image_size: int | None) -> ConchConfig:
    return config if image_size is None else config.with_image_size(image_size)


def conch_b16_vision(
    *, image_size: int | None = None, proj_contrast: bool = False, normalize: bool = False
) -> ConchVisionEncoder:
    """Build CONCH's image tower (:data:`CONCH_B16`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        Build for this input size, a multiple of 16 (CONCH's ``force_image_size``; MTBBench uses
        1024). ``None`` (default) means the native 448; a checkpoint's position grid is then
        resampled at load (:meth:`ConchVisionEncoder.adapt_state_dict`).
    proj_contrast, normalize : bool, default False
        Apply ``proj_contrast`` and L2 normalisation in ``forward``. The defaults give TRIDENT's
        ``conch_v1`` patch feature; ``True, True`` gives the zero-shot image embedding.

    Returns
    -------
    ConchVisionEncoder
        The encoder named ``"conch"``: ``[B, 3, H, W] -> [B, 512]``, OpenAI-CLIP normalisation.

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 16.
    """
    return ConchVisionEncoder(
        _sized(CONCH_B16, image_size),
        name="conch",
        proj_contrast=proj_contrast,
        normalize=normalize,
    )


def conch_tiny_vision(
    *, image_size: int | None = None, proj_contrast: bool = False, normalize: bool = False
) -> ConchVisionEncoder:
    """Build the scaled-down CONCH image tower (:data:`CONCH_TINY`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        Build for this input size, a multiple of 16; ``None`` (default) means 448.
    proj_contrast, normalize : bool, default False
        As :func:`conch_b16_vision`.

    Returns
    -------
    ConchVisionEncoder
        The encoder named ``"conch-tiny"``: ``[B, 3, H, W] -> [B, 16]``.

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 16.
    """
    return ConchVisionEncoder(
        _sized(CONCH_TINY, image_size),
        name="conch-tiny",
        proj_contrast=proj_contrast,
        normalize=normalize,
    )


def conch_b16(*, image_size: int | None = None) -> CONCH:
    """Build the full CONCH model (:data:`CONCH_B16`: both towers, ``logit_scale``) at random.

    Parameters
    ----------
    image_size : int, optional
        Build the image tower for this input size, as :func:`conch_b16_vision`.

    Returns
    -------
    CONCH
        The zero-shot model named ``"conch"`` (512-d image and text embeddings).

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 16.
    """
    return CONCH(_sized(CONCH_B16, image_size), name="conch")


def conch_tiny(*, image_size: int | None = None) -> CONCH:
    """Build the scaled-down full CONCH model (:data:`CONCH_TINY`) with random parameters.

    Parameters
    ----------
    image_size : int, optional
        Build the image tower for this input size, as :func:`conch_tiny_vision`.

    Returns
    -------
    CONCH
        The zero-shot model named ``"conch-tiny"`` (16-d image and text embeddings).

    Raises
    ------
    ValueError
        If ``image_size`` is not a positive multiple of 16.
    """
    return CONCH(_sized(CONCH_TINY, image_size), name="conch-tiny")
