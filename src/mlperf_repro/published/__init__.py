"""Readers of what a submitter published beside its results: LoadGen conf files, the serving
setup its harness configs state, and the facts in its setup scripts. Shared by ``import``
(which turns them into a config) and ``compare`` (which diffs them key by key)."""
