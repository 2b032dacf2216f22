"""The intermediate representation shared by the eager tape and traced graphs."""

from .graph import Graph, Node

__all__ = ["Graph", "Node"]
