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


_RUNS_EAGERLY = "this signature runs eagerly"


def runs_eagerly(fn: object, what: str, fix: str) -> EagerOnlyError:
    """The `EagerOnlyError` of a compiled function ``fn`` that does ``what`` (which a
    compiled call cannot repeat): it names the function, says the signature runs eagerly
    and how to keep it compiled (``fix``)."""
    name = getattr(fn, "__name__", "the function")
    return EagerOnlyError(f"{name} {what}; {_RUNS_EAGERLY}. {fix}")


def eager_warning(e: BaseException) -> str:
    """The warning a compiled function gives when a signature runs eagerly because of
    ``e``: its message, saying once that the signature runs eagerly."""
    text = str(e)
    if _RUNS_EAGERLY in text.lower():
        return f"dg.compile: {text}"
    return f"dg.compile: {text} {_RUNS_EAGERLY[0].upper()}{_RUNS_EAGERLY[1:]}."
