"""The ``dualgraph`` command (also ``python -m dualgraph``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    import numpy as np

    import dualgraph as dg

    print("dualgraph eager demo: define-by-run tensors with a tape of IR nodes\n")
    x = dg.tensor(2.0, requires_grad=True)
    y = dg.tensor(3.0, requires_grad=True)
    z = x * y + y ** 2
    print(f"z = x*y + y**2 = {z}")
    print(f"z.grad_fn = {z.grad_fn.name()}, next_functions = "
          f"{[fn.name() if fn else None for fn, _ in z.grad_fn.next_functions]}")
    print("\nthe tape as an IR graph (dg.graph_of(z)):")
    print(dg.graph_of(z))
    z.backward()
    print(f"\nz.backward(): x.grad = {x.grad}, y.grad = {y.grad}")

    print(f"\nTinyNet 2->3->1 (ReLU, MSE, SGD lr=0.1), {args.steps} steps on y = 2*x0 - x1:")
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 1))
    opt = dg.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = dg.nn.MSELoss()
    X = dg.randn(10, 2)
    Y = X[:, 0:1] * 2 - X[:, 1:2]
    t0 = time.perf_counter()
    for step in range(args.steps):
        opt.zero_grad()
        loss = loss_fn(net(X), Y)
        loss.backward()
        opt.step()
        if step % max(args.steps // 5, 1) == 0 or step == args.steps - 1:
            print(f"  step {step:4d}  loss {loss.item():.6f}")
    per_step = (time.perf_counter() - t0) / args.steps
    print(f"  {per_step * 1e6:.0f} us per eager training step")
    out = net(X)
    print(f"\nnet(X).grad_fn = {out.grad_fn.name()} "
          f"(nn.Linear on 2-D input records one addmm, as in PyTorch)")
    print(f"tape nodes for one loss: {len(dg.graph_of(loss_fn(out, Y)).nodes)}")
    print(f"final loss {float(np.asarray(loss_fn(net(X), Y).item())):.6f}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dualgraph",
        description="Run numerical programs define-by-run and as compiled graphs, and compare.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the eager engine on the classic autograd examples")
    demo.add_argument("--steps", type=int, default=200, help="TinyNet training steps")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
