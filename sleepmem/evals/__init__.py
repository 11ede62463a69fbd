"""Evaluations: behaviour scenarios and public recall benchmarks."""
