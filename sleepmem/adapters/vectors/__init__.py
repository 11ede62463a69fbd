"""The vector index (dense + lexical) behind :class:`~pipelines.ports.VectorIndex`.

``open_index`` picks the backend from settings; the caller then calls ``ensure(dim=...)``
with its embedder's size. Nothing is opened at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sleepmem.core.errors import ConfigurationError
from sleepmem.core.settings import Settings

if TYPE_CHECKING:
    from sleepmem.pipelines.ports import VectorIndex


def open_index(settings: Settings) -> VectorIndex:
    """The index named by ``settings.vector_backend`` (edge, qdrant-local or qdrant)."""
    backend = settings.vector_backend
    # Deferred: a backend's client loads only when chosen (qdrant-client takes ~2.7 s).
    if backend == "edge":
        from sleepmem.adapters.vectors.edge import EdgeIndex

        return EdgeIndex(settings.data_dir / "index")
    if backend == "qdrant-local":
        from sleepmem.adapters.vectors.qdrant import QdrantIndex

        return QdrantIndex(path=settings.data_dir / "qdrant", collection=settings.collection)
    if backend == "qdrant":
        from sleepmem.adapters.vectors.qdrant import QdrantIndex

        if not settings.qdrant_url:
            raise ConfigurationError("index_backend 'qdrant' needs SLEEPMEM_QDRANT_URL")
        return QdrantIndex(url=settings.qdrant_url, collection=settings.collection)
    raise ConfigurationError(f"unknown index backend {backend!r}")
