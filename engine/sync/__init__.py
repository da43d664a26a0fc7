"""The sync core: one pass of one mirror, from both sides' changes to a plan
and its execution.

* :mod:`.engine` — :class:`~.engine.SyncEngine`, the pass (``sync()``);
* :mod:`.plan` and :mod:`.reconcile` — classifying each side against the
  base, and the reconciliation table that picks the action;
* :mod:`.run` — carrying out plans (transfers, moves, folders, batches);
* :mod:`.dirs` — folders both ways; :mod:`.kind_change` — a file replaced
  by a folder of the same name, or the other way round;
* :mod:`.moves` and :mod:`.folder_moves` — delete + create pairs taken as
  moves, of files and of whole folders;
* :mod:`.deletes`, :mod:`.confirm`, :mod:`.valve`, :mod:`.held_restore` —
  deletes carried carefully: confirmed before destroying, held in bulk by
  the safety valve, undone on request;
* :mod:`.pending` — what a pass found and has not carried yet;
* :mod:`.bulk` and :mod:`.new_files` — a cold mirror's many files at once;
* :mod:`.echoes` — echo suppression for the watcher's paths.

Transfers (``engine/transfer.py``, ``engine/write_path.py``), the remote
scans and the local file system helpers sit beside it in ``engine/``; the
merges and conflicts in ``engine/merge/``.
"""
