import pytest

from cudal1.policy.parsing import parse_response

CODE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def response(analysis="It is memory bound.", design="Fuse the ops.", code=CODE, header="## {}"):
    return "\n".join(
        [
            header.format("Performance analysis"),
            analysis,
            "",
            header.format("Algorithm design"),
            design,
            "",
            header.format("Code"),
            "```python",
            code.rstrip(),
            "```",
        ]
    )


def test_well_formed_response():
    parsed = parse_response(response())
    assert parsed.ok and parsed.error is None
    assert parsed.code == CODE
    assert parsed.sections == {"analysis": "It is memory bound.", "design": "Fuse the ops.", "code": CODE}
    assert parsed.missing == []


@pytest.mark.parametrize(
    "header",
    ["# {}", "### {}:", "**{}**", "**{}:**", "{}:", "## 1. {}", "Step 2: {}", "## {} (required)", "#### {}"],
)
def test_header_variants(header):
    parsed = parse_response(response(header=header))
    assert parsed.error is None
    assert parsed.sections["analysis"] == "It is memory bound."
    assert parsed.sections["design"] == "Fuse the ops."


def test_header_case_and_synonyms():
    text = "## PERFORMANCE ANALYSIS\nslow\n## design\nplan\n## Implementation\n```py\n" + CODE + "```\n"
    parsed = parse_response(text)
    assert parsed.error is None and parsed.code == CODE
    assert parsed.sections["analysis"] == "slow" and parsed.sections["design"] == "plan"


def test_comments_inside_code_are_not_headers():
    code = "# Code\n# Analysis\n" + CODE
    parsed = parse_response(response(code=code))
    assert parsed.code.startswith("# Code\n# Analysis\n")
    assert parsed.sections["analysis"] == "It is memory bound."


def test_picks_the_last_block_that_defines_modelnew():
    draft = CODE.replace("torch.relu(x)", "x  # draft")
    text = (
        "## Performance analysis\nSee:\n```python\n" + draft + "```\n"
        "## Algorithm design\nuse relu\n## Code\n```python\n" + CODE + "```\n"
        "Helper usage:\n```python\nprint(ModelNew)\n```\n"
    )
    assert parse_response(text).code == CODE


def test_prefers_the_code_section_and_valid_blocks():
    # A later fence outside the Code section (e.g. an example) does not replace the answer.
    other = CODE.replace("relu", "sigmoid")
    text = response() + "\n\nFor comparison, the slow one was:\n```python\n" + other + "```\n"
    # Trailing text after "## Code" still belongs to the Code section, so the last valid one wins there.
    assert parse_response(text).code == other
    text = "```python\n" + other + "```\n## Code\n```python\n" + CODE + "```\n"
    assert parse_response(text).code == CODE
    # A broken last block falls back to an earlier valid one.
    text = response() + "\n```python\nclass ModelNew(:\n```\n"
    assert parse_response(text).code == CODE


def test_unlabelled_fence_and_indentation_and_crlf():
    text = "## Code\n  ```\n" + "".join("  " + ln + "\n" if ln else "\n" for ln in CODE.split("\n")) + "  ```\n"
    assert parse_response(text.replace("\n", "\r\n")).code.strip() == CODE.strip()


def test_think_blocks_are_ignored():
    text = "<think>maybe\n## Code\n```python\nclass ModelNew: broken(\n```\n</think>\n" + response()
    parsed = parse_response(text)
    assert parsed.code == CODE and parsed.sections["analysis"] == "It is memory bound."


def test_modelnew_by_assignment_counts():
    code = "import torch.nn as nn\nclass Fast(nn.Module):\n    pass\nModelNew = Fast\n"
    assert parse_response(response(code=code)).error is None


@pytest.mark.parametrize(
    "text,error",
    [
        ("", "empty_response"),
        ("   \n\t", "empty_response"),
        ("## Performance analysis\nit is slow\n## Code\nclass ModelNew: pass\n", "no_code_block"),
        (response(code="import torch\nclass Model(torch.nn.Module):\n    pass\n"), "no_modelnew"),
        (response(code="class ModelNew(nn.Module:\n    pass\n"), "syntax_error"),
        (response(code="def make():\n    class ModelNew:\n        pass\n"), "modelnew_not_defined"),
        ("## Code\n```python\n" + CODE, "truncated_code_block"),
        ("## Code\n```python\nimport torch\nx = 1\n```\n```python\nclass ModelNew(", "truncated_code_block"),
        ("```cpp\n__global__ void k() {}\n```\n", "no_code_block"),
        ("```python\nclass ModelNew:\n    x = '\x00'\n```", "syntax_error"),
    ],
)
def test_rejections_are_labelled(text, error):
    parsed = parse_response(text)
    assert parsed.code is None
    assert parsed.error == error
    assert not parsed.ok


def test_missing_prose_sections_are_reported_not_rejected():
    parsed = parse_response("```python\n" + CODE + "```")
    assert parsed.error is None and parsed.code == CODE
    assert parsed.missing == ["analysis", "design"]


def test_never_raises_on_junk():
    for junk in ["```", "``````", "## Code\n```python\n```", "\x00\x01", "#" * 5000, "```python\n" * 50]:
        parsed = parse_response(junk)
        assert parsed.code is None and parsed.error
