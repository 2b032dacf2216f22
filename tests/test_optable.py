"""docs/eager.md's op table is the one the registry generates (tools/optable.py)."""

from __future__ import annotations

from tools import optable


def test_committed_op_table_is_current() -> None:
    text = optable.DOC.read_text()
    assert optable.BEGIN in text and optable.END in text, "docs/eager.md lost its markers"
    committed = text.partition(optable.BEGIN)[2].partition(optable.END)[0].strip("\n")
    assert committed == optable.table(), (
        "docs/eager.md's op table is out of date with the registry; regenerate it with "
        f"`{optable.COMMAND}` (from the repository root)")


def test_table_lists_primitives_composites_and_modules() -> None:
    body = optable.table()
    row = "| `F.layer_norm` | `layer_norm` | primitive | `NativeLayerNormBackward0` | yes | yes |"
    assert row in body
    assert "| `nn.BatchNorm1d` |" in body and "| `t.sum` |" in body and "| `+` |" in body
    assert "| `dg.compile` |" not in body  # binds no op itself
