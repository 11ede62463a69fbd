"""Extractors: raw events to candidate memories (rules offline, or an LLM)."""
