"""Vectorizable float32 ``exp``, ``tanh``, ``sigmoid`` and ``erf`` for generated loops, and
`fold_lanes`, which adds a float32 sum's values to its float64 lanes as one vector.

PyPI's llvmlite has no vector math library (SVML), so ``np.exp`` inside an njit loop is a
scalar libm call and blocks vectorization of the whole loop: a fused chain of
transcendentals then runs slower than NumPy's SIMD ufuncs. These functions use only
arithmetic, comparisons and a bit cast, so LLVM vectorizes the loops that inline them.

They are inlined at the Numba level (``inline="always"``): a call left for LLVM to inline
blocks vectorization of the loop around it.

Accuracy against float64 NumPy rounded to float32 (``tests/backend/test_fast_math.py``
measures it on every 1024th float32 bit pattern plus the edges): at most 1 ulp for ``exp``
(denormal results included), 4 ulp for ``tanh`` and 2 ulp for ``sigmoid``, except that
``sigmoid(x)`` is 0 for x <= -88.72, where ``exp(-x)`` overflows, instead of the denormal
e^x; 3 ulp for ``erf`` (against ``math.erf``). NumPy's own float32 functions measure 2 ulp
(``exp``) and 1 ulp (``tanh``) on the same sample. Exact special values (``exp(0) = 1``,
``exp(-inf) = 0``, ``exp(x) = inf`` past overflow, ``tanh(±inf) = ±1``, ``tanh(±0) = ±0``,
``erf(±0) = ±0``, ``erf(±inf) = ±1``) and nan propagation. Float64 keeps libm's functions.

The coefficients were fitted for dualgraph, for relative error: exp on [-ln2/2, ln2/2]
after Cody-Waite range reduction (least squares on Chebyshev nodes); tanh as the rational
``x P(x^2) / Q(x^2)``, both of degree 4, on [0, 9.02] (linearized least squares with
Lawson reweighting towards minimax; 0.35 ulp of approximation error, the rest is float32
rounding). The rational costs one division and no ``exp``: about half the instructions of
``1 - 2 / (exp(2x) + 1)`` with a small-argument polynomial beside it. erf is two fits,
both evaluated and one selected (no branch, so the loop vectorizes): ``x P(x^2)`` of degree
6 for |x| < 1 (relative error), and ``1 - exp(Q(|x| - 2.5))`` with Q of degree 9 fitted to
``log(erfc)`` on [1, 3.92] (absolute error), past which float32 erf is 1.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

from .cache_key import cached_njit
from .library import HELPER_JIT

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # few mantissa bits: n * _LN2_HI is exact
_LN2_LO = np.float32(-2.12194440e-4)  # ln 2 - _LN2_HI
_EXP_HI = np.float32(89.0)  # exp overflows float32 above 88.72
_EXP_LO = np.float32(-104.0)  # exp underflows to 0 below -103.97
_E0 = np.float32(1.0)
_E1 = np.float32(1.0)
_E2 = np.float32(0.5)
_E3 = np.float32(0.1666666567325592)
_E4 = np.float32(0.041666269302368164)
_E5 = np.float32(0.00833342969417572)
_E6 = np.float32(0.0013946021208539605)
_E7 = np.float32(0.00019826495554298162)
# tanh(x) = x P(x^2) / Q(x^2) on |x| <= 9.02, where float32 tanh reaches 1.
_TP0 = np.float32(1.0)
_TP1 = np.float32(0.13379718363285065)
_TP2 = np.float32(0.0034940349869430065)
_TP3 = np.float32(2.0583489458658732e-05)
_TP4 = np.float32(1.331908983104313e-08)
_TQ0 = np.float32(1.0)
_TQ1 = np.float32(0.4671303331851959)
_TQ2 = np.float32(0.025871073827147484)
_TQ3 = np.float32(0.0003283093683421612)
_TQ4 = np.float32(7.762025688862195e-07)
# Past 9.05 the rational exceeds 1 (it grows like x), so clamping the input here and the
# result to [-1, 1] makes every |x| >= 9.05, infinities included, exactly +-1.
_TANH_CLAMP = np.float32(9.5)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
# erf(x) = x P(x^2) on |x| < 1.
_EA0 = np.float32(1.1283791065216064)
_EA1 = np.float32(-0.3761262595653534)
_EA2 = np.float32(0.1128358542919159)
_EA3 = np.float32(-0.026853810995817184)
_EA4 = np.float32(0.00518832728266716)
_EA5 = np.float32(-0.000801019137725234)
_EA6 = np.float32(7.85385345807299e-05)
# erf(x) = 1 - exp(Q(|x| - 2.5)) on 1 <= |x| <= 3.92; float32 erf is 1 past 3.92.
_EB0 = np.float32(-7.806815147399902)
_EB1 = np.float32(-5.352680683135986)
_EB2 = np.float32(-0.9438936710357666)
_EB3 = np.float32(-0.01085825078189373)
_EB4 = np.float32(0.0021652316208928823)
_EB5 = np.float32(-0.0004205512232147157)
_EB6 = np.float32(7.733250095043331e-05)
_EB7 = np.float32(-1.3081290489935782e-05)
_EB8 = np.float32(1.630586552892055e-06)
_EB9 = np.float32(-4.2226570684533726e-08)
_ERF_SPLIT = np.float32(1.0)
_ERF_CLAMP = np.float32(3.92)
_ERF_CENTER = np.float32(2.5)


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of integer ``bits``."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if v.type.width != 32:
            v = builder.trunc(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(bits), codegen


LANES = 16
_F32xL = ir.VectorType(ir.FloatType(), LANES)
_F64xL = ir.VectorType(ir.DoubleType(), LANES)


@intrinsic
def fold_lanes(typingctx, lanes, values, count):
    """``lanes[l] += float64(values[LANES * b + l])`` for every block ``b`` of the first
    ``count`` values (a multiple of LANES), in order of ``b``: exactly the additions of a
    lane loop, so the sums do not change.

    A lane loop written in Python keeps its partial sums in memory (LLVM cannot tell the
    lanes from the arrays the loop reads) or in scalar registers, and ran at a third of
    NumPy's float32 sum; here they are one vector value in registers for the whole call.
    """
    ok = (isinstance(lanes, types.Array) and lanes.dtype == types.float64
          and lanes.layout == "C" and isinstance(values, types.Array)
          and values.dtype == types.float32 and values.layout == "C"
          and isinstance(count, types.Integer))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        acc_arr = context.make_array(signature.args[0])(context, builder, args[0])
        val_arr = context.make_array(signature.args[1])(context, builder, args[1])
        n = context.cast(builder, args[2], signature.args[2], types.intp)
        # An empty asm hides the count from LLVM: with a constant count it unrolled the
        # loop completely (up to 64 copies), which cost compile time and saved nothing.
        n = builder.asm(ir.FunctionType(n.type, [n.type]), "", "=r,0", [n], False)
        step = ir.Constant(n.type, LANES)
        acc_ptr = builder.bitcast(acc_arr.data, _F64xL.as_pointer())
        start = builder.load(acc_ptr, align=8)
        entry = builder.block
        head = builder.append_basic_block("fold.head")
        body = builder.append_basic_block("fold.body")
        done = builder.append_basic_block("fold.done")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(n.type)
        acc = builder.phi(_F64xL)
        i.add_incoming(ir.Constant(n.type, 0), entry)
        acc.add_incoming(start, entry)
        builder.cbranch(builder.icmp_signed("<", i, n), body, done)
        builder.position_at_end(body)
        ptr = builder.bitcast(builder.gep(val_arr.data, [i]), _F32xL.as_pointer())
        block = builder.load(ptr, align=4)
        acc_next = builder.fadd(acc, builder.fpext(block, _F64xL))
        i.add_incoming(builder.add(i, step), body)
        acc.add_incoming(acc_next, body)
        builder.branch(head)
        builder.position_at_end(done)
        builder.store(acc, acc_ptr, align=8)
        return context.get_dummy_value()

    return types.void(lanes, values, count), codegen


@intrinsic
def permuted(typingctx, x, axes):
    """``np.transpose(x, axes)`` for generated code: a view of ``x`` (layout "A") with its
    shape and strides permuted by ``axes`` (valid axes, as the graph's transpose holds).

    Numba's own transpose with axes checks them with a helper it compiles once per
    process and rank, whose error path formats strings: about 5 s of the transformer
    step's cold compile (`tools/compile_profile.py`), paid again by every compile
    process. This only loads and stores the shape and stride words."""
    if not (isinstance(x, types.Array) and isinstance(axes, types.BaseTuple)
            and len(axes) == x.ndim and all(isinstance(t, types.Integer) for t in axes)):
        return None
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed
    from numba.np.arrayobj import populate_array

    def codegen(context, builder, signature, args):
        aryty, axty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        words = ir.ArrayType(intp, aryty.ndim)
        zero = ir.Constant(ir.IntType(32), 0)
        shape, strides = cgutils.alloca_once(builder, words), cgutils.alloca_once(builder, words)
        builder.store(ary.shape, shape)
        builder.store(ary.strides, strides)
        new_shape, new_strides = [], []
        for i in range(aryty.ndim):
            axis = context.cast(builder, builder.extract_value(args[1], i), axty[i],
                                types.intp)
            new_shape.append(builder.load(builder.gep(shape, [zero, axis])))
            new_strides.append(builder.load(builder.gep(strides, [zero, axis])))
        out = context.make_array(signature.return_type)(context, builder)
        populate_array(out, data=ary.data, shape=cgutils.pack_array(builder, new_shape),
                       strides=cgutils.pack_array(builder, new_strides),
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
        return impl_ret_borrowed(context, builder, signature.return_type, out._getvalue())

    return x.copy(layout="A")(x, axes), codegen


@intrinsic
def strided(typingctx, x, shape, strides):
    """A view of ``x``'s memory (layout "A") with ``shape`` and ``strides`` in bytes, for
    generated code that has worked out that such a view holds (a reshape that only splits
    axes of a strided array): no check, no copy."""
    ok = (isinstance(x, types.Array) and isinstance(shape, types.BaseTuple)
          and isinstance(strides, types.BaseTuple) and len(shape) == len(strides) > 0
          and all(isinstance(t, types.Integer) for t in (*shape, *strides)))
    if not ok:
        return None
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed
    from numba.np.arrayobj import populate_array

    def codegen(context, builder, signature, args):
        aryty, shty, stty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        dims = [context.cast(builder, builder.extract_value(args[1], k), shty[k], types.intp)
                for k in range(len(shty))]
        steps = [context.cast(builder, builder.extract_value(args[2], k), stty[k],
                              types.intp) for k in range(len(stty))]
        out = context.make_array(signature.return_type)(context, builder)
        populate_array(out, data=ary.data, shape=cgutils.pack_array(builder, dims),
                       strides=cgutils.pack_array(builder, steps),
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
        return impl_ret_borrowed(context, builder, signature.return_type, out._getvalue())

    return x.copy(layout="A", ndim=len(shape))(x, shape, strides), codegen


def _allocate_c(context, builder, out_type, dims):
    """A new C-ordered array of ``out_type`` and shape ``dims`` (LLVM intp values) from
    Numba's runtime, its fields filled in place; returns the array's structure proxy."""
    from numba.core import cgutils
    from numba.np.arrayobj import populate_array

    out = context.make_array(out_type)(context, builder)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
        context.get_data_type(out_type.dtype)))
    strides = list(dims)
    step = itemsize
    for k in reversed(range(len(dims))):
        strides[k] = step
        step = builder.mul(step, dims[k])
    meminfo = context.nrt.meminfo_alloc_aligned(builder, size=step, align=32)
    data = context.nrt.meminfo_data(builder, meminfo)
    populate_array(out, data=builder.bitcast(data, out.data.type),
                   shape=cgutils.pack_array(builder, dims),
                   strides=cgutils.pack_array(builder, strides),
                   itemsize=itemsize, meminfo=meminfo)
    return out


def _as_c(context, builder, aryty, value):
    """``np.ascontiguousarray`` of ``value`` (an array of type ``aryty``) as inline code,
    a new reference: a C-ordered array (or a 1-D F-ordered one) is itself, an "A" array is
    itself when its strides are C-ordered, checked at run time, and anything else is
    copied element by element into a new C-ordered array.

    Numba's own lowering compiles its contiguity check as a function of its own once per
    process and rank, and its copy's allocator once per array type, and links both into
    every kernel that uses them, to be optimised again there: about half a second of a
    cold compile for each kernel that reshapes a strided view."""
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed
    from numba.np.arrayobj import _as_layout_array

    c_type = aryty.copy(layout="C", ndim=max(aryty.ndim, 1), readonly=False)
    if aryty.ndim == 0:
        return _as_layout_array(context, builder, c_type(aryty), [value], output_layout="C")
    if aryty.layout == "C" or (aryty.ndim == 1 and aryty.layout == "F"):
        return impl_ret_borrowed(context, builder, c_type, value)
    ary = context.make_array(aryty)(context, builder, value)
    dims = cgutils.unpack_tuple(builder, ary.shape, aryty.ndim)
    steps = cgutils.unpack_tuple(builder, ary.strides, aryty.ndim)

    def copy():
        out = _allocate_c(context, builder, c_type, dims)
        intp = context.get_value_type(types.intp)
        with cgutils.loop_nest(builder, dims, intp) as idx:
            src = cgutils.get_item_pointer2(context, builder, ary.data, dims, steps,
                                            aryty.layout, idx)
            dst = cgutils.get_item_pointer2(context, builder, out.data, dims, [],
                                            "C", idx)
            builder.store(builder.load(src), dst)
        return out._getvalue()

    if aryty.layout != "A":
        return copy()
    # C-ordered when every axis longer than 1 has the stride of the axes after it.
    one = context.get_constant(types.intp, 1)
    want = ary.itemsize
    ok = cgutils.true_bit
    for k in reversed(range(aryty.ndim)):
        fits = builder.or_(builder.icmp_signed("<=", dims[k], one),
                           builder.icmp_signed("==", steps[k], want))
        ok = builder.and_(ok, fits)
        want = builder.mul(want, dims[k])
    with builder.if_else(ok, likely=True) as (then, otherwise):
        with then:
            same = impl_ret_borrowed(context, builder, c_type, value)
            same_block = builder.block
        with otherwise:
            copied = copy()
            copied_block = builder.block
    out = builder.phi(same.type)
    out.add_incoming(same, same_block)
    out.add_incoming(copied, copied_block)
    return out


@intrinsic
def contiguous(typingctx, x):
    """``np.ascontiguousarray(x)`` for generated code, as lowered code rather than a
    function: a C-ordered array is itself, any other is checked at run time (when its
    layout is not known when typed) and copied if it is not C-ordered.

    Numba's ``np.ascontiguousarray`` is an overload compiled as a function of its own once
    per process and argument type, then linked into and optimised again with every
    kernel that calls it: 7-9 compiles and about 1.2 s of a transformer or cnn step's cold
    compile (`tools/compile_profile.py`), for what is most often the identity."""
    if not isinstance(x, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return _as_c(context, builder, signature.args[0], args[0])

    return x.copy(layout="C", ndim=max(x.ndim, 1), readonly=False)(x), codegen


@intrinsic
def flat(typingctx, x):
    """``x.reshape(x.size)`` for generated code: a 1-D view of a C-ordered ``x``; any
    other ``x`` is made C-ordered first (as `contiguous`: copied only when it is not), so
    only the view of an array allocated C-ordered is written through.

    Numba's ``reshape`` checks the new shape against the old one and computes strides in
    a loop, lowered at every call site; this loads the shape words and multiplies them."""
    if not isinstance(x, types.Array):
        return None
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
    from numba.np.arrayobj import populate_array

    c_type = x.copy(layout="C", ndim=max(x.ndim, 1), readonly=False)
    out_type = x.copy(layout="C", ndim=1, readonly=not x.mutable and x.layout == "C")

    def codegen(context, builder, signature, args):
        aryty, value = signature.args[0], args[0]
        copied = aryty.layout != "C" or aryty.ndim == 0
        if copied:
            value = _as_c(context, builder, aryty, value)
            aryty = c_type
        ary = context.make_array(aryty)(context, builder, value)
        dims = cgutils.unpack_tuple(builder, ary.shape, aryty.ndim)
        size = dims[0]
        for d in dims[1:]:
            size = builder.mul(size, d)
        out = context.make_array(signature.return_type)(context, builder)
        populate_array(out, data=ary.data, shape=cgutils.pack_array(builder, [size]),
                       strides=cgutils.pack_array(builder, [ary.itemsize]),
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
        if copied:
            # The C-ordered array is a reference of its own (the input or a copy): the
            # view takes it over.
            return impl_ret_new_ref(context, builder, signature.return_type,
                                    out._getvalue())
        return impl_ret_borrowed(context, builder, signature.return_type, out._getvalue())

    return out_type(x), codegen


@intrinsic
def one_d(typingctx, x):
    """A 0-d array argument as the ``(1,)`` array the kernel's statements index (a view of
    the same element); any other array as it is. Kernels take a 0-d value as the 0-d
    array its tensor holds, which the caller then neither views nor reshapes."""
    if not isinstance(x, types.Array):
        return None
    from numba.core.imputils import impl_ret_borrowed
    from numba.np.arrayobj import _as_layout_array

    if x.ndim:
        def same(context, builder, signature, args):
            return impl_ret_borrowed(context, builder, signature.return_type, args[0])
        return x(x), same

    def view(context, builder, signature, args):
        return _as_layout_array(context, builder, signature, args, output_layout="C")
    return x.copy(ndim=1, layout="C")(x), view


@intrinsic
def reshaped(typingctx, x, shape):
    """``x.reshape(shape)`` for generated code, ``shape`` a tuple of integers with ``x``'s
    size (the kernel IR's reshapes are checked when they are built): a C-ordered view of
    ``x``, made C-ordered first as `flat` does.

    Numba's ``reshape`` is about 20 ms of compile per call site (its checks and stride
    computation, lowered each time); this is a few multiplications."""
    if not (isinstance(x, types.Array) and isinstance(shape, types.BaseTuple) and len(shape)
            and all(isinstance(t, types.Integer) for t in shape)):
        return None
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
    from numba.np.arrayobj import populate_array

    c_type = x.copy(layout="C", ndim=max(x.ndim, 1), readonly=False)
    out_type = x.copy(layout="C", ndim=len(shape), readonly=not x.mutable and x.layout == "C")

    def codegen(context, builder, signature, args):
        aryty, shty = signature.args
        value = args[0]
        copied = aryty.layout != "C" or aryty.ndim == 0
        if copied:
            value = _as_c(context, builder, aryty, value)
            aryty = c_type
        ary = context.make_array(aryty)(context, builder, value)
        dims = [context.cast(builder, builder.extract_value(args[1], k), shty[k], types.intp)
                for k in range(len(shty))]
        strides = list(dims)
        step = ary.itemsize
        for k in reversed(range(len(dims))):
            strides[k] = step
            step = builder.mul(step, dims[k])
        out = context.make_array(signature.return_type)(context, builder)
        populate_array(out, data=ary.data, shape=cgutils.pack_array(builder, dims),
                       strides=cgutils.pack_array(builder, strides),
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
        ret = impl_ret_new_ref if copied else impl_ret_borrowed
        return ret(context, builder, signature.return_type, out._getvalue())

    return out_type(x, shape), codegen


@intrinsic
def empty(typingctx, shape, dtype):
    """``np.empty(shape, dtype)`` (C order) for generated code, as lowered code: an
    allocation from Numba's runtime, the array's fields filled in place.

    Numba's ``np.empty`` is an overload compiled as a function of its own, with its
    allocator, once per process and array type, then linked into and optimised again
    with every kernel that calls it."""
    if not (isinstance(shape, types.BaseTuple) and len(shape)
            and all(isinstance(t, types.Integer) for t in shape)
            and isinstance(dtype, (types.NumberClass, types.DType))):
        return None
    from numba.core.imputils import impl_ret_new_ref

    out_type = types.Array(dtype.dtype, len(shape), "C")

    def codegen(context, builder, signature, args):
        shty = signature.args[0]
        dims = [context.cast(builder, builder.extract_value(args[0], k), shty[k], types.intp)
                for k in range(len(shty))]
        out = _allocate_c(context, builder, out_type, dims)
        return impl_ret_new_ref(context, builder, out_type, out._getvalue())

    return out_type(shape, dtype), codegen


@cached_njit(inline="always", error_model="numpy")
def exp_f32(x):
    xc = x if x < _EXP_HI else _EXP_HI
    xc = xc if xc > _EXP_LO else _EXP_LO
    n = np.floor(xc * _LOG2E + _HALF)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    # 2**n as two normal powers of two, so results down to the denormals scale exactly.
    ni = np.int32(n)
    n1 = ni >> 1
    n2 = ni - n1
    res = p * _f32_from_bits((n1 + 127) << 23) * _f32_from_bits((n2 + 127) << 23)
    return x if x != x else res


@cached_njit(inline="always", error_model="numpy")
def tanh_f32(x):
    # Each clamp keeps x when the comparison is false, so nan passes through unchanged.
    xc = _TANH_CLAMP if x > _TANH_CLAMP else x
    xc = -_TANH_CLAMP if xc < -_TANH_CLAMP else xc
    t = xc * xc
    p = _TP4
    p = p * t + _TP3
    p = p * t + _TP2
    p = p * t + _TP1
    p = p * t + _TP0
    q = _TQ4
    q = q * t + _TQ3
    q = q * t + _TQ2
    q = q * t + _TQ1
    q = q * t + _TQ0
    r = xc * p / q
    r = _ONE if r > _ONE else r
    return -_ONE if r < -_ONE else r


@cached_njit(inline="always", error_model="numpy")
def erf_f32(x):
    a = abs(x)
    ac = _ERF_CLAMP if a > _ERF_CLAMP else a  # nan stays nan
    t = ac * ac
    p = _EA6
    p = p * t + _EA5
    p = p * t + _EA4
    p = p * t + _EA3
    p = p * t + _EA2
    p = p * t + _EA1
    p = p * t + _EA0
    u = ac - _ERF_CENTER
    q = _EB9
    q = q * u + _EB8
    q = q * u + _EB7
    q = q * u + _EB6
    q = q * u + _EB5
    q = q * u + _EB4
    q = q * u + _EB3
    q = q * u + _EB2
    q = q * u + _EB1
    q = q * u + _EB0
    tail = _ONE - exp_f32(q)
    tail = tail if x >= 0 else -tail
    return x * p if a < _ERF_SPLIT else (_ONE if x > _ERF_CLAMP else (
        -_ONE if x < -_ERF_CLAMP else tail))


@cached_njit(inline="always", error_model="numpy")
def sigmoid_f32(x):
    return _ONE / (_ONE + exp_f32(-x))


@cached_njit(inline="always", error_model="numpy")
def sigmoid_f64(x):
    return 1.0 / (1.0 + np.exp(-x))


@cached_njit(inline="always", error_model="numpy")
def reduce_precision(x, mbits, ebits):
    # ``ops.precision``'s rounding, element by element, in float64 (exact for float32).
    v = np.float64(x)
    if not np.isfinite(v):
        return v
    m = int(mbits)
    half = 1 << (int(ebits) - 1)
    e = max(math.frexp(v)[1] - 1, 2 - half)
    step = math.ldexp(1.0, e - m)
    r = np.rint(v / step) * step
    if abs(r) > (2.0 - math.ldexp(1.0, -m)) * math.ldexp(1.0, half - 1):
        return math.copysign(math.inf, v)
    return r


# --------------------------------------------------------------- special functions
# Scalar float64 functions the special-function ops lower to (``ops/special.py``); float32
# nodes cast their result. They are branchy series, not vector code, so they are not
# inlined. polygamma(n, x) is (-1)^(n+1) n! zeta(n + 1, x) for n >= 1, with the Hurwitz zeta
# summed directly until the argument reaches ``_ZETA_SHIFT + n`` and finished by
# Euler-Maclaurin; digamma (n = 0) shifts the same way and uses its asymptotic series, with
# reflection for negative arguments. erfinv starts from Giles' single-precision
# approximation ("Approximating the erfinv function", GPU Computing Gems, 2011) and takes
# Newton steps until they stop changing it: on erf in the body, on log(erfc) in the
# tails (where 1 - |y| is exact and erf's slope vanishes).
_BERNOULLI = (1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0,
              7.0 / 6.0, -3617.0 / 510.0)
_ZETA_SHIFT = 12.0


@cached_njit(error_model="numpy")
def _digamma(x):
    if x == 0.0:
        return -math.copysign(math.inf, x)
    acc = 0.0
    if x < 0.0:  # reflection, psi(x) = psi(1 - x) - pi / tan(pi x); no recursion in Numba
        if x == math.floor(x):
            return math.nan
        acc = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < _ZETA_SHIFT:
        acc -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = 0.0
    power = inv2
    for k in range(len(_BERNOULLI)):
        series += _BERNOULLI[k] / (2.0 * (k + 1)) * power
        power *= inv2
    return acc + math.log(x) - 0.5 / x - series


@cached_njit(error_model="numpy")
def polygamma(n, x):
    n = int(n)
    x = float(x)
    if math.isnan(x):
        return math.nan
    if n == 0:
        return _digamma(x)
    sign = 1.0 if n % 2 == 1 else -1.0
    if x <= 0.0 and x == math.floor(x):
        return sign * math.inf
    s = n + 1.0
    total = 0.0
    while x < _ZETA_SHIFT + n:
        total += x ** -s
        x += 1.0
    total += x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** -s
    rising = s  # s (s+1) ... (s+2j-2)
    fact = 2.0  # (2j)!
    power = x ** (-s - 1.0)
    for j in range(len(_BERNOULLI)):
        total += _BERNOULLI[j] / fact * rising * power
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2)
        fact *= (2 * j + 3) * (2 * j + 4)
        power /= x * x
    return sign * math.gamma(n + 1.0) * total


@cached_njit(error_model="numpy")
def erfinv(y):
    y = float(y)
    if math.isnan(y) or y < -1.0 or y > 1.0:
        return math.nan
    if y == 1.0 or y == -1.0:
        return math.copysign(math.inf, y)
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    x = abs(p * y)
    a = abs(y)
    t = 1.0 - a  # exact for a >= 0.5
    for _ in range(8):
        e = math.exp(-x * x) * 1.1283791670955126  # erf'(x)
        if a > 0.5:
            # Newton on log(erfc(x)) = log(1 - |y|): nearly linear in the tail, where the
            # plain equation's slope vanishes and Newton on it crawls.
            c = math.erfc(x)
            step = (math.log(t) - math.log(c)) * c / e
        else:
            step = (math.erf(x) - a) / e
        x -= step
        if abs(step) <= 1e-16 * x:
            break
    return math.copysign(x, y)


# The modified Bessel functions I0 and I1. Below _BESSEL_SERIES_END the power series
# sum_k (x/2)^(2k+n) / (k! (k+n)!), whose terms are all positive, so it does not cancel;
# above it the asymptotic series e^x / sqrt(2 pi x) sum_k (-1)^k a_k(n) / x^k, whose smallest
# term there (about e^(-2x)) is below double precision. ``scaled`` multiplies by e^(-|x|).
# As PyTorch's, the unscaled forms are e^|x| times the scaled ones past the series (so they
# overflow where e^|x| does, and are NaN at infinity).
_BESSEL_SERIES_END = 20.0


@cached_njit(error_model="numpy")
def bessel_i(n, scaled, x):
    n = int(n)
    x = float(x)
    if math.isnan(x):
        return math.nan
    ax = abs(x)
    sign = -1.0 if (n == 1 and x < 0.0) else 1.0
    if ax <= _BESSEL_SERIES_END:
        q = 0.25 * ax * ax
        term = 1.0 if n == 0 else 0.5 * ax
        total = term
        k = 0
        while term > total * 1e-17:
            k += 1
            term *= q / (k * (k + n))
            total += term
        if scaled:
            total *= math.exp(-ax)
        return sign * total
    total = 0.0
    if ax < math.inf:
        mu = 4.0 * n * n
        term = 1.0
        total = 1.0
        for k in range(1, 60):
            nxt = -term * (mu - (2.0 * k - 1.0) ** 2) / (8.0 * k * ax)
            if abs(nxt) >= abs(term):
                break
            term = nxt
            total += term
            if abs(term) < total * 1e-17:
                break
        total /= math.sqrt(2.0 * math.pi * ax)
    if not scaled:
        total *= math.exp(ax)
    return sign * total


# ------------------------------------------------------ batched inverse and determinant
# One (batch, n, n) operand; LAPACK through Numba's np.linalg per matrix.


@cached_njit()
def batched_inv(a, out):
    for b in range(a.shape[0]):
        out[b] = np.linalg.inv(np.ascontiguousarray(a[b]))


@cached_njit()
def batched_det(a, out):
    for b in range(a.shape[0]):
        out[b] = np.linalg.det(np.ascontiguousarray(a[b]))



# ------------------------------------------------------------------ stable argsort
# Compiled once per dtype and layout (and kept in Numba's disk cache) rather than written
# out inline by every argsort node: a merge sort's loops cost each kernel holding one
# seconds of compile. Called by kernels alone, so no Python or C entry of its own.


@cached_njit(**HELPER_JIT)
def argsort_lines(t, out, descending):
    """A stable sort's permutation of each row of ``t`` (m, n) into ``out`` (m, n) int64:
    a bottom-up merge sort whose runs being merged and merged runs take turns in the two
    rows of one index buffer. NaN is the largest value (NumPy's and PyTorch's order)."""
    m, n = t.shape
    u = np.empty((2, max(n, 1)), np.int64)
    # The line's values in a contiguous copy: the merges read them out of order, and a
    # line along another axis than the last is strided.
    v = np.empty(max(n, 1), t.dtype)
    passes = 0  # widths 1, 2, 4, ... below n
    while (1 << passes) < n:
        passes += 1
    for i in range(m):
        for j in range(n):
            u[0, j] = j
            v[j] = t[i, j]
        for ps in range(passes):
            w = 1 << ps
            sr = ps % 2
            dr = 1 - sr
            for lo in range(0, n, 2 * w):
                mid = min(lo + w, n)
                hi = min(lo + 2 * w, n)
                p = lo
                q = mid
                for j in range(lo, hi):
                    # The right run's element goes first only if strictly before: stable.
                    right = q < hi
                    if right and p < mid:
                        a = v[u[sr, q]]
                        b = v[u[sr, p]]
                        if descending:
                            right = a > b or (a != a and b == b)
                        else:
                            right = a < b or (b != b and a == a)
                    if right:
                        u[dr, j] = u[sr, q]
                        q += 1
                    else:
                        u[dr, j] = u[sr, p]
                        p += 1
        for j in range(n):
            out[i, j] = u[passes % 2, j]
