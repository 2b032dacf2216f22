"""`dg.save` / `dg.load`: tensors and state dicts in a documented file format, no pickle.

A dualgraph file is a ZIP archive (stored, not compressed) whose first member is
``dualgraph.json``, a JSON manifest::

    {"format": "dualgraph", "version": 1, "object": <the saved object, encoded>}

and whose other members are ``arrays/<n>.npy``, one per tensor, in NumPy's ``.npy``
format (written and read with ``allow_pickle=False``). In the encoded object, JSON's own
values stand for ``None``, bools, ints, strings and lists; every other value is a
one-key object:

======================  ===================================================
``{"float": x}``        a float (``"nan"``, ``"inf"``, ``"-inf"`` as strings)
``{"tuple": [...]}``    a tuple
``{"dict": [[k, v]]}``  a dict (any keys that encode, order kept)
``{"odict": [[k, v]]}`` an ``OrderedDict``
``{"tensor": {...}}``   ``n`` (its array member), ``id`` (which saved tensor),
                        ``requires_grad``, ``parameter``, and ``complex``: true
                        for a complex tensor, whose member is its real
                        ``(*shape, 2)`` storage (`view_as_real`)
``{"ndarray": n}``      a NumPy array
``{"scalar": [d, v]}``  a NumPy scalar of dtype ``d``
``{"dtype": "f32"}``    a dtype; ``{"device": "cpu"}`` a device
``{"pickle": n}``       any other object, pickled into member ``pickles/<n>.pkl``
======================  ===================================================

A tensor saved twice in one object (tied weights) is stored once and loads as one
tensor; tensors that shared their data (a state dict's detached views of one
parameter) load sharing one array. `load` refuses a file that is not a dualgraph file
(a PyTorch checkpoint included) with `ValueError`, and never unpickles unless asked:
with the default ``weights_only=True`` a file holding pickled objects raises
`ValueError` naming their types, unless every global they need was allowed with
`add_safe_globals` (or inside ``with safe_globals([...])``), as in PyTorch;
``weights_only=False`` unpickles them (only for files you trust).

>>> import io
>>> buf = io.BytesIO()
>>> dg.save({"w": dg.ones(2), "step": 3}, buf)
>>> _ = buf.seek(0)
>>> dg.load(buf)
{'w': tensor([1., 1.]), 'step': 3}
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

from .dtypes import as_dtype, check_device, device
from .eager.tensor import Tensor, from_numpy
from .nn.modules import Parameter
from .nn.modules.module import ComplexParameter
from .ops.complex import ComplexTensor

FORMAT = "dualgraph"
VERSION = 1
MANIFEST = "dualgraph.json"


def save(obj: Any, f: Any, pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` (tensors, state dicts: nested dicts, lists and tuples of tensors,
    NumPy arrays and Python scalars) to ``f``, a path or a binary file object, in
    dualgraph's format (see the module's docstring). Other objects are pickled into the
    file, and `load` reads them back only with ``weights_only=False``.

    >>> dg.save(model.state_dict(), "model.dg")      # doctest: +SKIP
    """
    enc = _Encoder()
    manifest = {"format": FORMAT, "version": VERSION, "object": enc.encode(obj)}
    with _open(f, "w") as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, allow_nan=False))
        for i, arr in enumerate(enc.arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr, order="C"), allow_pickle=False)
            zf.writestr(f"arrays/{i}.npy", buf.getvalue())
        for i, data in enumerate(enc.pickles):
            zf.writestr(f"pickles/{i}.pkl", data)


