"""Reporting: markdown, terminal tables and charts rendered from models.

``render`` is pure (strings in, strings out); ``plot`` draws PNGs with matplotlib from
values (the device's peaks are passed in) and writes them through the store. May import
``schema`` and ``judge``; never ``measure`` (checked by ``lint-imports``).
"""
