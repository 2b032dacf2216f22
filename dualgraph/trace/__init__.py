"""Trace-and-compile mode: tracers, graph autodiff."""
