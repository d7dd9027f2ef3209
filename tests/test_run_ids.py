"""A run found by what a person gives (``run_ids.find_run``): its whole id, its beginning, or
its end as pages show it (``ids.short_id``); several matches name them, none says so."""

from __future__ import annotations

import pytest

from agentrunner.core.ids import new_id, short_id
from agentrunner.errors import AgentRunnerError
from agentrunner.run.run_ids import find_run
from agentrunner.store import Store


def test_the_short_form_is_the_random_end_which_ids_made_together_do_not_share() -> None:
    made = [new_id("run_") for _ in range(2000)]
    shown = [short_id(i) for i in made]
    assert all(i.endswith(s) and len(s) == 6 for i, s in zip(made, shown, strict=True))
    # made in the same few milliseconds, their beginnings are alike; their short forms are not
    assert len({i[:14] for i in made}) < 10
    assert len(set(shown)) > 1990


async def _runs(store: Store, *run_ids: str) -> None:
    await store.threads.open("t", "ceo")
    await store.batch(
        [
            store.runs.insert_op(run_id=run_id, agent_id="ceo", thread_id="t", status="running")
            for run_id in run_ids
        ]
    )


async def test_a_run_is_found_by_its_id_its_beginning_or_its_end(store: Store) -> None:
    first, second = "run_0193aa000000abc123", "run_0193aa000001def456"
    await _runs(store, first, second)
    for given, found in (
        (first, first),
        (second, second),
        ("run_0193aa000000", first),
        ("run_0193aa000001d", second),
        ("abc123", first),
        (short_id(second), second),
        ("1def456", second),
    ):
        assert (await find_run(store, given)).id == found, given


async def test_more_than_one_match_names_them_and_none_says_so(store: Store) -> None:
    ids = [f"run_0193aa00000{n}beef{n}0" for n in range(8)]
    await _runs(store, *ids, "run_0193bb000000cbeef00")
    with pytest.raises(AgentRunnerError) as several:
        await find_run(store, "run_0193aa")  # the beginning of eight
    assert several.value.code == "validation" and "Give more" in (several.value.hint or "")
    assert ids[0] in several.value.message and ids[4] in several.value.message
    assert ids[5] not in several.value.message and several.value.message.endswith(", …")
    with pytest.raises(AgentRunnerError) as both:
        await find_run(store, "beef00")  # the end of two, as pages show ends
    assert both.value.code == "validation"
    assert "run_0193aa000000beef00" in both.value.message
    assert "run_0193bb000000cbeef00" in both.value.message
    # fewer characters of an end than a page shows name no run: a typo must not pick one
    for given in ("ef00", "0", "cdef", "nope", "run_0193cc", ""):
        with pytest.raises(AgentRunnerError) as none:
            await find_run(store, given, kind="job", hint="See the jobs.")
        assert (none.value.code, none.value.message) == ("not_found", f"no job '{given}'")
        assert none.value.hint == "See the jobs."
