"""Storage: results and baseline files, merge of shards, promotion planning.

File I/O (atomic writes, bounded reads) lives here. May import ``schema``; never
``contract``, ``judge`` or ``measure`` (checked by ``lint-imports``).
"""
