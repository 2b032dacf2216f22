"""Exception types users can catch."""


class TraceError(RuntimeError):
    """A traced program did something a static graph cannot capture.

    Raised for data-dependent Python control flow, ``item()``/``numpy()`` on a tracer, and
    tracers that escape the traced call. The message names the user's file and line.
    """
