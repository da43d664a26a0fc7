"""Drop-folder filing, a feature on top of the sync core.

``filer.py`` is the pipeline (:class:`~.filer.Filer`); ``plan.py`` plans a
job, ``jobs.py`` keeps jobs in ``filing.db``, ``steps.py`` the steps after
the upload, ``rules.py`` the destination rules, ``summary.py`` the sidecar
text, ``journal.py`` the journal line.  ``api.py`` (:class:`~.api.MirrorAPI`)
is all filing may use of the engine; the sync core never imports this
package (``tests/test_import_rules.py`` checks both).
"""
