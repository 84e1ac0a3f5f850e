"""The run-time tuned-config reader (``ci_bench.spec.tuned_config``): every bad file is a
one-line SpecError, and a value a kernel must not get is refused as ``check-spec`` refuses
it (both ask ``contract.tuned.config_problem``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ci_bench.contract.spec import SpecError, case_id
from ci_bench.contract.tunables import Tunables, divides
from ci_bench.contract.tuned import config_problem
from ci_bench.spec import tuned_config

PARAMS = {"M": 256}
DEFAULT = {"block": 128, "order": "mk", "fused": True}
CASE = case_id("k", PARAMS, "float32", "forward")
TUNABLES = Tunables(
    space={"block": (128, 256), "order": ("mk", "km"), "fused": (True, False)},
    default=DEFAULT,
    build=lambda config: config,
    constraints=(divides("block", "M"),),
)


def _file(folder: Path, text: str) -> Path:
    path = folder / "k_v0.1.0.tuned.v5e.json"
    path.write_text(text, encoding="utf-8")
    return path


def _write(folder: Path, cases: Any) -> None:
    _file(folder, json.dumps({"format": "ci-bench-tuned", "schema_version": 1, "cases": cases}))


def _read(folder: Path, tunables: Tunables | None = None) -> Any:
    return tuned_config(
        "k", "0.1.0", PARAMS, "float32", directory=folder, default=DEFAULT, chip="v5e",
        tunables=tunables,
    )  # fmt: skip


def _refusal(folder: Path, tunables: Tunables | None = None) -> str:
    with pytest.raises(SpecError) as refused:
        _read(folder, tunables)
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith(str(folder / "k_v0.1.0.tuned.v5e.json"))
    return text


def test_a_good_entry_gives_its_values_and_other_cases_the_default(tmp_path: Path) -> None:
    config = {"block": 256, "order": "km", "fused": False}
    _write(tmp_path, {CASE: {"config": config}})
    assert _read(tmp_path) == config
    other = tuned_config(
        "k", "0.1.0", {"M": 512}, "float32", directory=tmp_path, default=DEFAULT, chip="v5e"
    )
    assert other == DEFAULT
    assert _read(tmp_path, TUNABLES) == config


def test_a_deeply_nested_file_is_a_one_line_error_not_a_recursion_error(tmp_path: Path) -> None:
    _file(tmp_path, "[" * 200_000 + "]" * 200_000)
    assert "nested too deeply" in _refusal(tmp_path)
    (tmp_path / "cases").mkdir()
    _file(tmp_path / "cases", '{"format": "ci-bench-tuned", "cases": ' + "[" * 200_000)
    assert "not a tuned-configs file" in _refusal(tmp_path / "cases")


def test_an_integer_too_long_to_read_is_a_one_line_error(tmp_path: Path) -> None:
    _file(tmp_path, '{"format": "ci-bench-tuned", "x": ' + "9" * 6000 + "}")
    assert "not a tuned-configs file: ValueError" in _refusal(tmp_path)


@pytest.mark.parametrize(
    ("cases", "says"),
    [
        ([], "'cases' must be an object"),
        ({CASE: []}, f"the entry of {CASE} has no config"),
        ({CASE: {"config": None}}, f"the entry of {CASE} has no config"),
        ({CASE: {"config": [128, "mk", True]}}, "config is list, not an object"),
        ({CASE: {"config": {"block": 256}}}, "config names ['block'], the tunables"),
    ],
    ids=["cases-list", "entry-list", "config-null", "config-list", "names"],
)
def test_wrong_types_in_the_file_are_refused(tmp_path: Path, cases: Any, says: str) -> None:
    _write(tmp_path, cases)
    assert says in _refusal(tmp_path)


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ('"x"', "config block='x' is a str; its default 128 a int"),
        ("NaN", "config block=nan is not an int, str or bool"),
        ("Infinity", "config block=inf is not an int, str or bool"),
        ("-Infinity", "config block=-inf is not an int, str or bool"),
        ("1e400", "config block=inf is not an int, str or bool"),
        ("256.0", "config block=256.0 is not an int, str or bool"),
        ("null", "config block=None is not an int, str or bool"),
        ("[]", "config block=[] is not an int, str or bool"),
        ("{}", "config block={} is not an int, str or bool"),
        ("true", "config block=True is a bool; its default 128 a int"),
    ],
    ids=["str", "nan", "inf", "-inf", "overflow", "float", "none", "list", "object", "bool"],
)
def test_a_value_no_kernel_should_get_is_refused(tmp_path: Path, block: str, says: str) -> None:
    _write(tmp_path, {CASE: {"config": {"block": "@", "order": "mk", "fused": True}}})
    path = tmp_path / "k_v0.1.0.tuned.v5e.json"
    path.write_text(path.read_text().replace('"@"', block))  # JSON's NaN, 1e400, ...
    assert _refusal(tmp_path).endswith(f"{CASE}: {says}")


def test_with_the_specs_tunables_a_zero_is_refused_as_check_spec_refuses_it(
    tmp_path: Path,
) -> None:
    config = {"block": 0, "order": "mk", "fused": True}
    _write(tmp_path, {CASE: {"config": config}})
    why = config_problem(config, TUNABLES.default, TUNABLES, PARAMS)
    assert why is not None
    assert why.startswith("config constraint block | M raised")
    assert _refusal(tmp_path, TUNABLES).endswith(f"{CASE}: {why}")
    # 384 does not divide M=256: the constraint's own words, as check-spec prints them.
    assert config_problem({**config, "block": 384}, DEFAULT, TUNABLES, PARAMS) == (
        "config breaks block | M (M=256)"
    )


def test_a_wrong_format_or_version_is_refused(tmp_path: Path) -> None:
    _file(tmp_path, json.dumps({"format": "other"}))
    assert "format 'ci-bench-tuned' expected" in _refusal(tmp_path)
    (tmp_path / "v2").mkdir()
    _file(tmp_path / "v2", json.dumps({"format": "ci-bench-tuned", "schema_version": 2}))
    assert "tuned configs version 2" in _refusal(tmp_path / "v2")


def test_traced_as_a_chip_a_kernel_reads_that_chips_tuned_config(tmp_path: Path) -> None:
    """``analyze`` and ``lower`` trace each target chip *as* that chip: a kernel reading its
    tuned config gets the v5e file's entry when modelled for a v5e and the default for a
    chip without a file, as it would running on each; off a TPU, outside such a trace,
    there is no chip (the default)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from ci_bench.contract.spec import Case
    from ci_bench.measure.chip import this_chip
    from ci_bench.measure.model import analyze_case
    from ci_bench.measure.model.aschip import as_chip
    from tests.harness.factories import adhoc_spec

    assert this_chip() is None
    with as_chip("v5e"):
        assert this_chip() == "v5e"
        with as_chip("v6e"):
            assert this_chip() == "v6e"
    assert this_chip() is None

    (tmp_path / "copy_v0.1.0.tuned.v5e.json").write_text(
        json.dumps(
            {
                "format": "ci-bench-tuned",
                "schema_version": 1,
                "cases": {"copy/N1/float32": {"config": {"rows": 512}}},
            }
        )
    )

    def copy(x: jax.Array) -> jax.Array:
        """A copy in blocks of the tuned number of rows (default 128)."""
        rows = tuned_config(
            "copy", "0.1.0", {"N": 1}, "float32", directory=tmp_path, default={"rows": 128}
        )["rows"]
        block = pl.BlockSpec((rows, 128), lambda i: (i, 0))

        def body(x_ref: Any, o_ref: Any) -> None:
            o_ref[...] = x_ref[...]

        return pl.pallas_call(
            body, grid=(x.shape[0] // rows,), in_specs=[block], out_specs=block,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)  # fmt: skip

    spec = adhoc_spec(copy, lambda case, key: (jnp.zeros((2048, 128), jnp.float32),), name="copy")
    model = analyze_case(spec, Case("copy", {"N": 1}, "float32"), ["v4", "v5e", "v6e"])
    # Two buffers of the input block and two of the output's: 512 rows on the v5e, 128 else.
    vmem = {name: chip.vmem_bytes for name, chip in model.chips.items()}
    assert vmem == {"v4": 4 * 128 * 512, "v5e": 4 * 512 * 512, "v6e": 4 * 128 * 512}


def test_traced_as_a_chip_a_broken_tuned_file_is_a_one_line_not_modelled(tmp_path: Path) -> None:
    """A host without a TPU now reads a chip's tuned file when it models that chip, so a bad
    file someone committed surfaces there (the pull request's ``lower``/``analyze`` job), as
    one line naming the file, before any TPU run."""
    import jax
    import jax.numpy as jnp

    from ci_bench.contract.spec import Case
    from ci_bench.measure.model import analyze_case
    from tests.harness.factories import adhoc_spec

    (tmp_path / "copy_v0.1.0.tuned.v5e.json").write_text("{not json")

    def copy(x: jax.Array) -> jax.Array:
        tuned_config("copy", "0.1.0", {"N": 1}, "float32", directory=tmp_path, default={})
        return x

    spec = adhoc_spec(copy, lambda case, key: (jnp.zeros((8, 128), jnp.float32),), name="copy")
    model = analyze_case(spec, Case("copy", {"N": 1}, "float32"), ["v5e"])
    assert model.status != "ok"
    assert model.reason is not None
    assert "\n" not in model.reason
    assert str(tmp_path / "copy_v0.1.0.tuned.v5e.json") in model.reason
    assert "not a tuned-configs file" in model.reason
