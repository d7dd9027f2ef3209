from agentrunner.core.ids import new_id


def test_ids_are_strictly_increasing_and_unique() -> None:
    ids = [new_id("r_") for _ in range(20_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("r_") for i in ids)
