"""Raw memory for the library's C routines (`library`): a pointer's offset, a scratch
buffer from Numba's allocator and its release.

The routines work on pointers and raw buffers, not arrays: an array brings its shape,
strides and reference counting into every expression that makes, slices or indexes it,
code that Numba types and lowers, and LLVM optimises, in each routine on a fresh
installation's first compile. A pointer is indexed (``p[i]``) as a C array.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic


@intrinsic
def at(typingctx, p, off):
    """The pointer ``off`` elements past ``p``."""
    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [args[1]])

    return p(p, off), codegen


@intrinsic
def alloc(typingctx, like, n):
    """A buffer of ``n`` elements of the dtype of ``like`` (a pointer, an array, or a
    scalar of that dtype), as a raw pointer from Numba's allocator, to be given back with
    `free`."""
    dtype = like.dtype if isinstance(like, (types.Array, types.CPointer)) else like

    def codegen(context, builder, signature, args):
        elem = context.get_value_type(dtype)
        count = context.cast(builder, args[1], signature.args[1], types.intp)
        size = builder.mul(count, context.get_constant(types.intp,
                                                       context.get_abi_sizeof(elem)))
        # At least one byte: a zero-length request still gives a pointer to free.
        one = context.get_constant(types.intp, 1)
        size = builder.select(builder.icmp_signed("<", size, one), one, size)
        return builder.bitcast(context.nrt.allocate(builder, size), elem.as_pointer())

    return types.CPointer(dtype)(like, n), codegen


@intrinsic
def free(typingctx, p):
    """Give back a buffer of `alloc`."""
    def codegen(context, builder, signature, args):
        context.nrt.free(builder, builder.bitcast(args[0], cgutils.voidptr_t))
        return context.get_dummy_value()

    return types.void(p), codegen


@intrinsic
def zero(typingctx, p, off, n):
    """Zero ``n`` elements of ``p`` from ``off`` on (one ``memset``: a float's zero is
    all zero bits), a call rather than a loop for LLVM to vectorise in each routine."""
    def codegen(context, builder, signature, args):
        elem = context.get_value_type(signature.args[0].dtype)
        count = context.cast(builder, args[2], signature.args[2], types.intp)
        size = builder.mul(count, context.get_constant(types.intp,
                                                       context.get_abi_sizeof(elem)))
        # No elements (a count below one) writes nothing.
        none = context.get_constant(types.intp, 0)
        size = builder.select(builder.icmp_signed("<", size, none), none, size)
        start = builder.bitcast(builder.gep(args[0], [args[1]]), cgutils.voidptr_t)
        cgutils.memset(builder, start, size, 0)
        return context.get_dummy_value()

    return types.void(p, off, n), codegen
