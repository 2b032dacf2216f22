"""Exception types users can catch."""


class TraceError(RuntimeError):
    """A traced program did something a static graph cannot capture.

    Raised for data-dependent Python control flow, ``item()``/``numpy()`` on a tracer, and
    tracers that escape the traced call. The message names the user's file and line.
    """


class ShapeError(RuntimeError, ValueError):
    """Operand shapes that do not fit together; the message names the shapes.

    Both a ``RuntimeError`` (what PyTorch raises) and a ``ValueError`` (what NumPy raises),
    so code written against either catches it (API.md A2).
    """


class EagerOnlyError(TraceError):
    """A call whose eager semantics a compiled graph cannot reproduce yet (an in-place op
    on an argument that requires grad and is not a leaf, whose autograd history eager mode
    rebases onto the op). ``dg.compile`` runs such calls eagerly, with a warning (and
    raises with ``strict=True``); ``dg.trace`` raises it."""
