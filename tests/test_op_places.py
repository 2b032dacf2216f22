"""The places a new op touches, as docs/architecture.md lists them, are all the places.

For one sample op, every file that names it in a registry role (its `OpDef`, its
lowering, a case row, the generated op table) must be a place the docs list, and every
listed place must do so: adding an op means editing exactly those files. Everything else
is derived from the case row, and the last test checks that it is: the compiled-vs-eager
run, the random programs and the golden programs all run the op's rows.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
OP, FAMILY, PUBLIC = "conv2d", "conv", "F.conv2d"

# What makes a file a place of the op: each pattern is one role.
ROLES = {
    "OpDef": rf'OpDef\(\s*"{OP}"',
    "lowering": rf'@lowers\(\s*"{OP}"',
    "case row": rf'\bcase\(\s*"{OP}"',
    "op table row": rf"^\| `{re.escape(PUBLIC)}` \|",
    # Spellings that would make a file a place by hand: a golden program claiming the op,
    # the random-program generator calling it.
    "golden program": rf'covers=\([^)]*"{OP}"',
    "generator statement": rf"\b{re.escape(PUBLIC)}\(",
}
BY_HAND = {"golden program": "tests/goldens/", "generator statement": "tests/_support/"}


def _documented_places() -> set[str]:
    """The paths in the "an op" row of "Where to make a change", ``<family>`` filled in."""
    text = DOC.read_text().split("### Where to make a change", 1)[1]
    row = next(line for line in text.splitlines() if line.startswith("| an op |"))
    paths = set()
    for p in re.findall(r"`([^`]+\.(?:py|md))`", row):
        p = p.replace("<family>", FAMILY)
        if not p.startswith(("tests/", "docs/", "dualgraph/")):
            p = f"dualgraph/{p}"
        paths.add(p)
    return paths


def _found_places() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    files = [*ROOT.joinpath("dualgraph").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
             *ROOT.joinpath("docs").glob("*.md")]
    for path in files:
        if path == DOC:  # the list itself (its prose walks conv2d through the backend)
            continue
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        roles = [role for role, pat in ROLES.items() if re.search(pat, text, re.MULTILINE)
                 and rel.startswith(BY_HAND.get(role, ""))]
        if roles:
            found[rel] = roles
    return found


def test_the_documented_places_of_an_op_are_the_true_ones() -> None:
    documented, found = _documented_places(), _found_places()
    assert set(found) == documented, (
        f"docs/architecture.md lists {sorted(documented)}; {OP} is named in a registry "
        f"role in {found}")
    assert len(documented) == 4


def test_the_place_finder_sees_each_role() -> None:
    """Each role's pattern matches the spelling the code uses (so a missing place fails
    the test above rather than being overlooked); the hand-written roles match nowhere."""
    roles = {role for roles in _found_places().values() for role in roles}
    assert roles == set(ROLES) - set(BY_HAND)
    assert re.search(ROLES["golden program"], f'covers=("relu", "{OP}")')
    assert re.search(ROLES["generator statement"], f"{PUBLIC}(p, w, padding=1)")


def test_the_other_places_derive_from_the_case_row() -> None:
    """The op's case rows drive the compiled-vs-eager run, the random programs and the
    golden programs, with no entry of their own."""
    from tests._support.random_programs import case_rows
    from tests.goldens.programs import CASE_PREFIX, PROGRAMS, case_row_programs
    from tests.ops.cases import CASES

    rows = {row.id for row in CASES if row.op == OP}
    assert rows
    assert rows <= set(case_rows())
    golden = {name.removeprefix(CASE_PREFIX) for name, prog in case_row_programs().items()
              if OP in prog.covers}
    assert rows <= golden
    assert any(PROGRAMS.get(CASE_PREFIX + r) for r in rows), "no row of the op is recorded"
