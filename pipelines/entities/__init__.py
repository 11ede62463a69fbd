"""Entity and relation memory (issue 14), spotted at sleep time.

``spot`` reads names and links out of a statement; ``graph`` turns a batch's memory
versions into entity, alias, mention and relation rows; ``store`` writes them and lets
deletions and status changes reach them. The read side, the entity route, is
``sleepmem.pipelines.read.entities``.
"""
