"""Reporting: markdown, terminal tables and charts rendered from models.

``render`` is pure (strings in, strings out); ``plot`` draws PNGs with matplotlib. May import
``schema`` and ``judge``.
"""
