"""GitHub's REST API as its OpenAPI description has it: traffic checks, and the shapes' home.

``tests/harness/github_server.py`` checks its traffic here with ``openapi-core``, so it cannot
drift from GitHub; it answers with bodies from ``github_shapes`` (re-exported here, with the
description's loading from ``github_spec``). The description's quirks are handled in these
modules, and only there:

* ``x-multi-segment`` parameters (``contents/{path}``, ``git/ref/{ref}``, ...) hold slashes,
  which generic path matching rejects: they are percent-encoded for validation only.
* Statuses any endpoint may answer (401, 403 rate limit, 5xx) are rarely declared per
  operation; when undeclared, the body is checked against ``basic-error`` instead.
* Three schema constructs no real response can satisfy are relaxed narrowly (``github_spec``).
* Requests are validated as if sent to the document's server, ``https://api.github.com``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema.exceptions import best_match
from openapi_core.exceptions import OpenAPIError
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS30Validator
from werkzeug.datastructures import Headers, ImmutableMultiDict

# Re-exported: tests and the fake import these from here.
from tests.harness.github_shapes import (
    ApiError,
    Shapes,
    blob_sha,
    error_body,
    now,
    rate_headers,
)
from tests.harness.github_spec import SPEC_PATH, deref, example, openapi, spec_dict

__all__ = [
    "SPEC_HOST",
    "SPEC_PATH",
    "UNIVERSAL_ERROR_STATUSES",
    "ApiError",
    "RecordedRequest",
    "Shapes",
    "Violation",
    "blob_sha",
    "check_request",
    "check_response",
    "error_body",
    "example",
    "now",
    "rate_headers",
    "spec_dict",
    "validation_path",
]

SPEC_HOST = "https://api.github.com"
# Statuses GitHub may answer on any endpoint although few operations list them.
UNIVERSAL_ERROR_STATUSES = frozenset({401, 403, 429, 500, 502, 503, 504})


@dataclass
class RecordedRequest:
    """One request as the fake received it. ``headers`` has the token redacted."""

    method: str
    path: str
    query: dict[str, list[str]]
    json: Any
    headers: dict[str, str]
    token: str | None = field(default=None, repr=False)
    raw: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class Violation:
    """One disagreement between the fake's traffic and GitHub's description."""

    kind: str  # "request" or "response"
    method: str
    path: str
    status: int | None
    message: str

    def __str__(self) -> str:
        status = f" -> {self.status}" if self.status is not None else ""
        return f"{self.kind}: {self.method} {self.path}{status}: {self.message}"


@functools.cache
def _multi_segment_patterns() -> tuple[re.Pattern[str], ...]:
    """Regexes for paths ending in an ``x-multi-segment`` parameter; group 2 is its value."""
    patterns = []
    for template, item in spec_dict()["paths"].items():
        last = template.rsplit("/", 1)[-1]
        if not (last.startswith("{") and last.endswith("}")):
            continue
        name = last[1:-1]
        params = [
            deref(spec_dict(), p)
            for op in item.values()
            if isinstance(op, dict)
            for p in op.get("parameters", [])
        ]
        if any(p.get("name") == name and p.get("x-multi-segment") for p in params):
            prefix = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template.rsplit("/", 1)[0]))
            patterns.append(re.compile(f"^({prefix}/)(.+)$"))
    return tuple(patterns)


def validation_path(path: str) -> str:
    """``path`` with slashes inside a multi-segment parameter percent-encoded."""
    for pattern in _multi_segment_patterns():
        match = pattern.match(path)
        if match:
            return match.group(1) + match.group(2).replace("/", "%2F")
    return path


def _describe(error: Exception) -> str:
    """A short message: the error's kind, then each schema error at its JSON location."""
    schema_errors = list(getattr(error.__cause__, "schema_errors", None) or [])
    if not schema_errors:
        return str(error)[:300]
    parts = [type(error).__name__]
    for item in schema_errors:
        where = "/".join(str(p) for p in item.path) or "<root>"
        message = item.message if len(item.message) <= 160 else f"fails {item.validator!r}"
        if item.context:  # oneOf/anyOf: say why the closest alternative failed
            closest = best_match(item.context)
            message += f" ({'/'.join(map(str, closest.path))}: {closest.message[:160]})"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _content_type(headers: dict[str, str]) -> str:
    """The media type without parameters; JSON when absent (as for bodiless requests)."""
    for key, value in headers.items():
        if key.lower() == "content-type":
            return value.split(";")[0].strip()
    return "application/json"


def _mock_request(request: RecordedRequest) -> MockRequest:
    mock = MockRequest(SPEC_HOST, request.method, validation_path(request.path))
    mock.body, mock.content_type = request.raw, _content_type(request.headers)
    args = [(key, value) for key, values in request.query.items() for value in values]
    mock.parameters.query = ImmutableMultiDict(args)  # keeps repeated keys
    mock.parameters.header = Headers(request.headers)
    return mock


def check_request(request: RecordedRequest) -> list[Violation]:
    """Violations of the description by one incoming request (empty when it conforms)."""
    try:
        openapi().validate_request(_mock_request(request))
    except OpenAPIError as error:
        return [Violation("request", request.method, request.path, None, _describe(error))]
    return []


def check_response(
    request: RecordedRequest, status: int, headers: dict[str, str], body: bytes, base: str
) -> list[Violation]:
    """Violations of the description by the response the fake is about to send.

    Also flags ``*url`` fields that are not on ``base``: PyGithub refuses to follow those.
    """
    data = json.loads(body or b"null")
    messages = [f"not on {base}: {url}" for url in _foreign_urls(data, base)]
    response = MockResponse(body, status, headers, _content_type(headers))
    try:
        openapi().validate_response(_mock_request(request), response)
    except (PathNotFound, OperationNotFound):
        pass  # already reported for the request: no operation to check against
    except ResponseNotFound as error:
        if status not in UNIVERSAL_ERROR_STATUSES:
            messages.append(_describe(error))
        else:
            schema = spec_dict()["components"]["schemas"]["basic-error"]
            messages += [
                f"basic-error: {e.message}" for e in OAS30Validator(schema).iter_errors(data)
            ]
    except OpenAPIError as error:
        messages.append(_describe(error))
    return [Violation("response", request.method, request.path, status, m) for m in messages]


def _foreign_urls(node: Any, base: str, key: str = "") -> list[str]:
    if isinstance(node, dict):
        return [url for k, v in node.items() for url in _foreign_urls(v, base, k)]
    if isinstance(node, list):
        return [url for v in node for url in _foreign_urls(v, base, key)]
    named = key.endswith("url") and key != "documentation_url"
    if named and isinstance(node, str) and node.startswith("http") and not node.startswith(base):
        return [f"{key}={node}"]
    return []
