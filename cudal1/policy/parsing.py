"""Read a policy response back into its sections and its candidate code, or say why not.

The expected format is `cudal1.policy.prompts`' three sections (performance analysis, algorithm
design, code). Small models drift from it, so the reader is tolerant where tolerance is safe and
strict where it is not:

- headers: any Markdown level or none, bold, numbering ("1.", "Step 2:"), any case, a trailing
  colon, and short synonyms ("Analysis", "Design", "Implementation", "Final code") all count;
  headers are only recognized outside code fences, so a `# code` comment is never one;
- code: every closed ```python (or ```py, or unlabelled) fence is a candidate; the chosen one is
  the last candidate that parses (`ast`) and defines `ModelNew` at module level (a class, or a
  name bound by assignment), preferring fences inside the Code section;
- closed `<think>...</think>` blocks are dropped before reading (reasoning models draft there).

A response that yields no usable code gets `code=None` and an `error` label, which the reward
policy turns into reward 0 with reason "parse_error:<label>":

    empty_response        nothing but whitespace
    no_code_block         no Python fence at all
    truncated_code_block  a fence was opened and never closed, and no earlier fence is usable
    no_modelnew           code was found, but no fence mentions ModelNew
    syntax_error          fences define ModelNew but none of them parses
    modelnew_not_defined  fences parse and mention ModelNew, but none defines it at module level

Missing prose sections are not errors (`ParsedResponse.missing` lists them): pricing the format
is the reward policy's choice, not the parser's.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap

from cudal1.policy.prompts import FENCE_RE, SECTIONS

_HEADER_WORDS = {
    "analysis": ("performance analysis", "analysis", "performance", "bottleneck analysis"),
    "design": ("algorithm design", "design", "optimization design", "optimization plan", "plan", "algorithm"),
    "code": ("code", "final code", "implementation", "optimized code", "solution"),
}
_WORD_TO_KEY = {w: k for k, words in _HEADER_WORDS.items() for w in words}

# A header line: optional "#"s, optional bold/italics, optional numbering, the words, optional colon.
_HEADER_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?[*_]{0,3}\s*(?:(?:step|section|part)\s*)?(?:\d+[.):]?\s*)?"
    r"(?P<words>[a-z][a-z ]*?)\s*(?:\([^)]*\))?\s*:?\s*[*_]{0,3}\s*:?\s*$",
    re.IGNORECASE,
)
_PY_LANGS = {"python", "py", "python3", ""}


@dataclasses.dataclass
class ParsedResponse:
    """What `parse_response` read.

    Attributes:
        sections: section key ("analysis", "design", "code") -> stripped text, for the sections
            found; "code" holds the chosen code (not the raw section) when code was found.
        code: the candidate source (a complete module defining ModelNew), or None.
        error: a short snake_case label when `code` is None (see the module docstring), else None.
    """

    sections: dict[str, str]
    code: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def missing(self) -> list[str]:
        """Section keys absent from the response, in the required order."""
        return [k for k in SECTIONS if k not in self.sections]


@dataclasses.dataclass
class _Fence:
    lang: str
    body: str
    closed: bool
    section: str | None


def _header_key(line: str) -> str | None:
    m = _HEADER_RE.match(line)
    if not m:
        return None
    words = " ".join(m.group("words").lower().split())
    return _WORD_TO_KEY.get(words)


def _scan(text: str) -> tuple[dict[str, list[str]], list[_Fence]]:
    """One pass over the lines: section texts (by key) and every fence, with its section."""
    sections: dict[str, list[str]] = {}
    fences: list[_Fence] = []
    current: str | None = None
    open_fence: tuple[str, str, list[str]] | None = None  # ticks, lang, lines
    for line in text.split("\n"):
        if open_fence is not None:
            ticks, lang, body = open_fence
            m = FENCE_RE.match(line)
            if m and not m.group("lang") and len(m.group("ticks")) >= len(ticks):
                fences.append(_Fence(lang, textwrap.dedent("\n".join(body)), True, current))
                open_fence = None
            else:
                body.append(line)
            if current is not None:
                sections[current].append(line)
            continue
        m = FENCE_RE.match(line)
        if m:
            open_fence = (m.group("ticks"), m.group("lang").lower(), [])
            if current is not None:
                sections[current].append(line)
            continue
        key = _header_key(line)
        if key is not None and key not in sections:
            current = key
            sections[key] = []
            continue
        if current is not None:
            sections[current].append(line)
    if open_fence is not None:
        _, lang, body = open_fence
        fences.append(_Fence(lang, textwrap.dedent("\n".join(body)), False, current))
    return sections, fences


def _defines_modelnew(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return True
    return False


def _strip_think(text: str) -> str:
    stripped = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    return stripped if stripped.strip() else text


def parse_response(text: str) -> ParsedResponse:
    """Parse one response. Never raises on any string input.

    Args:
        text: the decoded response (without the prompt).

    Returns:
        A `ParsedResponse`; `code` is set exactly when `error` is None.
    """
    if not text or not text.strip():
        return ParsedResponse({}, None, "empty_response")
    text = _strip_think(text.replace("\r\n", "\n").replace("\r", "\n"))
    raw_sections, fences = _scan(text)
    sections = {k: "\n".join(v).strip() for k, v in raw_sections.items()}

    py = [f for f in fences if f.lang in _PY_LANGS]
    closed = [f for f in py if f.closed]
    truncated = any(not f.closed for f in py)
    # Fences in the Code section first, then the rest; within each, the last one wins.
    ordered = [f for f in closed if f.section != "code"] + [f for f in closed if f.section == "code"]
    error = None
    for f in reversed(ordered):
        if "ModelNew" not in f.body:
            continue
        try:
            tree = ast.parse(f.body)
        except (SyntaxError, ValueError):  # ValueError: null bytes
            error = error or "syntax_error"
            continue
        if _defines_modelnew(tree):
            code = f.body.strip("\n") + "\n"
            sections["code"] = code
            return ParsedResponse(sections, code, None)
        error = error or "modelnew_not_defined"
    if error is None:
        if truncated:
            error = "truncated_code_block"
        elif closed:
            error = "no_modelnew"
        else:
            error = "no_code_block"
    elif truncated:
        error = "truncated_code_block"
    if not sections.get("code"):
        sections.pop("code", None)
    return ParsedResponse(sections, None, error)
