"""Scale-out on Ray (the optional ``[dist]`` extra: ``pip install tumorboard[dist]``).

* :func:`score_store`: a store's accuracy CIs from Poisson-bootstrap partials per shard of
  Parquet parts, merged exactly (bit-identical for any shard count, locally or on Ray);
* :func:`embed_slides_ray`: ``embed_slides`` with slides spread over Ray actors (reached through
  ``tumorboard.embed.embed_slides(..., executor="ray")``).

Ray is imported only when the Ray executor is used; without it a clear ImportError names the extra.
"""

from __future__ import annotations

from ._embed import embed_slides_ray
from ._ray import connect, require_ray
from ._score import StoreScore, score_store, shard_partials, split_parts

__all__ = [
    "StoreScore",
    "connect",
    "embed_slides_ray",
    "require_ray",
    "score_store",
    "shard_partials",
    "split_parts",
]
