"""Record PyTorch's results for the parity programs into ``goldens.json``.

Run with a Python that has torch, from the repository root:

    PYTHONPATH=. python tests/goldens/record.py [--missing]

Each program in ``programs.py`` runs once in PyTorch; its outputs, the gradients of its
inputs, dtypes, shapes and any exception (type and message) are written as JSON. A
program's ``match`` phrase must occur in PyTorch's message, so the phrase dualgraph is held
to is one PyTorch really says.

The programs derived from the case table (one per row) are recorded where PyTorch runs the
row; the rows it cannot run are listed under ``NO_TORCH_KEY``. The file is merged, never
rewritten from scratch: entries recorded elsewhere (another branch, a program this checkout
lacks) are kept. ``--missing`` records only the programs the file does not hold yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from programs import (  # noqa: E402
    CASE_PREFIX,
    NO_TORCH_KEY,
    PROGRAMS,
    case_row_programs,
    execute,
)

GOLDENS = HERE / "goldens.json"


def record(names: set[str] | None = None) -> tuple[dict, dict]:
    """PyTorch's results for the programs (those in ``names`` if given), and the case rows
    PyTorch cannot run, with the reason."""
    torch.set_default_dtype(torch.float32)
    programs = {**PROGRAMS, **case_row_programs()}
    results, no_torch = {}, {}
    for name, prog in programs.items():
        if names is not None and name not in names:
            continue
        r = execute(torch, F, prog)
        r.pop("exception", None)
        err = r.get("error")
        if name.startswith(CASE_PREFIX):
            if err is not None:  # a row PyTorch does not spell this way
                no_torch[name] = f"{err['type']}: {err['message'][:120]}"
                continue
        elif prog.match is not None:
            if err is None:
                raise SystemExit(f"{name}: has match={prog.match!r} but PyTorch did not raise")
            if prog.match.lower() not in err["message"].lower():
                raise SystemExit(f"{name}: PyTorch's message does not contain "
                                 f"{prog.match!r}: {err['message']!r}")
        results[name] = r
    return results, no_torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true",
                        help="record only the programs goldens.json does not hold")
    args = parser.parse_args()
    old = json.loads(GOLDENS.read_text()) if GOLDENS.exists() else {}
    known = set(old) | set(old.get(NO_TORCH_KEY, ()))
    names = None
    if args.missing:
        names = {n for n in {**PROGRAMS, **case_row_programs()} if n not in known}
    results, no_torch = record(names)
    merged = {k: v for k, v in old.items() if not k.startswith("_")}
    merged.update(results)
    skipped = sorted((set(old.get(NO_TORCH_KEY, ())) - set(results)) | set(no_torch))
    for name in no_torch:
        merged.pop(name, None)
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in merged.items()]
    text = ("{\n" + f'  "_torch_version": {json.dumps(torch.__version__)},\n'
            + f"  {json.dumps(NO_TORCH_KEY)}: {json.dumps(skipped)},\n"
            + ",\n".join(lines) + "\n}\n")
    GOLDENS.write_text(text)
    errors = sum(1 for r in results.values() if "error" in r)
    print(f"recorded {len(results)} programs ({errors} raise in PyTorch) into {GOLDENS}; "
          f"{len(no_torch)} case rows PyTorch cannot run:")
    for name, why in sorted(no_torch.items()):
        print(f"  {name}: {why}")


if __name__ == "__main__":
    main()
