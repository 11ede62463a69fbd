"""The read path: a search's routes (dense, lexical, sentence, speaker, time, entity),
their fusion, ranking and the cards and lines it returns (``retrieve`` runs them).
Nothing here changes a memory; the write path (``sleepmem.pipelines.write``) is its
independent sibling over the shared modules of ``sleepmem.pipelines``."""
