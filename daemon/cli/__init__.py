"""The ``ohsync`` command line.

``main.py`` builds the parser from the commands (:func:`~.main.build_parser`)
and turns errors into exit codes (:func:`~.main.main`, the console script);
each other module is one command or family (``login.py``, ``run.py``,
``status.py``, ``requests.py`` for the plain socket requests, …), and
``common.py`` is what they share.  ``python -m ohsync.daemon.cli`` runs it
(``__main__.py``).
"""
