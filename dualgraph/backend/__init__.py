"""Backends that lower optimized graphs to executable code."""
