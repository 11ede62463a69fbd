"""sleepmem: long-term memory for LLM agents that does its thinking at sleep time."""

from sleepmem.core.errors import SleepmemError, ValidationError

__all__ = ["SleepmemError", "ValidationError"]
__version__ = "0.1.0"
