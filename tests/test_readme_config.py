"""The docs' configuration table (docs/REFERENCE.md, once the README's) is the config
model's: every key, and its default.

Like the verdict table (tests/test_verdicts.py), the docs must not drift from the code:
the issue that added this test found `pr-mode` documented as `baseline` while the code
defaulted to `both`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ci_bench.pipeline.config import Config

README = Path(__file__).resolve().parents[1] / "docs" / "REFERENCE.md"


def _defaults(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every key of the config (as spelled in TOML) with its default, nested tables flat."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = prefix + (field.alias or name.replace("_", "-"))
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            out.update(_defaults(type(default), f"{key}."))
        else:
            out[key] = default
    return out


def _table_rows() -> list[tuple[list[str], str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Configuration (`[tool.ci-bench]` in pyproject.toml)", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("key", "---"):
            continue
        rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1]))
    return rows


def _value(text: str) -> Any:
    """A README default as a value: `x` is a string, off / per platform is unset."""
    text = text.strip()
    if text in ("off",) or text.startswith("per platform"):
        return None
    text = text.strip("`")
    if text == "[]":
        return []
    if text in ("true", "false"):
        return text == "true"
    number = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?: s)?", text)
    return float(number[1]) if number else text


def _comparable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bool) or value is None or isinstance(value, list):
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


def test_every_config_key_is_in_the_readme_with_its_default():
    defaults = {k: _comparable(v) for k, v in _defaults(Config).items()}
    documented: dict[str, Any] = {}
    for keys, cell in _table_rows():
        values = [_value(v) for v in re.split(r",\s+(?![^(]*\))", cell)]
        if len(values) == 1:
            values *= len(keys)
        assert len(values) == len(keys), f"README row {keys}: {len(values)} defaults"
        documented.update(zip(keys, values, strict=True))
    assert sorted(documented) == sorted(defaults)
    wrong = {k: (documented[k], defaults[k]) for k in defaults if documented[k] != defaults[k]}
    assert wrong == {}, "README default (left) differs from the config model's (right)"
