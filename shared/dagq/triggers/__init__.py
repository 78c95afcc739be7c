"""Event triggers: start a workflow when a file or blob lands under a prefix.

``store`` keeps trigger definitions in the store's records (partition ``triggers``),
``fire`` turns one (path, version) into one run with a deterministic workflow id, and
``watcher`` polls local directories for the embedded runtime (``dagq trigger watch``,
``dagq scheduler``). The Function App's Event Grid / Blob triggers live in
``dagq.functions.blob_triggers``. See docs/triggers.md.
"""
