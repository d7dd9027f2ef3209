"""The dashboard's pages in a real browser, against `agentrunner serve` with the mock provider:
a person posts in a channel and sees the agent work and reply without a reload; a run's tool call
on its page; a background job stopped from its page; costs, threads; and every page read with
JavaScript off."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from agentrunner.core.ids import short_id
from agentrunner.testing import MockProvider, Reply
from tests.browser.conftest import Served, accessible, fits


def _wait_for(check: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_post_in_a_channel_is_answered_live_without_a_reload(
    serve: Callable[..., Served],
    page: Any,
    phone: Any,
    shoot: Callable[..., Path],
    mock: MockProvider,
) -> None:
    served = serve()
    page.goto(served.url + "/ui/channels")
    page.get_by_role("link", name=re.compile("general")).click()
    expect(page).to_have_url(served.url + "/ui/channels/general")
    expect(page.get_by_role("heading", level=1)).to_contain_text("general")
    accessible(page)
    marker = page.evaluate("window.marker = Math.random()")  # gone if the page reloads

    # Two posts, two different answers: each reply arrives under its own post, live.
    for question, answer in [
        ("What should we build next?", "A dashboard for the team."),
        ("And after that?", "Faster event delivery."),
    ]:
        mock.queue(Reply(text=answer, delay_s=1.5), model="gpt-mock")
        box = page.get_by_role("textbox", name="Message")
        box.fill(question)
        page.get_by_role("button", name="Send").click()
        expect(box).to_have_value("")  # the form was cleared
        messages = page.locator("#messages li.message")
        expect(messages.filter(has_text=question)).to_have_count(1)  # once, not twice
        expect(page.locator("#working")).to_contain_text("ceo is working")
        expect(messages.filter(has_text=answer)).to_have_count(1, timeout=20_000)
        expect(page.locator("#working")).not_to_contain_text("ceo is working")
        assert messages.last.inner_text().count(answer) == 1
    assert page.evaluate("window.marker") == marker  # no reload happened
    texts = page.locator("#messages li.message .body").all_inner_texts()
    assert texts[-4:] == [
        "What should we build next?",
        "A dashboard for the team.",
        "And after that?",
        "Faster event delivery.",
    ]
    shoot(page, "channel", full_page=True)

    # An empty message is refused in place, saying why; nothing is posted.
    count = page.locator("#messages li.message").count()
    page.get_by_role("textbox", name="Message").fill("   ")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#composer-error")).to_contain_text("validation")
    assert page.locator("#messages li.message").count() == count

    # On a phone, in dark mode, the conversation fits and reads.
    phone.goto(served.url + "/ui/channels/general")
    expect(phone.locator("#messages")).to_contain_text("Faster event delivery.")
    fits(phone)
    accessible(phone)
    shoot(phone, "channel-phone-dark")


def test_a_runs_page_shows_its_tool_call_with_arguments_and_result(
    serve: Callable[..., Served], page: Any, shoot: Callable[..., Path], mock: MockProvider
) -> None:
    served = serve()
    mock.queue(
        Reply(
            tool_calls=[("note_create", {"title": "Q3 budget", "body": "Hold spend at $40k."})],
            input_tokens=900,
            output_tokens=40,
        ),
        Reply(text="Noted the Q3 budget.", input_tokens=1000, output_tokens=12),
        model="gpt-mock",
    )
    done = served.cli("run", "cfo", "Write down the Q3 budget", "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]

    page.goto(served.url + "/")
    page.locator("#agent-cfo a", has_text=short_id(run_id)).click()
    expect(page).to_have_url(served.url + f"/ui/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    call = page.locator('#timeline .tool-call[data-tool="note_create"]')
    expect(call.locator(".tool-args")).to_contain_text('"title": "Q3 budget"')
    expect(call.locator(".tool-result")).to_contain_text("q3-budget")  # the note's slug
    expect(page.locator("#answer")).to_contain_text("Noted the Q3 budget.")
    expect(page.locator("#trace-id")).to_be_visible()
    expect(page.locator("#cancel-run")).to_have_count(0)  # it ended: nothing to cancel
    accessible(page)
    shoot(page, "run", full_page=True)

    # The run's thread, from its link.
    page.locator("a#run-thread").click()
    expect(page.locator("#thread-messages")).to_contain_text("Write down the Q3 budget")
    expect(page.locator("#thread-messages")).to_contain_text("Noted the Q3 budget.")
    accessible(page)
    shoot(page, "thread", full_page=True)

    # A run that failed says so, with its code, on the same kind of page.
    mock.queue(Reply(text="", fault=_auth_fault()), model="gpt-mini")
    failed = served.cli("run", "cto", "Pick a database", "--json")
    assert failed.returncode != 0
    page.goto(served.url + "/")
    page.locator("#agent-cto a").first.click()
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator("#run-error")).to_contain_text("provider_auth")
    expect(page.locator("#timeline .tool-call")).to_have_count(0)


def _auth_fault() -> Any:
    from agentrunner.testing import Fault

    return Fault.http(401)


def test_a_background_job_is_stopped_from_its_page(
    serve: Callable[..., Served], page: Any, shoot: Callable[..., Path], mock: MockProvider
) -> None:
    served = serve()
    # the brief (the session it opens has no turn of its own): still thinking when stopped
    mock.queue(Reply(text="Too late.", delay_s=60), model="gpt-mock")
    queued = served.cli("brief", "--background", "Plan the offsite")
    assert queued.returncode == 0, queued.stderr
    job_id = re.search(r"job (run_\w+)", queued.stdout + queued.stderr)[1]  # type: ignore[index]

    page.goto(served.url + "/ui/jobs")
    row = page.locator(f'#jobs tr[data-job="{job_id}"]')
    expect(row).to_contain_text("Plan the offsite")
    expect(row).to_contain_text("running", timeout=20_000)
    accessible(page)
    shoot(page, "jobs", full_page=True)

    row.get_by_role("link").first.click()
    expect(page.locator("#job-status")).to_have_text("running")
    expect(page.locator("main")).to_contain_text("Plan the offsite")
    shoot(page, "job")
    # it asks first: said no, nothing is done; said yes, the job stops
    asked: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.locator("#stop-job").get_by_role("button", name="Stop job").click()
    expect(page.locator("#job-status")).to_have_text("running")
    assert asked and asked[0].startswith("Stop this job?")
    page.once("dialog", lambda dialog: answer(dialog, True))
    page.locator("#stop-job").get_by_role("button", name="Stop job").click()
    expect(page.locator("#job-status")).to_have_text("cancelled")
    assert len(asked) == 2
    expect(page.locator("#stop-job")).to_have_count(0)

    def stopped() -> bool:
        jobs = json.loads(served.cli("jobs", "--json").stdout)
        return any(j["id"] == job_id and j["status"] == "cancelled" for j in jobs)

    _wait_for(stopped, "agentrunner jobs to say the job was cancelled")


def test_the_costs_page_charts_what_cost_says(
    serve: Callable[..., Served], page: Any, shoot: Callable[..., Path], mock: MockProvider
) -> None:
    served = serve()
    mock.queue(Reply(text="Done.", input_tokens=20_000, output_tokens=2_000), model="gpt-mock")
    mock.queue(Reply(text="Done.", input_tokens=50_000, output_tokens=1_000), model="gpt-mini")
    for agent in ("ceo", "cto"):
        done = served.cli("run", agent, "Do the work")
        assert done.returncode == 0, done.stderr
    cost = json.loads(served.cli("cost", "--json").stdout)

    page.goto(served.url + "/ui/costs")
    expect(page.locator("#cost-chart")).to_be_visible()
    total = page.locator("#cost-table [data-kind=total]").first.get_attribute("data-micros")
    assert total is not None
    assert int(total) == round(cost["total"]["cost_usd"] * 1e6)
    # ceo: 20k in at $3, 2k out at $15 = $0.09; cto: 50k in at $0.15, 1k out at $0.6 = $0.0081
    expect(page.locator("#cost-table")).to_contain_text("$0.0900")
    expect(page.locator("#cost-table")).to_contain_text("$0.0081")

    # Each agent's bar is drawn against the per-agent limit ($1): the whole track is the limit,
    # marked by a line at its end; the CEO's $0.09 fills 9 % of it, the CTO's $0.0081 under 1 %.
    def box(selector: str) -> dict[str, float]:
        found = page.locator(selector).first.bounding_box()
        assert found is not None
        return dict(found)

    def row(kind: str, name: str) -> str:
        return f'#cost-chart li[data-kind={kind}][data-name="{name}"]'

    for name, share in (("ceo", 0.09), ("cto", 0.0081)):
        track, fill = (
            box(row("agent", name) + " .bar-track"),
            box(row("agent", name) + " .bar-fill"),
        )
        assert abs(fill["width"] / track["width"] - max(share, 0.006)) < 0.01
        limit = box(row("agent", name) + " .bar-limit")
        assert abs(limit["x"] + limit["width"] - (track["x"] + track["width"])) <= 1
        expect(page.locator(row("agent", name) + " .bar-value")).to_contain_text(
            "of the $1 daily limit"
        )
    # a model has no limit: its bar is its share of the day's spend, and no line is drawn
    model = row("model", "mockai:gpt-mock")
    expect(page.locator(model + " .bar-limit")).to_have_count(0)
    expect(page.locator(model + " .bar-value")).to_contain_text("% of the day's spend")
    # every row's track is as long as every other's, whatever its label says
    widths = {
        round(box_["width"])
        for box_ in page.locator("#cost-chart .bar-track").evaluate_all(
            "els => els.map(e => e.getBoundingClientRect().toJSON())"
        )
    }
    assert len(widths) == 1, widths
    accessible(page)
    shoot(page, "costs", full_page=True)

    # The form's field takes 1 to 366 days; an address with another says what is allowed.
    answer = page.goto(served.url + "/ui/costs?days=0")
    assert answer is not None
    assert answer.status == 422
    expect(page.get_by_role("alert")).to_contain_text("validation")
    expect(page.get_by_role("link", name="Costs", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    page.locator("#problem-back").click()
    expect(page.locator("#cost-chart")).to_be_visible()


def test_every_page_reads_and_posts_with_javascript_off(
    serve: Callable[..., Served], chromium: Any, mock: MockProvider
) -> None:
    served = serve()
    mock.queue(Reply(text="Heard you."), model="gpt-mock")
    context = chromium.new_context(java_script_enabled=False)
    tab = context.new_page()
    try:
        for path, heading in [
            ("/", "Team"),
            ("/ui/channels", "Channels"),
            ("/ui/threads", "Threads"),
            ("/ui/costs", "Costs"),
            ("/ui/jobs", "Jobs"),
            ("/ui/evals", "Evals"),
        ]:
            tab.goto(served.url + path)
            expect(tab.get_by_role("heading", level=1)).to_contain_text(heading)
        tab.goto(served.url + "/ui/channels/general")
        tab.get_by_role("textbox", name="Message").fill("Posted without a script")
        tab.get_by_role("button", name="Send").click()
        # a plain form post: the server answers with the page, showing the post
        expect(tab).to_have_url(re.compile(r"/ui/channels/general"))
        expect(tab.locator("#messages")).to_contain_text("Posted without a script")

        def answered() -> bool:
            tab.reload()
            return "Heard you." in tab.locator("#messages").inner_text()

        _wait_for(answered, "the reply, read by reloading")
    finally:
        context.close()


def test_the_served_pages_survive_a_project_with_no_runs_at_all(
    serve: Callable[..., Served], page: Any
) -> None:
    served = serve()
    for path in ("/ui/costs", "/ui/jobs", "/ui/threads", "/ui/channels", "/ui/evals"):
        page.goto(served.url + path)
        expect(page.locator("main")).to_be_visible()
        accessible(page)
    status = subprocess.run(["true"], check=True)  # nothing else ran
    assert status.returncode == 0


def test_the_evals_pages_chart_each_eval_and_read_well(
    serve: Callable[..., Served], page: Any, mock: MockProvider
) -> None:
    """Two runs of an eval from the command line: the page draws its pass rate at each, against
    the threshold, with the chart said in words; the eval run's page links each case to its
    run; both pass axe's checks."""
    served = serve()
    (served.project / "evals").mkdir()
    (served.project / "evals" / "hello.yaml").write_text(
        "agent: cfo\nthreshold: 0.5\ncases:\n"
        "  - {name: greets, message: Say hello., expect: {contains: hello}}\n"
        "  - {name: counts, message: Count to two., expect: {regex: 'two'}}\n"
    )
    mock.queue(Reply(text="Nope."), model="gpt-mock")
    assert served.cli("eval", "hello", "--concurrency", "1").returncode == 0  # one of two
    assert served.cli("eval", "hello").returncode == 0
    page.goto(served.url + "/ui/evals")
    expect(page.locator(".history-said")).to_have_text(
        "mockai:gpt-mock: 50% → 100% (threshold 50%)"
    )
    expect(page.locator("svg polyline")).to_have_count(1)
    accessible(page)
    page.locator("tr[data-eval-run] a").last.click()  # the older run
    expect(page.get_by_role("heading", level=1)).to_contain_text("hello")
    expect(page.locator("tr[data-passed=false]")).to_have_count(1)
    accessible(page)
    page.locator("tr[data-passed=false] a").click()
    expect(page).to_have_url(re.compile(r"/ui/runs/run_"))
