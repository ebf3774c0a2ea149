"""A deterministic slice of the differential edit fuzz (`python -m bench.robustness.edit_fuzz` runs
10,000 cases): generated notes, every operation and target kind, markdown-it's own parse
as the oracle. And the oracle itself is checked on the edits issue 25 found wrong."""

from bench.robustness.edit_fuzz import Edit, check, run
from obsidian_mcp.editing.operations import EditRequest

# A few seconds of the suite; the long run is the benchmark's.
SLICE_CASES = 300


def test_a_slice_of_the_fuzz_finds_nothing() -> None:
    result = run(SLICE_CASES, seed=25)
    assert [f.get("problems") for f in result.failures] == []
    assert result.edited > SLICE_CASES * 0.9
    assert set(result.by_operation) == {
        "append",
        "prepend",
        "replace",
        "set",
        "delete",
        "replace_text",
    }
    assert set(result.by_target) == {"heading", "block", "frontmatter", "text", "create"}


def test_the_oracle_sees_what_issue_25_found() -> None:
    tasks = "- [ ] parent\n\t- [ ] sub1 (keep me)\n\t- [ ] sub2 ^t2\n- [ ] other\n"
    sub2 = Edit(EditRequest("replace", "^t2", "- [x] sub2"), "block", region=(2, 3))
    sub2.after_line, sub2.before_line, sub2.content_lines = 2, 3, ["- [x] sub2"]
    assert check(tasks, sub2, "- [ ] parent\n- [x] sub2 ^t2\n- [ ] other\n")
    assert not check(
        tasks, sub2, "- [ ] parent\n\t- [ ] sub1 (keep me)\n\t- [x] sub2 ^t2\n- [ ] other\n"
    )

    setup = "## Setup\n\n```sh\npip install foo\n```\nRun the command above. ^run\n"
    run_line = Edit(EditRequest("replace", "^run", "Run it with sudo."), "block", region=(5, 6))
    run_line.after_line, run_line.before_line = 5, 6
    run_line.content_lines = ["Run it with sudo."]
    assert check(setup, run_line, "## Setup\n\nRun it with sudo. ^run\n")

    last = "# Project\n\nIntro.\n\n## Next steps"
    steps = Edit(EditRequest("replace", "Next steps", "- ship v2"), "heading", region=(5, 5))
    steps.after_line, steps.before_line, steps.content_lines = 5, 5, ["- ship v2"]
    assert check(last, steps, "# Project\n\nIntro.\n\n## Next steps- ship v2\n")

    hidden = "## A\ntext\n\n%%\nhidden\n"
    into_comment = Edit(EditRequest("append", "A", "more"), "heading", content_lines=["more"])
    into_comment.after_line = 5
    assert check(hidden, into_comment, "## A\ntext\n\n%%\nhidden\n\nmore\n")
