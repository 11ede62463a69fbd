"""Generate the paraphrase suite: every user message of tests/generalization/ said three ways.

Why: one memory decision must not depend on one wording, and the generalisation stories were
still written by people who knew the code. Here a local model (scripts never hand-edit the
output) rewrites every user-role message (plain and feedback; assistant, tool and system
messages stay as they are) three ways, EN to EN and ZH to ZH, keeping the meaning and the
speaker. Each story becomes tests/paraphrases/<stem>-p1.toml .. -p3.toml, identical to the
original except for the user messages (variant i uses rewrite i of every user message) and
its name/about. tests/stories/test_paraphrases.py runs them.

Each message is asked once for three rewrites in JSON; a rewrite must be non-empty, differ
from the original, keep the language (share of CJK characters), keep the first person when
the original speaks in it, keep verbatim every token bearing a digit, and keep every string
the story's checks rely on that occurs in the message, and bring in no check string the
message did not say. When fewer than three rewrites pass,
the model is asked again (up to three attempts, another seed and temperature, naming the
words to keep). Every model answer is cached in tests/paraphrases/_cache.json, keyed by the
sha1 of the message and the words it must keep, so a rerun regenerates identical stories
without the model. A story none of whose variants can be built is left out and counted.

Usage: python scripts/paraphrase_stories.py [--only PREFIX ...] [--offline]
Env: SLEEPMEM_LLM_URL (default http://127.0.0.1:8091/v1), SLEEPMEM_LLM_MODEL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "generalization"
TARGET = ROOT / "tests" / "paraphrases"
CACHE = TARGET / "_cache.json"
VARIANTS = 3
ATTEMPTS = 3
DEFAULT_URL = "http://127.0.0.1:8091/v1"
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# The per-attempt sampling: a fresh seed and a little more temperature each time.
SAMPLING = [(0.7, 1101), (0.8, 2202), (0.9, 3303)]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_DIGIT_TOKEN = re.compile(r"[A-Za-z0-9_\-.:/@+#$%]*\d[A-Za-z0-9_\-.:/@+#$%]*")
_FIRST_PERSON_EN = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b",
                              re.IGNORECASE)
_FIRST_PERSON_ZH = re.compile(r"[我咱]")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_CHECK_KEYS = ("top1", "top", "absent", "conflict", "active", "nowhere", "starts")


# -- what a rewrite must keep -------------------------------------------------------------

def check_strings(story: dict[str, Any]) -> list[str]:
    """Every string the story's checks look for (not the search queries themselves)."""
    found: list[str] = []
    for step in story.get("step", []):
        spec = step.get("check")
        if not spec:
            continue
        for key in _CHECK_KEYS:
            value = spec.get(key)
            values = value if isinstance(value, list) else [value]
            found.extend(v for v in values if isinstance(v, str) and v)
    return found


def digit_tokens(text: str) -> list[str]:
    """Tokens carrying a digit (keys, codes, numbers, times), trailing punctuation trimmed."""
    tokens = (t.rstrip(".:,/-") for t in _DIGIT_TOKEN.findall(text))
    return [t for t in tokens if any(c.isdigit() for c in t)]


def must_keep(message: str, checks: list[str]) -> list[str]:
    """Strings a rewrite of this message must contain (check strings case-insensitively)."""
    low = message.casefold()
    keep = [c for c in checks if c.casefold() in low] + digit_tokens(message)
    out: list[str] = []
    for k in keep:
        if k not in out:
            out.append(k)
    return out


