"""Write gate: what may never become long-term memory (README rule 1).

Secrets are redacted before events reach disk; the gate is the second line, and it
decides promotion: low-confidence inferences, one-off instructions and instructions
planted in tool output do not become lasting memories.
"""

from __future__ import annotations

from dataclasses import dataclass

from sleepmem.pipelines.types import Candidate, Rejection

STRUCTURED_TYPES = frozenset({"identity", "preference", "fact", "procedure"})
# A redaction marker left in a statement means the statement was about a secret: keep the
# harmless rest only as an episode, never as a structured fact whose value is the secret.
def _redacted(text: str) -> bool:
    """Whether the text holds a redaction mark ("[REDACTED:api_key]")."""
    at = text.find("[REDACTED:")
    while at >= 0:
        end = text.find("]", at + 10)
        kind = text[at + 10:end] if end >= 0 else ""
        if kind and all("a" <= c <= "z" or c == "_" for c in kind):
            return True
        at = text.find("[REDACTED:", at + 1)
    return False


@dataclass(frozen=True, slots=True)
class GatePolicy:
    min_inference_confidence: float = 0.6


def gate(
    candidates: list[Candidate], *, policy: GatePolicy
) -> tuple[list[Candidate], list[Rejection]]:
    kept: list[Candidate] = []
    rejected: list[Rejection] = []
    for cand in candidates:
        reason = _refusal(cand, policy)
        if reason is None:
            kept.append(cand)
        else:
            rejected.append(Rejection(cand, reason))
    return kept, rejected


def _refusal(cand: Candidate, policy: GatePolicy) -> str | None:
    if not cand.scope.tenant:
        return "no scope"
    if not cand.statement.strip() and cand.forget_topic is None:
        return "empty statement"
    if cand.inferred and cand.confidence < policy.min_inference_confidence:
        return f"inference below confidence {policy.min_inference_confidence}"
    trusted_tool = bool(cand.details.get("trusted_tool"))
    if cand.from_tool and cand.type in STRUCTURED_TYPES and not trusted_tool:
        return "untrusted tool output cannot become identity, preference, fact or rule"
    if cand.from_tool and cand.type == "procedure" and cand.source != "system":
        return "tool output cannot write procedures"
    if cand.type in STRUCTURED_TYPES and _redacted(cand.value):
        return "slot value is a secret"
    if cand.type in STRUCTURED_TYPES and _redacted(cand.statement):
        # Whatever either extractor derived from a sentence that carried a secret is a guess
        # about the secret ("Tech stack — backend: AWS" from an AWS key), not a fact.
        return "structured statement derived from a secret-bearing sentence"
    if cand.one_off and not cand.scope.session:
        # A one-off instruction without a session has nowhere short-lived to go.
        return "one-off instruction outside a session"
    return None
