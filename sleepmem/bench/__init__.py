"""Micro-benchmarks of sleepmem components, runnable as modules."""