def _bare(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def cjk_share(text: str) -> float:
    letters = [c for c in text if _CJK.match(c) or _LATIN.match(c)]
    return sum(1 for c in letters if _CJK.match(c)) / len(letters) if letters else 0.0


def first_person(text: str) -> bool:
    return bool(_FIRST_PERSON_EN.search(text) or _FIRST_PERSON_ZH.search(text))


def introduced(original: str, rewrite: str, checks: list[str]) -> list[str]:
    """Check strings the rewrite brings in that the original never said (as a word)."""
    low = original.casefold()
    out: list[str] = []
    for c in checks:
        if c.casefold() in low:
            continue
        pattern = re.escape(c)
        if c[:1].isascii() and c[:1].isalnum():
            pattern = r"(?<![A-Za-z0-9])" + pattern
        if c[-1:].isascii() and c[-1:].isalnum():
            pattern += r"(?![A-Za-z0-9])"
        if re.search(pattern, rewrite, re.IGNORECASE):
            out.append(c)
    return out


def problems(original: str, rewrite: str, keep: list[str],
             checks: list[str] | None = None) -> list[str]:
    """Why a rewrite is not a valid paraphrase of the original (empty: it is)."""
    text = rewrite.strip()
    if not text:
        return ["empty"]
    if _bare(text) == _bare(original):
        return ["identical to the original (but for case, spaces or punctuation)"]
    why: list[str] = []
    share_o, share_r = cjk_share(original), cjk_share(text)
    if (share_o == 0) != (share_r == 0) or abs(share_o - share_r) > 0.35:
        why.append(f"language changed (CJK share {share_o:.2f} -> {share_r:.2f})")
    if first_person(original) and not first_person(text):
        why.append("first person lost")
    ratio = len(text) / max(1, len(original.strip()))
    if not 0.4 <= ratio <= 2.5:
        why.append(f"length ratio {ratio:.2f}")
    low = text.casefold()
    for k in keep:
        is_digit = any(c.isdigit() for c in k)
        if (k not in text) if is_digit else (k.casefold() not in low):
            why.append(f"lost {k!r}")
    why.extend(f"brings in {c!r}" for c in introduced(original, text, checks or []))
    return why


# -- the model and its cache --------------------------------------------------------------

SYSTEM = (
    "You paraphrase one chat message that a user wrote to an AI assistant. Reply with JSON "
    'only: {"rewrites": ["...", ...]} holding exactly the number of rewrites asked for. Each '
    "rewrite keeps exactly the same meaning and every fact, in the same language as the "
    "message (English stays English, a mix stays a mix), from the same speaker (if the user "
    "says I/my, the rewrite says I/my too); it is not a reply to the message. Use different "
    "words and a different sentence structure in each rewrite."
)
# Chinese messages get the instruction in Chinese: asked in English, the model translates.
SYSTEM_ZH = (
    "你负责改写用户发给AI助手的一条中文消息。只用JSON回答："
    '{"rewrites": ["...", ...]}，条数与要求一致。每条改写必须用中文，意思和所有事实完全不变，'
    "说话人不变（原文说“我”，改写也说“我”），不是对消息的回复。每条改写换用不同的词语和句式。"
)


def prompt(message: str, keep: list[str], need: int, zh: bool,
           have: list[str] | None = None) -> str:
    """The user turn; a retry also names the rewrites already accepted (not to repeat)."""
    if zh:
        lines = [f"消息：\n{message}", f"请给出 {need} 条中文改写。"]
        if keep:
            lines.append("每条改写必须原样包含这些字符串："
                         + json.dumps(keep, ensure_ascii=False))
        if have:
            lines.append("不要重复这些已有的改写：" + json.dumps(have, ensure_ascii=False))
        return "\n\n".join(lines)
    lines = [f"Message:\n{message}", f"Give {need} rewrites."]
    if keep:
        lines.append("Each rewrite must contain these exact strings unchanged: "
                     + json.dumps(keep, ensure_ascii=False))
    if have:
        lines.append("Do not repeat these rewrites: " + json.dumps(have, ensure_ascii=False))
    return "\n\n".join(lines)


def cache_key(message: str, keep: list[str]) -> str:
    return hashlib.sha1("\x00".join([message, *keep]).encode("utf-8")).hexdigest()


@dataclass
class Generator:
    cache: dict[str, Any]
    offline: bool = False
    calls: int = 0
    seconds: float = 0.0
    client: Any = None
    model: str = field(default_factory=lambda: os.environ.get("SLEEPMEM_LLM_MODEL",
                                                              DEFAULT_MODEL))

    def ask(self, message: str, keep: list[str], attempt: int, have: list[str]) -> str:
        """The model's raw answer for this attempt, from the cache when it holds one."""
        key = cache_key(message, keep)
        cached = self.cache.get(key, {}).get("answers", [])
        if attempt < len(cached):
            return str(cached[attempt]["raw"])
        if self.offline:
            raise LookupError("not cached and --offline")
        entry = self.cache.setdefault(key, {"message": message, "keep": keep, "answers": []})
        if self.client is None:
            from openai import OpenAI

            self.client = OpenAI(base_url=os.environ.get("SLEEPMEM_LLM_URL", DEFAULT_URL),
                                 api_key=os.environ.get("SLEEPMEM_LLM_API_KEY", "local"),
                                 timeout=300)
        temperature, seed = SAMPLING[attempt]
        zh = cjk_share(message) > 0.3
        est = len(message) if zh else len(message) // 3
        need = VARIANTS - len(have)
        user = prompt(message, keep, need, zh, have)
        started = time.monotonic()
        response = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": SYSTEM_ZH if zh else SYSTEM},
                      {"role": "user", "content": user}],
            temperature=temperature,
            seed=seed,
            # A runaway JSON answer costs minutes on a loaded CPU: room for `need` rewrites
            # twice as long as the message, no more.
            max_tokens=min(1200, 30 + need * (12 + 2 * est)),
            response_format={"type": "json_object"},
        )
        took = time.monotonic() - started
        self.calls += 1
        self.seconds += took
        raw = response.choices[0].message.content or ""
        entry["answers"].append({"raw": raw, "temperature": temperature, "seed": seed,
                                 "need": need, "prompt": user,
                                 "model": self.model, "seconds": round(took, 2)})
        return raw

    def rewrites(self, message: str, keep: list[str],
                 checks: list[str]) -> tuple[list[str], list[str]]:
        """Up to three valid rewrites, and why the rejected ones were rejected."""
        good: list[str] = []
        rejected: list[str] = []
        for attempt in range(ATTEMPTS):
            try:
                raw = self.ask(message, keep, attempt, good)
            except LookupError:
                rejected.append("not cached (offline)")
                break
            for text in parse_answer(raw):
                why = problems(message, text, keep, checks)
                if text.strip() in good:
                    why = ["duplicate"]
                if why:
                    rejected.append(f"{text!r}: {', '.join(why)}")
                else:
                    good.append(text.strip())
            if len(good) >= VARIANTS:
                break
        return good[:VARIANTS], rejected


