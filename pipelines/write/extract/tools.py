"""Tool output: a trusted profile's fields as facts (named in any language), every other
result as one episode summarised from its JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sleepmem.pipelines.text import (
    IMPERATIVE_START,
    INSTRUCTION,
    first_person_en,
    first_person_zh,
    is_zh,
    norm_value,
    singular,
    split_sentences,
)
from sleepmem.pipelines.types import (
    TOOL_PREFIX,
    Candidate,
)
from sleepmem.pipelines.vocab import (
    ATTR_SYNONYMS,
    REDACTED,
    SECRET_WORDS,
)
from sleepmem.pipelines.write.extract.sentences import as_event, read_statements
from sleepmem.pipelines.write.extract.slots import (
    Slot,
    type_of,
)
from sleepmem.pipelines.write.extract.turns import PATH_MARKS, Speaker, Turn, dialled, truthy

_PROFILE_KEYS = {k: v for k, v in ATTR_SYNONYMS.items() if "_" in k or " " not in k}


_PROFILE_LABEL = {"address": "address", "billing_address": "billing address",
                  "residence": "city of residence", "employer": "employer",
                  "occupation": "job title", "name": "name", "email": "email",
                  "phone": "phone number", "birthday": "birthday", "timezone": "timezone",
                  "age": "age", "nationality": "nationality", "hometown": "hometown",
                  "native_language": "native language", "diet": "diet",
                  "gender": "gender", "pronouns": "pronouns", "nickname": "nickname"}


_USER_KEYS = ("user", "user_id", "userid", "customer_id", "uid")



def tool_candidates(turn: Turn) -> list[Candidate]:
    content = turn.event.content.strip()
    if not content:
        return []
    data = _json(content)
    if data is not None:
        trusted = turn.speaker.trusted_tool or _json_verified(data)
        facts: list[Candidate] = []
        if trusted:
            sp = turn.speaker
            turn.speaker = Speaker(sp.source, "high", sp.confidence if sp.trusted_tool else 1.0,
                                   False, from_tool=True, trusted_tool=True, prefix=sp.prefix)
            facts = _profile_facts(turn, data)
        if facts:
            return facts
        summary = _json_summary(data)
        return [as_event(turn, summary, importance=0.2)] if summary else []
    kept: list[str] = []
    for sentence in split_sentences(content):
        if INSTRUCTION.search(sentence) or IMPERATIVE_START.starts(sentence, lstrip=True):
            continue
        if REDACTED.search(sentence) and len(REDACTED.sub("", sentence).split()) <= 3:
            continue
        kept.append(sentence)
    text = " ".join(kept).strip()
    if not text:
        return []
    dropped = len(kept) < len(split_sentences(content))
    if turn.speaker.trusted_tool:
        # Trusted tool text about "the customer" is read like an observation: same
        # matchers, first person; the gate lets it through because the tool is trusted.
        rewrite: Callable[[str], str] = first_person_zh if is_zh(text) else first_person_en
        found = [c for c in read_statements(turn, text, rewrite=rewrite) if c.type != "event"]
        return [*found, as_event(turn, text, importance=0.3)]
    cand = as_event(turn, text, importance=0.3)
    if dropped:
        cand.details["instructions_dropped"] = True
    return [cand]



def _json(content: str) -> Any:
    if not content.startswith(("{", "[")):
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None



def _json_verified(data: Any) -> bool:
    if isinstance(data, dict):
        if truthy(data.get("verified")) or truthy(data.get("trusted")):
            return True
        return any(_json_verified(v) for v in data.values() if isinstance(v, dict | list))
    if isinstance(data, list):
        return any(_json_verified(v) for v in data[:20])
    return False



def _flat_value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(_flat_value(v) for v in value.values() if v not in (None, ""))
    if isinstance(value, list):
        return ", ".join(_flat_value(v) for v in value if v not in (None, ""))
    return str(value).strip()



def _profile_facts(turn: Turn, data: Any, depth: int = 0, path: str = "") -> list[Candidate]:
    """Every scalar field of trusted JSON as a candidate fact (DESIGN: trusted tool output).

    Fields the vocabulary knows (address, email, …) fill the same slot as the user's own
    words; every other scalar gets its key path as an open attribute (``tool:<path>``,
    see sleepmem.pipelines.types), so a trusted source that disagrees with the user on
    any field can form a conflict set. Envelope fields (ids, timestamps, trust markers)
    and anything secret are skipped.
    """
    if depth > 4:
        return []
    out: list[Candidate] = []
    if isinstance(data, list):
        for i, item in enumerate(data[:20]):
            out.extend(_profile_facts(turn, item, depth + 1, f"{path}.{i}" if path else str(i)))
        return out
    if not isinstance(data, dict):
        return out
    owner = next((str(data[k]) for k in _USER_KEYS if k in data and isinstance(data[k], str)),
                 None)
    if owner is not None and turn.event.scope.user and owner != turn.event.scope.user:
        return out  # a profile of somebody else
    source = turn.speaker.prefix.removeprefix("Tool").strip(" ()") or "a tool"
    for key, value in data.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(value, dict) and key.lower() not in _PROFILE_KEYS:
            out.extend(_profile_facts(turn, value, depth + 1, here))
            continue
        attr = _PROFILE_KEYS.get(key.lower())
        if attr is None and key.lower() == "allergies" and isinstance(value, list):
            for item in value:
                allergen = singular(norm_value(str(item)))
                out.append(turn.candidate(
                    Slot(type="identity", attribute=f"allergy:{allergen}", value=allergen,
                         head="", importance=0.95),
                    f"The user is allergic to {item} (according to {source}).",
                ))
            continue
        if attr is None:
            if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
                out.extend(_profile_facts(turn, value, depth + 1, here))
            elif (fact := _tool_field(turn, here, key, value, source, root=not path)):
                out.append(fact)
            continue
        if value in (None, "", [], {}):
            continue
        text = _flat_value(value)
        if not text or REDACTED.search(text) or SECRET_WORDS.search(key):
            continue
        label = "shipping address" if "shipping" in key.lower() or "delivery" in key.lower() \
            else _PROFILE_LABEL.get(attr, attr)
        norm = dialled(text) if attr == "phone" else norm_value(text)
        if attr == "residence":
            statement = f"The user lives in {text} (according to {source})."
        else:
            statement = f"The user's {label} is {text} (according to {source})."
        out.append(turn.candidate(
            Slot(type=type_of(attr), attribute=attr, value=norm, head="", importance=0.6,
                 details={"tool_key": key}),
            statement,
        ))
    return out


# Envelope fields of a tool reply: about the call, not about the user.
_ENVELOPE_KEYS = frozenset({"ok", "success", "error", "code", "id", "request_id", "ts",
                            "timestamp", "verified", "trusted", "auth", "etag", "version",
                            "took_ms", "latency_ms", "page", "next", "cursor"})



def _tool_field(turn: Turn, path: str, key: str, value: Any, source: str, *,
                root: bool) -> Candidate | None:
    """One scalar (or list of scalars) field of trusted JSON as a ``tool:<path>`` fact."""
    low = key.lower()
    if low in _ENVELOPE_KEYS or low in _USER_KEYS or low.endswith("_id") or (
            root and low == "status") or SECRET_WORDS.search(low.replace("_", " ")):
        return None
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int | float | str):
        text = str(value).strip()
    elif isinstance(value, list) and value and all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        text = ", ".join(str(v).strip() for v in value[:20])
    else:
        return None
    if not text or len(text) > 300 or REDACTED.search(text) or INSTRUCTION.search(text):
        return None
    label = " ".join(
        w for w in path.translate(PATH_MARKS).split() if w and not w.isdigit()
    ).lower() or low
    # "renews on is 2026-12-01" reads badly: a label ending in a verb or preposition
    # takes a colon instead of "is".
    verb = ": " if _LABEL_NO_IS.search(label) else " is "
    return turn.candidate(
        Slot(type="fact", attribute=f"{TOOL_PREFIX}{path}", value=norm_value(text), head="",
             importance=0.5, details={"tool_key": path}),
        f"The user's {label}{verb}{text} (according to {source}).",
    )


_LABEL_NO_IS = re.compile(r"(?i)\b(?:on|at|in|by|to|for|of|from|until|is|are|has|have|was|"
                          r"ed|s)$|\w+(?:ed|s)$")


_BORING_KEYS = frozenset({"status", "ok", "success", "code", "id", "request_id", "ts",
                          "timestamp", "auth", "token", "error"})



def _json_summary(data: Any) -> str:
    leaves: list[str] = []

    def walk(node: Any, path: str, depth: int) -> None:
        if len(leaves) >= 12 or depth > 4:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(node, list):
            for v in node[:5]:
                walk(v, path, depth + 1)
        elif node not in (None, ""):
            text = str(node)
            key = path.rsplit(".", 1)[-1].lower()
            if REDACTED.search(text) or SECRET_WORDS.search(key) or INSTRUCTION.search(text):
                return
            if key in _BORING_KEYS:
                return
            leaves.append(f"{path}: {text[:200]}")

    walk(data, "", 0)
    return "; ".join(leaves)
