"""``python -m sleepmem``: the same command line as ``sleepmem``, for environments whose
scripts directory is not on PATH."""

from sleepmem.cli import main

main()