def parse_answer(raw: str) -> list[str]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return []
    items = data.get("rewrites") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, str)]


# -- TOML out -----------------------------------------------------------------------------

def toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else toml_string(key)


def dump_story(story: dict[str, Any], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    for key, value in story.items():
        if key != "step":
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for step in story.get("step", []):
        lines.append("")
        lines.append("[[step]]")
        lines.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in step.items())
    return "\n".join(lines) + "\n"


# -- the suite ----------------------------------------------------------------------------

def user_emits(story: dict[str, Any]) -> list[dict[str, Any]]:
    """The emits whose content is a user's message (plain or feedback)."""
    return [s["emit"] for s in story.get("step", [])
            if "emit" in s and s["emit"].get("role") == "user"
            and s["emit"].get("kind") in (None, "message", "feedback")]


def variant(story: dict[str, Any], stem: str, i: int, texts: dict[int, str]) -> dict[str, Any]:
    """The story with user message j replaced by texts[j] and a name saying what it is."""
    out = json.loads(json.dumps(story))  # deep copy of plain TOML data
    out["name"] = f"{story.get('name', stem)}-p{i}"
    out["about"] = (f"Generated paraphrase {i}/{VARIANTS} of {stem}: "
                    f"{story.get('about', '')}").strip()
    for j, emit in enumerate(user_emits(out)):
        emit["content"] = texts[j]
    return out