def load(f: Any, map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = True, mmap: bool | None = None, **pickle_load_args: Any
         ) -> Any:
    """Read an object written by `save` from ``f`` (a path or binary file object).

    ``map_location`` may name the CPU (or be a dict or function, as PyTorch allows: every
    tensor is on the CPU already); ``mmap`` is accepted (arrays are read into memory).
    With ``weights_only=True`` (the default, and ``None`` means it too) nothing is
    unpickled: a file holding pickled objects raises `ValueError`.
    """
    if isinstance(map_location, (str, device)):
        check_device(map_location, "load(map_location=...)")
    with _open(f, "r") as zf:
        names = zf.namelist()
        if not names or names[0] != MANIFEST:
            raise ValueError(_not_ours(f, names))
        try:
            manifest = json.loads(zf.read(MANIFEST))
        except ValueError as e:
            raise ValueError(f"dg.load: {_name(f)} has a broken manifest: {e}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError(_not_ours(f, names))
        if manifest.get("version") != VERSION:
            raise ValueError(f"dg.load: {_name(f)} is dualgraph format version "
                             f"{manifest.get('version')!r}; this dualgraph reads version "
                             f"{VERSION}")
        return _Decoder(zf, weights_only is not False).decode(manifest.get("object"))


def _name(f: Any) -> str:
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file"


def _not_ours(f: Any, names: list[str]) -> str:
    hint = ""
    if any(n.endswith("data.pkl") for n in names):
        hint = (" (it looks like a PyTorch checkpoint: load it with torch, convert the "
                "tensors with .numpy(), and pass them to dualgraph)")
    return f"dg.load: {_name(f)} is not a dualgraph file{hint}"


class _open:  # noqa: N801 - used as a function
    """A `zipfile.ZipFile` on a path or file object, with a clear error for other files."""

    def __init__(self, f: Any, mode: str) -> None:
        self.f, self.mode = f, mode

    def __enter__(self) -> zipfile.ZipFile:
        f = os.fspath(self.f) if isinstance(self.f, (str, os.PathLike)) else self.f
        try:
            self.zf = zipfile.ZipFile(f, self.mode, compression=zipfile.ZIP_STORED)
        except zipfile.BadZipFile:
            raise ValueError(f"dg.load: {_name(self.f)} is not a dualgraph file (not a "
                             "ZIP archive)") from None
        return self.zf

    def __exit__(self, *exc: Any) -> None:
        self.zf.close()


class _Encoder:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.pickles: list[bytes] = []
        self._tensors: dict[int, int] = {}
        self._array_ids: dict[int, int] = {}
        self._keep: list[Any] = []  # ids stay unique while their objects live

    def encode(self, x: Any) -> Any:
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int) and type(x) is int:
            return x
        if type(x) is float:
            return {"float": x if math.isfinite(x) else str(x)}
        if isinstance(x, Tensor):
            return {"tensor": self._tensor(x)}
        if isinstance(x, ComplexTensor):
            return {"tensor": {**self._tensor(x._storage()), "complex": True}}
        if isinstance(x, np.ndarray) and x.dtype.kind not in "OUSVMm":
            self.arrays.append(x)
            return {"ndarray": len(self.arrays) - 1}
        if isinstance(x, np.generic) and x.dtype.kind in "biuf":
            return {"scalar": [x.dtype.str, self.encode(x.item())]}
        if isinstance(x, np.dtype):
            return {"dtype": x.str}
        if isinstance(x, device):
            return {"device": str(x)}
        if type(x) is list:
            return [self.encode(v) for v in x]
        if type(x) is tuple:
            return {"tuple": [self.encode(v) for v in x]}
        if type(x) in (dict, OrderedDict):
            items = [[self.encode(k), self.encode(v)] for k, v in x.items()]
            return {"odict" if type(x) is OrderedDict else "dict": items}
        try:
            self.pickles.append(pickle.dumps(x, protocol=4))
        except Exception as e:
            raise TypeError(f"dg.save: cannot save an object of type {type(x).__name__}: "
                            f"{e}") from None
        return {"pickle": len(self.pickles) - 1, "type": _type_name(x)}

    def _tensor(self, t: Tensor) -> dict:
        arr = np.asarray(t)
        n = self._array_ids.get(id(arr))
        if n is None:
            self.arrays.append(arr)
            n = self._array_ids[id(arr)] = len(self.arrays) - 1
        k = self._tensors.setdefault(id(t), len(self._tensors))
        self._keep += [t, arr]
        return {"n": n, "id": k, "requires_grad": bool(t.requires_grad),
                "parameter": isinstance(t, Parameter)}


