"""ohsync's local page: a web page served by the daemon on 127.0.0.1 only.

``server.py`` (werkzeug's threaded server on one thread the daemon owns),
``auth.py`` (the secret, the session cookie, Host and Origin rules),
``routes.py`` (the pages and the JSON API over the socket's method table),
``events.py`` (the daemon's events as server-sent events), ``diff.py``
(side-by-side differences), ``static/`` (the page's HTML, CSS and
JavaScript, written for it; no build step).  docs/architecture.md §6.4.
"""
