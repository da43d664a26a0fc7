"""``python -m ohsync.daemon.cli``: the ``ohsync`` command (how the tray and tests start the daemon)."""

from .main import main

main()
