"""Entity and relation memory (issue 14): spotted at sleep time, read by the entity route.

``spot`` reads names and links out of a statement; ``graph`` turns a batch's memory
versions into entity, alias, mention and relation rows; ``store`` writes them and lets
deletions and status changes reach them; ``route`` is the read side.
"""

from sleepmem.pipelines.entities.route import entity_route, people_named

__all__ = ["entity_route", "people_named"]
