"""GitHub's OpenAPI description, loaded once and relaxed where no real response can satisfy it.

The description is ``tests/openapi/openapi-trimmed.json`` (provenance in its README): GitHub's
official OpenAPI 3.0.3 document, trimmed. ``github_openapi`` validates traffic against it and
``github_shapes`` builds response bodies from its examples.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from openapi_core import Config, OpenAPI

SPEC_PATH = Path(__file__).resolve().parents[1] / "openapi" / "openapi-trimmed.json"


@functools.cache
def spec_dict() -> dict[str, Any]:
    """The parsed description; read once per test session since it is half a megabyte."""
    spec = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    _normalize(spec, spec)
    return spec


def _normalize(spec: dict[str, Any], node: Any) -> None:
    """Relax three constructs of GitHub's description that no real response can satisfy.

    * ``nullable`` with an ``enum`` lacking ``null`` (``issue.state_reason``): GitHub sends
      ``null``, which strict OpenAPI 3.0.3 rejects; ``null`` joins the enum.
    * ``oneOf`` of objects, one accepting any object (``basic-error`` beside
      ``repository-rule-violation-error`` on a 409): every body matches both, so "exactly
      one" always fails; it becomes ``anyOf``.
    * A ``discriminator`` mapping to an array schema (a ``contents/{path}`` directory is a
      JSON array, with no ``type`` property): dropped; the plain ``oneOf`` still decides.
    """
    if isinstance(node, list):
        for value in node:
            _normalize(spec, value)
        return
    if not isinstance(node, dict):
        return
    enum = node.get("enum")
    if node.get("nullable") is True and isinstance(enum, list) and None not in enum:
        enum.append(None)
    alternatives = [deref(spec, alt) for alt in node.get("oneOf", [])]
    objects = [alt for alt in alternatives if alt.get("type") == "object"]
    if len(objects) > 1 and any(map(_accepts_any_object, objects)) and "discriminator" not in node:
        node["anyOf"] = node.pop("oneOf")
    mapping = node.get("discriminator", {}).get("mapping", {})
    if any(deref(spec, {"$ref": ref}).get("type") == "array" for ref in mapping.values()):
        del node["discriminator"]
    for value in node.values():
        _normalize(spec, value)


def _accepts_any_object(schema: dict[str, Any]) -> bool:
    return (
        schema.get("type") == "object"
        and not schema.get("required")
        and schema.get("additionalProperties", True) is not False
    )


def deref(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` itself, or the schema its ``$ref`` points at."""
    ref = node.get("$ref")
    if ref is None:
        return node
    target: Any = spec
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return target


@functools.cache
def openapi() -> OpenAPI:
    """The validator, built once per test session."""
    # The document is GitHub's published one; re-validating it would only cost time.
    return OpenAPI.from_dict(spec_dict(), config=Config(spec_validator_cls=None))


def example(name: str) -> Any:
    """A fresh copy of ``components/examples/{name}``: GitHub's own sample of a response."""
    return copy.deepcopy(spec_dict()["components"]["examples"][name]["value"])
