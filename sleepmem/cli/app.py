"""The ``sleepmem`` command and its groups; commands live in the sibling modules."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="sleepmem",
    no_args_is_help=True,
    add_completion=False,
    help="Long-term memory for LLM agents that does its thinking at sleep time.",
)
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print one JSON object.")
eval_app = typer.Typer(no_args_is_help=True, help="Memory-quality evaluations.")
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")
