"""Versioned pydantic models: results, baselines and reports are public contracts.

Pure data with validation, and the verdict table. Imports nothing of ci_bench (``errors``
aside). Format history: docs/FORMATS.md.
"""
