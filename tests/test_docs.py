"""Every ``>>>`` example in docs/ and README.md runs, and prints what the page says; and the
pages describe the product as it is: no issue numbers or development history, no paths of
the machine they were written on."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _rel(page: Path) -> str:
    """``docs/README.md`` and ``README.md``: two pages that share a file name."""
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_page_examples(page: Path) -> None:
    text = page.read_text()
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, _rel(page), str(page), 0)
    if not test.examples:
        pytest.skip(f"{_rel(page)} has no >>> examples")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) in {_rel(page)} failed (see above)"


# What a page written as a lab notebook says: the issue or stage a change came from, and
# absolute paths of the development machine (a reader's checkout is elsewhere).
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?[ -]?#?\d+|#\d{2,}\b", re.IGNORECASE),
    "a stage or round number": re.compile(r"\b(stage|milestone|sprint) \d+\b", re.IGNORECASE),
    "a machine path": re.compile(r"(?<![\w.~])/(work|home|Users|root|tmp|mnt)/\w"
                                 r"|\b[A-Z]:\\\\\w"),
}


def forbidden_phrases(text: str) -> list[str]:
    """``line: phrase (what it is)`` for each issue number or machine path in ``text``."""
    found = []
    for k, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            for m in pattern.finditer(line):
                found.append(f"{k}: {m.group(0)!r} ({what})")
    return found


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_page_names_no_issue_or_machine_path(page: Path) -> None:
    found = forbidden_phrases(page.read_text())
    assert not found, f"{_rel(page)} reads like a lab notebook:\n" + "\n".join(found)


@pytest.mark.parametrize("text, bad", [
    ("## The op surface (issue 12, first slice)", True),
    ("fixed in issues 13", True),
    ("see #123", True),
    ("python3 -m venv /work/venv-peers", True),
    ("open /home/alice/data.npz", True),
    ("results in /tmp/sweep.json", True),
    ("stage 3 of the plan", True),
    ("`.venv/bin/python -m pytest`", False),
    ("the cache in ~/.cache/dualgraph", False),
    ("`docs/comparison.md` and `tests/test_docs.py`", False),
    ("a batch of 64 (issue-free)", False),
])
def test_the_check_catches_what_it_should(text: str, bad: bool) -> None:
    assert bool(forbidden_phrases(text)) == bad


SOURCES = sorted((ROOT / "dualgraph").rglob("*.py"))


def test_package_source_names_no_issue_or_machine_path() -> None:
    """Code, comments and docstrings describe what is, like the pages."""
    found = [f"{p.relative_to(ROOT).as_posix()}:{hit}"
             for p in SOURCES for hit in forbidden_phrases(p.read_text())]
    assert not found, "the package reads like a lab notebook:\n" + "\n".join(found)
