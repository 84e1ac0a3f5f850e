"""One table of timers (ci_bench.schema.timers): every place that names a timer derives from
it, so adding a timer is one entry there and one function in ci_bench.measure.timers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ci_bench.measure.timers import TIMERS, strategy
from ci_bench.pipeline.config import Config
from ci_bench.schema.results import RunSettings
from ci_bench.schema.timers import TIMER_NAMES
from tests.conftest import run_cli

SETTINGS = {"warmup": 1, "repeats": 1, "seed": 0, "interpret": True}


def test_every_timer_in_the_table_has_its_strategy_and_no_other() -> None:
    assert tuple(TIMERS) == TIMER_NAMES == ("wallclock", "profiler")


def test_a_strategy_outside_the_table_is_refused() -> None:
    def cupti(*args: object, **kwargs: object) -> None: ...

    with pytest.raises(ValueError, match="cupti is not in the timer table"):
        strategy(cupti)  # type: ignore[arg-type]
    assert "cupti" not in TIMERS


@pytest.mark.parametrize("name", TIMER_NAMES)
def test_results_and_config_take_every_timer_of_the_table(name: str) -> None:
    assert RunSettings.model_validate({**SETTINGS, "timer": name}).timer == name
    assert Config.model_validate({"timer": name}, strict=True).timer == name


def test_results_and_config_refuse_a_timer_outside_the_table() -> None:
    with pytest.raises(ValidationError, match="'wallclock' or 'profiler'"):
        RunSettings.model_validate({**SETTINGS, "timer": "cupti"})
    with pytest.raises(ValidationError, match="'wallclock' or 'profiler'"):
        Config.model_validate({"timer": "cupti"}, strict=True)


def test_the_timer_flag_offers_the_tables_timers(tmp_path: Path) -> None:
    done = run_cli("run", "--timer", "cupti", cwd=tmp_path)
    assert done.returncode == 2
    assert "invalid choice: 'cupti'" in done.stderr
    for name in TIMER_NAMES:
        assert repr(name) in done.stderr
