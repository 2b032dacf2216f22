"""`compile_census --functions`: where a program's cold compile goes, function by
function, from the graphs its compiled step hands the backend."""

from __future__ import annotations

from . import compile_census


def test_a_programs_functions_are_timed_one_by_one(capsys):
    """regression (its ``nn.Linear`` step): the cheapest program."""
    graphs = compile_census.program_graphs("regression")
    assert graphs and all(hasattr(g, "nodes") for g, _ in graphs)
    compile_census.functions("regression")
    out = capsys.readouterr().out
    assert out.startswith("regression: ") and "| CPU s | LLVM s | lines | first op |" in out
    assert out.count("\n| ") >= 2  # the header, and at least one function's row