def by_kind_round_robin(paths: list[Path]) -> list[Path]:
    """The first story of every kind, then the second of every kind, and so on.

    On a slow machine a run cut short by its time budget still covers every kind.
    """
    kinds: dict[str, list[Path]] = {}
    for p in paths:
        kinds.setdefault(p.name[:2], []).append(p)
    out: list[Path] = []
    for rank in range(max((len(v) for v in kinds.values()), default=0)):
        out.extend(v[rank] for _, v in sorted(kinds.items()) if rank < len(v))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="story stem prefixes to do")
    ap.add_argument("--offline", action="store_true", help="use the cache only")
    ap.add_argument("--budget-minutes", type=float, default=0.0,
                    help="start no new story after this long (0: no limit)")
    args = ap.parse_args(argv)

    cache: dict[str, Any] = json.loads(CACHE.read_text("utf-8")) if CACHE.exists() else {}
    gen = Generator(cache=cache, offline=args.offline)
    TARGET.mkdir(parents=True, exist_ok=True)
    written = 0
    skipped: list[str] = []
    started = time.monotonic()
    stories = by_kind_round_robin(sorted(SOURCE.glob("*.toml")))
    if args.only:
        stories = [p for p in stories if p.stem.startswith(tuple(args.only))]
    for n, path in enumerate(stories, start=1):
        if args.budget_minutes and time.monotonic() - started > 60 * args.budget_minutes:
            skipped.extend(f"{p.stem} (all variants): not generated, time budget spent"
                           for p in stories[n - 1:])
            break
        story = tomllib.loads(path.read_text("utf-8"))
        emits = user_emits(story)
        if not emits:
            skipped.append(f"{path.stem} (all variants): no user message to paraphrase")
            continue
        checks = check_strings(story)
        per_message: list[list[str]] = []
        uncached: list[str] = []
        for emit in emits:
            message = str(emit["content"])
            good, rejected = gen.rewrites(message, must_keep(message, checks), checks)
            per_message.append(good)
            if rejected == ["not cached (offline)"]:
                uncached.append(message)
            elif len(good) < VARIANTS:
                print(f"  {path.stem}: {len(good)}/{VARIANTS} rewrites of {message!r}; "
                      f"rejected: {rejected}", flush=True)
        if uncached:
            skipped.append(f"{path.stem} (all variants): not generated, no cached model "
                           f"answer for {len(uncached)} user message(s) (--offline)")
            continue
        for i in range(1, VARIANTS + 1):
            target = TARGET / f"{path.stem}-p{i}.toml"
            missing = [j for j, g in enumerate(per_message) if len(g) < i]
            if missing:
                skipped.append(f"{path.stem}-p{i}: no valid rewrite {i} of user message(s) "
                               f"{[j + 1 for j in missing]}")
                target.unlink(missing_ok=True)
                continue
            story_i = variant(story, path.stem, i, {j: g[i - 1]
                                                     for j, g in enumerate(per_message)})
            text = dump_story(story_i, f"Generated by scripts/paraphrase_stories.py from "
                              f"tests/generalization/{path.name}; do not edit by hand.")
            if tomllib.loads(text) != story_i:
                raise SystemExit(f"{target.name}: the TOML written does not read back")
            target.write_text(text, "utf-8")
            written += 1
        # Save as we go: a long run that stops keeps every answer it paid for.
        CACHE.write_text(json.dumps(cache, ensure_ascii=False, indent=1, sort_keys=True)
                         + "\n", "utf-8")
        print(f"[{n}/{len(stories)}] {path.stem}: {len(emits)} user message(s), "
              f"{gen.calls} calls so far, {time.monotonic() - started:.0f}s", flush=True)
    print(json.dumps({"written": written, "skipped": len(skipped), "llm_calls": gen.calls,
                      "llm_seconds": round(gen.seconds, 1),
                      "wall_seconds": round(time.monotonic() - started, 1)}))
    for line in skipped:
        print("  SKIPPED", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
