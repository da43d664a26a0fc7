"""The ``ohsync`` command line.

Each module but ``main.py`` and ``common.py`` is one command or family
(``login.py``, ``run.py``, ``status.py``, ``requests.py`` for the plain
socket requests, …) with one ``register(subparsers) -> None``;
``main.py`` lists them in order (:data:`~.main.COMMANDS`), builds the parser
from that list (:func:`~.main.build_parser`) and turns errors into exit
codes (:func:`~.main.main`, the console script); ``common.py`` is what they
share.  ``python -m ohsync.daemon.cli`` runs it (``__main__.py``).
"""
