"""Storage backends; ``open_backend`` builds one from a ``DAGQ_STORE`` URL.

``sqlite:PATH`` opens the embedded SQLite store (``sqlite:///abs/path`` also works);
``azure://ACCOUNT/PREFIX`` opens the Azure adapters (imported only when asked for). The
schemes and their openers are listed in ``dagq.backends.registry``.
"""

from dagq.backends.registry import BackendOptions, open_backend

__all__ = ["BackendOptions", "open_backend"]
