"""The chat model adapter: an OpenAI-compatible endpoint asked for one JSON object per call.

Built once per worker process (never at import). The API key is a SecretStr that is read
only when the client is made and is never logged; log lines carry the model, timing and
token counts, never prompts or replies.
"""

from __future__ import annotations

import json
import time
from typing import Any

import openai
from pydantic import SecretStr

from sleepmem.core.errors import ExtractionError, TransientError
from sleepmem.core.logs import get_logger
from sleepmem.core.metrics import LLM_CALLS, LLM_TOKENS
from sleepmem.core.settings import Settings
from sleepmem.pipelines.ports import LLMUsage
from sleepmem.pipelines.read.rewrite import CachedRewriter

# Bounds that keep one extraction inside a Celery soft time limit even when every try
# times out: (retries + 1) x timeout stays well under the lease.
MAX_RETRIES = 5
MAX_TIMEOUT_S = 300.0
# What a reply is asked to be, best first: OpenAI structured outputs (JSON schema); the
# llama.cpp form of the same (JSON mode constrained by a schema grammar); plain JSON mode;
# and, for servers with none of these, words only (the first {...} block is parsed).
RESPONSE_FORMATS = ("json_schema", "json_object_schema", "json_object", "text")


class OpenAIChatModel:
    """ChatModel over the ``openai`` SDK, for OpenAI or any compatible server."""

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key: SecretStr,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        max_tokens: int = 2048,
        temperature: float = 0.0,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout_s = min(max(timeout_s, 1.0), MAX_TIMEOUT_S)
        # Structured outputs first; each server that refuses a form steps down once, for
        # the life of this client (see RESPONSE_FORMATS).
        self._format = 0
        self._log = get_logger("sleepmem.llm")
        # Local servers ignore the key, but the SDK refuses an empty one.
        key = api_key.get_secret_value() or "not-needed"
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=key,
            timeout=self.timeout_s,
            max_retries=min(max(max_retries, 0), MAX_RETRIES),
        )

    def complete_json(
        self, *, system: str, user: str, schema: dict[str, Any]
    ) -> tuple[dict[str, Any], LLMUsage]:
        schema_text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        messages: list[dict[str, str]] = [
            {"role": "system",
             "content": f"{system}\n\nReply with ONE JSON object matching this JSON schema:\n"
                        f"{schema_text}"},
            {"role": "user", "content": user},
        ]
        t0 = time.perf_counter()
        try:
            while True:
                try:
                    response = self._create(messages, schema)
                    break
                except (openai.BadRequestError, openai.UnprocessableEntityError,
                        openai.InternalServerError) as exc:
                    # A server that does not know this response_format says so (some
                    # with a 500); step down to the next form and ask again.
                    if self._format + 1 >= len(RESPONSE_FORMATS) or (
                            "response_format" not in str(exc)):
                        raise
                    self._format += 1
                    self._log.info("llm.response_format", model=self.model,
                                   now=RESPONSE_FORMATS[self._format])
        except openai.BadRequestError as exc:
            self._count("refused", t0)
            raise ExtractionError(f"the model refused the request: {_brief(exc)}") from None
        except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                openai.InternalServerError) as exc:
            self._count("transient", t0)
            raise TransientError(f"chat model unavailable: {type(exc).__name__}") from None
        except openai.APIStatusError as exc:
            self._count("error", t0)
            raise ExtractionError(
                f"chat model answered HTTP {exc.status_code}: {_brief(exc)}"
            ) from None
        usage = _usage(response)
        content = response.choices[0].message.content if response.choices else None
        try:
            data = parse_json_object(content or "")
        except ExtractionError:
            self._count("invalid_json", t0, usage)
            raise
        self._count("ok", t0, usage)
        return data, usage

    @property
    def response_format(self) -> str:
        """The form of structured output this client asks for now."""
        return RESPONSE_FORMATS[self._format]

    def _create(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        form = RESPONSE_FORMATS[self._format]
        if form == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema},
            }
        elif form == "json_object_schema":
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        elif form == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return self._client.chat.completions.create(**kwargs)

    def _count(self, outcome: str, t0: float, usage: LLMUsage | None = None) -> None:
        LLM_CALLS.labels(model=self.model, outcome=outcome).inc()
        if usage is not None:
            LLM_TOKENS.labels(model=self.model, kind="prompt").inc(usage.prompt_tokens)
            LLM_TOKENS.labels(model=self.model, kind="completion").inc(usage.completion_tokens)
        self._log.info(
            "llm.call",
            model=self.model,
            outcome=outcome,
            response_format=RESPONSE_FORMATS[self._format],
            ms=round((time.perf_counter() - t0) * 1000, 1),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    def close(self) -> None:
        self._client.close()


def _usage(response: Any) -> LLMUsage:
    u = getattr(response, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    completion = int(getattr(u, "completion_tokens", 0) or 0)
    return LLMUsage(calls=1, prompt_tokens=prompt, completion_tokens=completion)


def _brief(exc: Exception) -> str:
    return str(exc).replace("\n", " ")[:200]


def parse_json_object(text: str) -> dict[str, Any]:
    """The reply as a JSON object; else the first balanced {...} block in it."""
    text = text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        block = _first_object(text)
        if block is None:
            raise ExtractionError("the model's reply holds no JSON object") from None
        try:
            data = json.loads(block)
        except json.JSONDecodeError as exc:
            raise ExtractionError(f"the model's reply is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ExtractionError(f"the model's reply is JSON {type(data).__name__}, not an object")
    return data


def _first_object(text: str) -> str | None:
    start = text.find("{")
    while start != -1:
        depth = 0
        in_string = False
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def make_chat_model(settings: Settings) -> OpenAIChatModel | None:
    """The configured chat model, or None when no endpoint or key is configured."""
    if not settings.llm_base_url and not settings.llm_api_key.get_secret_value():
        return None
    return OpenAIChatModel(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
    )


def make_rewriter(settings: Settings) -> CachedRewriter | None:
    """The query rewriter, when ``query_rewrite=llm`` and a chat model is configured: its
    own client with a short timeout and no retries (a search waits for it)."""
    if settings.query_rewrite != "llm":
        return None
    if not settings.llm_base_url and not settings.llm_api_key.get_secret_value():
        get_logger("sleepmem.rewrite").warning(
            "query_rewrite.off", reason="query_rewrite=llm but no chat model is configured "
                                        "(SLEEPMEM_LLM_BASE_URL / SLEEPMEM_LLM_API_KEY)")
        return None
    chat = OpenAIChatModel(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        timeout_s=settings.query_rewrite_timeout_s,
        max_retries=0,
        max_tokens=200,
    )
    return CachedRewriter(chat, ttl_s=settings.query_rewrite_cache_s,
                          cooldown_s=settings.query_rewrite_cooldown_s)
