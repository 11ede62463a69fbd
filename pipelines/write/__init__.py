"""The write path: what a consolidation pass does with a scope's new raw events, in
data-flow order (``consolidate`` runs them): extract readings, gate, decide against the
current memories (``resolve``), compress, persist, index. Nothing here serves a search;
the read path (``sleepmem.pipelines.read``) is its independent sibling over the shared
modules of ``sleepmem.pipelines``."""
