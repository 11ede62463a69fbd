"""The decision rules of one consolidation run, built once from Settings.

Live consolidation and re-consolidation replay both build their stages from
:meth:`Policy.from_settings`, so the two cannot drift apart (they once did: the replay
forgot the small-talk TTL).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from sleepmem.core.settings import Settings
from sleepmem.pipelines.write.compress import CompressPolicy
from sleepmem.pipelines.write.gate import GatePolicy
from sleepmem.pipelines.write.resolve import ResolvePolicy


@dataclass(frozen=True, slots=True)
class Policy:
    gate: GatePolicy
    resolve: ResolvePolicy
    compress: CompressPolicy

    @classmethod
    def from_settings(cls, settings: Settings, *, extractor: str) -> Policy:
        return cls(
            gate=GatePolicy(min_inference_confidence=settings.min_inference_confidence),
            resolve=ResolvePolicy(
                ttl=settings.ttl,
                session_ttl=timedelta(seconds=settings.session_ttl_s),
                chitchat_ttl=timedelta(seconds=settings.chitchat_ttl_s),
                procedure_min_samples=settings.procedure_min_samples,
                procedure_min_success_rate=settings.procedure_min_success_rate,
                extractor=extractor,
            ),
            compress=CompressPolicy(),
        )

    def for_extractor(self, extractor: str) -> Policy:
        return replace(self, resolve=replace(self.resolve, extractor=extractor))
