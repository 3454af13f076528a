"""Packaging: the official v6.0 submission tree and a byte-reproducible tarball."""
