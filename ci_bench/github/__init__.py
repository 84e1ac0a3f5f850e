"""GitHub: the Actions event context, the REST client, the comment, outputs, promotion.

Network and the Actions environment at the edge. May import ``schema``, ``report`` and
``store``.
"""
