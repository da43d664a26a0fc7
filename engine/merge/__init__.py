"""Merging and conflicts: what happens when both sides changed one file.

* :mod:`.choose` — which merge applies to a path (memory-aware, diff3, none);
* :mod:`.text` — the line-based three-way merge (diff3) of text files;
* :mod:`.resolve` — the conflict resolver (:func:`~.resolve.decide`): what
  stays live, what becomes a conflict copy, for every situation;
* :mod:`.archive` — carrying out the resolver's conflict copy;
* :mod:`.conflict_names` — the names of conflict copies in ``/.conflict/``;
* :mod:`.sfconflict` — Seafile's own ``(SFConflict …)`` files;
* :mod:`.stale` — stale overwrites: other writers' uploads made from a
  version older than ours, merged with our pushes on record;
* :mod:`.settle` — settling a recorded conflict the way the person chose.

The sync core (``engine/sync/engine.py``, ``engine/transfer.py``) calls in here.
"""
