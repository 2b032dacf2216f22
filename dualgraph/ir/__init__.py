"""The intermediate representation shared by the eager tape and traced graphs."""

from .graph import Graph, GraphError, Node
from .interpret import interpret

__all__ = ["Graph", "GraphError", "Node", "interpret"]
