"""Implementations of the pipelines' ports and the stores behind them.

SQL, Redis, vectors, embedders, the chat model.
"""
