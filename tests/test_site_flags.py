"""What the dashboard says of each flagged point: confirmed, not confirmed, or pending.

The pipeline flags a commit from one PR's measurements; the history after it decides
whether the level really moved. Driven through the real path: generated results ->
history records -> ``build_groups`` -> the page's data.
"""

from __future__ import annotations

from ci_bench.report.history import build_groups, flags_of
from ci_bench.report.site import site_data
from tests.harness.factories import CPU
from tests.harness.history_data import (
    FALSE_ALARM_AT,
    FALSE_ALARM_CASE,
    STEP_AT,
    STEP_CASE,
    sha,
    story,
)


def test_a_step_confirms_its_flag_and_a_false_alarm_stays_unconfirmed():
    (group,) = build_groups(story().records)
    flags = {f.case: f for f in flags_of(group)}
    assert sorted(flags) == sorted([STEP_CASE, FALSE_ALARM_CASE])
    step, alarm = flags[STEP_CASE], flags[FALSE_ALARM_CASE]
    assert (step.status, step.x, step.commit.sha) == ("confirmed", STEP_AT, sha(STEP_AT))
    assert 0.2 < step.change < 0.3  # the injected +25 %
    assert (alarm.status, alarm.x, alarm.change) == ("unconfirmed", FALSE_ALARM_AT, None)
    assert "no level change" in alarm.why


def test_a_flag_on_the_newest_commit_is_pending_not_dismissed():
    (group,) = build_groups(story(commits=STEP_AT + 1).records)
    step = next(f for f in flags_of(group) if f.case == STEP_CASE)
    assert step.status == "pending"
    assert "more commit" in step.why


def test_the_page_lists_every_flag_newest_first_and_says_when_times_are_interpreted():
    data = site_data(
        build_groups(story().records), repo_url="https://github.com/o/k", title="t",
        generated_at="now",
    )  # fmt: skip
    assert [(f["case"], f["status"]) for f in data["flagged"]] == [
        (STEP_CASE, "confirmed"),
        (FALSE_ALARM_CASE, "unconfirmed"),
    ]
    assert data["flagged"][0]["url"] == f"https://github.com/o/k/commit/{sha(STEP_AT)}"
    (group,) = data["groups"]
    assert group["interpreted"] is False
    step = next(c for c in group["cases"] if c["id"] == STEP_CASE)
    assert step["points"][STEP_AT]["flag"]["status"] == "confirmed"
    assert step["points"][STEP_AT - 1]["flag"] is None
    assert 0.005 < step["noise"] < 0.05  # the story's 1.5 % per-commit noise
    (cpu,) = site_data(
        build_groups(story(commits=8, device=CPU).records), repo_url=None, title="t",
        generated_at="now",
    )["groups"]  # fmt: skip
    assert cpu["interpreted"] is True
    assert cpu["platform"] == "cpu"
