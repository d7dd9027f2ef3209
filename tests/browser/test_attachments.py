"""Files from the dashboard in a real browser (docs/attachments.md): a person posts with an
image and a PDF from the conversation's form; the member agent (the `test` model) is sent them
and its answer names them; the image shows as a thumbnail and the PDF as a link, live, on the
conversation and on the run's page — within the pages' Content-Security-Policy (the `page`
fixture fails a test on any refusal) and axe's checks."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.attachment_files import image, pdf
from tests.browser.conftest import Served, accessible

STUDIO = '\n[channels.studio]\nmembers = ["looker", "you"]\n'


def test_a_post_with_an_image_from_the_dashboard_reaches_the_agent_and_shows_a_thumbnail(
    serve: Callable[..., Served], page: Any, shoot: Callable[..., Path], tmp_path: Path
) -> None:
    project = tmp_path / "project"  # the serve fixture's, written before it starts
    (project / "agents" / "looker.md").write_text(
        "---\nname: Looker\ndescription: Looks at what it is shown\nmodel: test\n---\nYou look.\n"
    )
    with (project / "agentrunner.toml").open("a") as config:
        config.write(STUDIO)
    files = tmp_path / "files"
    files.mkdir()
    (files / "mock-up.png").write_bytes(image(320, 200, "teal"))
    (files / "brief.pdf").write_bytes(pdf(pages=2))
    served = serve()

    page.goto(served.url + "/ui/channels/studio")
    expect(page.get_by_role("heading", level=1)).to_contain_text("studio")
    chooser = page.get_by_label("Attach images or PDFs")
    expect(chooser).to_have_attribute("multiple", "")
    accessible(page)
    marker = page.evaluate("window.marker = Math.random()")  # gone if the page reloads

    page.get_by_role("textbox", name="Message").fill("What do you make of these?")
    chooser.set_input_files([str(files / "mock-up.png"), str(files / "brief.pdf")])
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("textbox", name="Message")).to_have_value("")
    expect(chooser).to_have_value("")  # a fresh form: the files went with the post

    # the person's post, not the agent's answer, which quotes it ("Re: …") and may be in already
    post = page.locator("#messages li.message:not(.kind-agent)").filter(
        has_text="What do you make of these?"
    )
    expect(post).to_have_count(1)
    thumb = post.get_by_role("img", name="mock-up.png")
    expect(thumb).to_be_visible()
    # loaded whole from the dashboard's own path (the CSP's img-src 'self')
    page.wait_for_function(
        "() => { const img = document.querySelector('img.thumb');"
        " return img && img.complete && img.naturalWidth === 320 && img.naturalHeight === 200; }"
    )
    box = thumb.bounding_box()
    assert box is not None and box["width"] <= 161 and box["height"] <= 121  # small
    link = post.get_by_role("link", name="brief.pdf")
    expect(link).to_be_visible()
    expect(post.locator("li.pdf")).to_contain_text("2 pages")

    # the agent was sent both files: its answer (the test model's) names them
    answer = page.locator("#messages li.kind-agent").filter(has_text="mock-up.png")
    expect(answer).to_have_count(1, timeout=20_000)
    expect(answer).to_contain_text("[image: mock-up.png, image/png, 320x200")
    expect(answer).to_contain_text("[pdf: brief.pdf, application/pdf, 2 pages")
    assert page.evaluate("window.marker") == marker  # all of it live, no reload
    accessible(page)
    shoot(page, "channel-files")

    # the run's page shows what its message carried
    answer.get_by_role("link", name="run").click()
    expect(page).to_have_url(re.compile(r"/ui/runs/run_"))
    prompt = page.locator("#timeline li.prompt")
    expect(prompt.get_by_role("img", name="mock-up.png")).to_be_visible()
    expect(prompt.get_by_role("link", name="brief.pdf")).to_be_visible()
    accessible(page)
