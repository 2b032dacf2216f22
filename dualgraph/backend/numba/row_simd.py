"""Vector helpers of the row routines (`row_kernels`) that LLVM does not vectorise from
a loop written in Python.

A running maximum ``m = v if v > m else m`` is a reduction whose order LLVM may not
change without no-nans fast-math flags, so a row's max ran as a serial chain of compares,
one element at a time. `max_lanes` keeps ``LANES`` running maxima as one vector value in
registers.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .kernels import LANES


def _contiguous(values: types.Type) -> bool:
    """Whether ``values`` is a C-ordered array or a raw pointer (to contiguous values)."""
    return (isinstance(values, types.CPointer)
            or (isinstance(values, types.Array) and values.layout == "C"))


def _data(context: Any, builder: Any, ty: types.Type, value: Any) -> Any:
    """The pointer to the first value of ``value`` (an array or a pointer)."""
    if isinstance(ty, types.CPointer):
        return value
    return context.make_array(ty)(context, builder, value).data


@intrinsic
def lane_max(typingctx, values, count):
    """The max of the first ``count`` values of ``values`` (a contiguous float array or a pointer)
    (``count`` a multiple of LANES, at least LANES): LANES running maxima over the blocks,
    then a halving tree over the lanes. A compare keeps its old value when the new one is
    not greater (a nan is never taken; one at the start stays), so the result is the
    serial loop's for a row without nan, up to the sign of a zero."""
    ok = (_contiguous(values) and values.dtype in (types.float32, types.float64)
          and isinstance(count, types.Integer))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        elem = context.get_value_type(signature.args[0].dtype)
        vec = ir.VectorType(elem, LANES)
        data = _data(context, builder, signature.args[0], args[0])
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        # Hidden from LLVM, as in `kernels.fold_lanes`: a constant count would unroll.
        n = builder.asm(ir.FunctionType(n.type, [n.type]), "", "=r,0", [n], False)
        step = ir.Constant(n.type, LANES)

        def load(i):
            ptr = builder.bitcast(builder.gep(data, [i]), vec.as_pointer())
            return builder.load(ptr, align=4)

        def vmax(a, b):
            return builder.select(builder.fcmp_ordered(">", b, a), b, a)

        start = load(ir.Constant(n.type, 0))
        entry = builder.block
        head = builder.append_basic_block("max.head")
        body = builder.append_basic_block("max.body")
        done = builder.append_basic_block("max.done")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(n.type)
        acc = builder.phi(vec)
        i.add_incoming(step, entry)
        acc.add_incoming(start, entry)
        builder.cbranch(builder.icmp_signed("<", i, n), body, done)
        builder.position_at_end(body)
        i.add_incoming(builder.add(i, step), body)
        acc.add_incoming(vmax(acc, load(i)), body)
        builder.branch(head)
        builder.position_at_end(done)
        width, v = LANES, acc
        while width > 1:
            width //= 2
            half = ir.VectorType(ir.IntType(32), width)
            lo = builder.shuffle_vector(v, v, ir.Constant(half, list(range(width))))
            hi = builder.shuffle_vector(v, v, ir.Constant(half, [width + k
                                                                 for k in range(width)]))
            v = vmax(lo, hi)
        return builder.extract_element(v, ir.Constant(ir.IntType(32), 0))

    return values.dtype(values, count), codegen


@intrinsic
def lane_sum(typingctx, values, count):
    """The float64 sum of the first ``count`` float32 values (a multiple of LANES) added
    as `kernels.fold_lanes` adds them into zeroed lanes, then the lanes in order onto
    0.0: the same additions as that lane loop, so the same bits, with the lanes kept in
    registers rather than stored and read back one by one."""
    ok = (_contiguous(values) and values.dtype == types.float32
          and isinstance(count, types.Integer))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        f64 = ir.DoubleType()
        vec64, vec32 = ir.VectorType(f64, LANES), ir.VectorType(ir.FloatType(), LANES)
        data = _data(context, builder, signature.args[0], args[0])
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        n = builder.asm(ir.FunctionType(n.type, [n.type]), "", "=r,0", [n], False)
        step = ir.Constant(n.type, LANES)
        entry = builder.block
        head = builder.append_basic_block("sum.head")
        body = builder.append_basic_block("sum.body")
        done = builder.append_basic_block("sum.done")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(n.type)
        acc = builder.phi(vec64)
        i.add_incoming(ir.Constant(n.type, 0), entry)
        acc.add_incoming(ir.Constant(vec64, [0.0] * LANES), entry)
        builder.cbranch(builder.icmp_signed("<", i, n), body, done)
        builder.position_at_end(body)
        ptr = builder.bitcast(builder.gep(data, [i]), vec32.as_pointer())
        block = builder.load(ptr, align=4)
        i.add_incoming(builder.add(i, step), body)
        acc.add_incoming(builder.fadd(acc, builder.fpext(block, vec64)), body)
        builder.branch(head)
        builder.position_at_end(done)
        total = ir.Constant(f64, 0.0)
        for k in range(LANES):
            total = builder.fadd(total, builder.extract_element(acc, ir.Constant(
                ir.IntType(32), k)))
        return total

    return types.float64(values, count), codegen
