"""The test harness: what the tests drive the deployed thing with, not tests themselves.

The workflow runner (``workflow_runner`` and its pieces) runs ``.github/`` as GitHub would,
the GitHub fake (``github_server``, checked against GitHub's OpenAPI description) answers
it, the fuzzers (``fuzz*``) make and judge hostile inputs, and the factories build
results files. Its own tests are the ``test_*.py`` files beside it.
"""
