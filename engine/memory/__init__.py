"""Memory entities: the file format, its merge, and the memory tools on top of the sync core.

The format and what the sync core asks of it during a pass: ``format.py``
parses a memory file, ``frontmatter.py`` and ``merge.py`` merge two sides
three-way (the core's read-merge-write calls :func:`ohsync.engine.merge.choose.merge_memory` for
every memory file), ``check.py`` finds a damaged one, ``stamp.py`` stamps a
person's saved edit before it is pushed.  The tools: ``entity.py`` reads one
file as an entity, ``index.py`` keeps them in SQLite FTS5, ``tools.py``
answers the memory tools over it and plans their writes, ``edit.py`` the
byte edits, ``guard.py`` what a write may contain, ``writes.py`` carries a
write to the server.  The sync core imports only ``merge``, ``check`` and
``stamp`` of this package; ``tests/test_import_rules.py`` checks it.
"""
