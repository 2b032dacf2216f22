"""Tests of the static-graph layer: tracer, IR, passes, graph autodiff, interpreter."""