_SAFE_GLOBALS: dict[tuple[str, str], Any] = {}


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes and functions (or ``(obj, "module.name")`` pairs) in the pickled
    objects of a file that `load` reads with ``weights_only=True``, as
    ``torch.serialization.add_safe_globals`` does; nothing else is ever unpickled then."""
    for g in safe_globals:
        obj, name = g if isinstance(g, tuple) else (g, None)
        if name is None:
            key = (obj.__module__, obj.__qualname__)
        else:
            module, _, qualname = name.rpartition(".")
            key = (module, qualname)
        _SAFE_GLOBALS[key] = obj


def get_safe_globals() -> list:
    """The globals `add_safe_globals` allowed."""
    return list(_SAFE_GLOBALS.values())


def clear_safe_globals() -> None:
    """Forget every global `add_safe_globals` allowed."""
    _SAFE_GLOBALS.clear()


class safe_globals:  # noqa: N801 - PyTorch's name
    """``with dg.serialization.safe_globals([...]):`` allows these globals inside the block."""

    def __init__(self, safe_globals: list) -> None:
        self._globals = safe_globals

    def __enter__(self) -> None:
        self._saved = dict(_SAFE_GLOBALS)
        add_safe_globals(self._globals)

    def __exit__(self, *exc: Any) -> None:
        _SAFE_GLOBALS.clear()
        _SAFE_GLOBALS.update(self._saved)


class _SafeUnpickler(pickle.Unpickler):
    """Resolves only the globals `add_safe_globals` allowed."""

    def find_class(self, module: str, name: str) -> Any:
        obj = _SAFE_GLOBALS.get((module, name))
        if obj is None:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return obj


def _type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


class _Decoder:
    def __init__(self, zf: zipfile.ZipFile, weights_only: bool) -> None:
        self.zf, self.weights_only = zf, weights_only
        self._tensors: dict[Any, Tensor] = {}
        self._arrays: dict[Any, np.ndarray] = {}

    def _array(self, n: Any) -> np.ndarray:
        try:
            with self.zf.open(f"arrays/{int(n)}.npy") as fh:
                return np.lib.format.read_array(io.BytesIO(fh.read()), allow_pickle=False)
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"dg.load: array {n!r} is missing or broken: {e}") from None

    def decode(self, x: Any) -> Any:
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, list):
            return [self.decode(v) for v in x]
        if not isinstance(x, dict) or not x:
            raise ValueError(f"dg.load: unexpected value in the manifest: {x!r}")
        kind = next(iter(x))
        v = x[kind]
        if kind == "float":
            return float(v)
        if kind == "tuple":
            return tuple(self.decode(e) for e in v)
        if kind in ("dict", "odict"):
            pairs = [(self._key(self.decode(k)), self.decode(e)) for k, e in v]
            return OrderedDict(pairs) if kind == "odict" else dict(pairs)
        if kind == "tensor":
            return self._tensor(v)
        if kind == "ndarray":
            return self._array(v)
        if kind == "scalar":
            return as_dtype(v[0]).type(self.decode(v[1]))
        if kind == "dtype":
            return as_dtype(v)
        if kind == "device":
            return device(v)
        if kind == "pickle":
            with self.zf.open(f"pickles/{int(v)}.pkl") as fh:
                data = fh.read()
            if not self.weights_only:
                return pickle.loads(data)  # noqa: S301 - asked for with weights_only=False
            try:
                return _SafeUnpickler(io.BytesIO(data)).load()
            except pickle.UnpicklingError as e:
                raise ValueError(
                    f"dg.load: the file holds a pickled object of type {x.get('type')}; "
                    f"{e}. Unpickling can run arbitrary code, so with weights_only=True "
                    "only the globals given to dg.serialization.add_safe_globals are "
                    "allowed. Pass weights_only=False only for a file you trust.") from None
        raise ValueError(f"dg.load: unknown entry {kind!r} in the manifest")

    @staticmethod
    def _key(k: Any) -> Any:
        return tuple(k) if isinstance(k, list) else k

    def _tensor(self, spec: dict) -> Tensor | ComplexTensor:
        t = self._tensors.get(spec.get("id"))
        if t is None:
            n = spec["n"]
            arr = self._arrays.get(n)
            if arr is None:
                arr = self._arrays[n] = self._array(n)
            rg = bool(spec.get("requires_grad"))
            # Tensors that shared data when saved share the loaded array.
            t = Parameter(arr, rg) if spec.get("parameter") else from_numpy(arr, requires_grad=rg)
            self._tensors[spec.get("id")] = t
        if spec.get("complex"):
            if t.ndim == 0 or t.shape[-1] != 2 or t.dtype.kind != "f":
                raise ValueError(f"dg.load: complex tensor {spec.get('id')!r} has storage of "
                                 f"shape {tuple(t.shape)} and dtype {t.dtype}; expected "
                                 "(..., 2) float")
            return ComplexParameter(t) if isinstance(t, Parameter) else ComplexTensor(t)
        return t
