#!/usr/bin/env python3
"""tests/tools/shape_goldens.py — writes tests/lang/shape.shf and tests/lang/index.shf.

Every expected tensor is NumPy's str() of the same computation (float32 for bracket literals,
int32 for `range`/quoted integer lists), so the goldens are NumPy-verified by construction.
Edit the cases here and rerun:
    python3 tests/tools/shape_goldens.py
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LANG = os.path.join(HERE, "..", "lang")


def F(a):
    return str(np.array(a, dtype=np.float32))


def I(a):
    return str(np.array(a, dtype=np.int32))


def f(v):  # float scalar
    return str(np.float32(v))


def L(xs):  # list of ints or printed values
    return "[" + ", ".join(str(x) for x in xs) + "]"


def T(*xs):
    return "(" + ", ".join(xs) + ")"


def E(msg):
    return "!! " + msg


def r(n, *shape):  # (reshape (range n) ...) as int32
    return np.arange(n, dtype=np.int32).reshape(shape)


A234 = r(24, 2, 3, 4)
M34 = r(12, 3, 4)
M23 = r(6, 2, 3)
F33 = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.float32)
EMB = r(12, 4, 3)

SHAPE = [
    "Shape queries: lists of ints, usable as shape arguments and indexable.",
    ("(shape [[1 2 3] [4 5 6]])", L([2, 3])),
    ("(shape (reshape (range 12) 2 3 2))", L([2, 3, 2])),
    ("(shape 5)", "[]"),
    ("(shape 2.5)", "[]"),
    ("(shape [1 2 3] 0)", "3"),
    ("(shape (reshape (range 12) 2 3 2) -1)", "2"),
    ("(shape (reshape (range 12) 2 3 2) 1)", "3"),
    ("(shape [1 2 3] 1)", E("shape: axis 1 out of range for rank 1")),
    ("(nth (shape (reshape (range 6) 2 3)) 1)", "3"),
    ("(get (shape (reshape (range 6) 2 3)) 0)", "2"),
    ("(shape '[[1 2] [3 4] [5 6]])", L([3, 2])),
    ("(zeros (shape (reshape (range 6) 2 3)))", F(np.zeros((2, 3)))),
    ("(ones (shape [[1 2 3] [4 5 6]] 1))", F(np.ones(3))),
    ("(shape (shape [[1 2 3] [4 5 6]]))", L([2])),
    ("(shape \"abc\")", E("shape: argument 1 must be a tensor")),
    ("(ndim 3)", "0"),
    ("(ndim [[1 2] [3 4]])", "2"),
    ("(ndim (reshape (range 24) 2 3 4))", "3"),
    "reshape: a shape list, a 1-D tensor, or several ints; one -1 is inferred; dtype kept.",
    ("(reshape (range 6) '[2 3])", I(r(6, 2, 3))),
    ("(reshape (range 6) 3 2)", I(r(6, 3, 2))),
    ("(reshape (range 6) [3 2])", I(r(6, 3, 2))),
    ("(reshape (range 6) '[-1 2])", I(r(6, 3, 2))),
    ("(reshape (range 6) 2 -1)", I(r(6, 2, 3))),
    ("(reshape [[1 2] [3 4]] '[4])", F([1, 2, 3, 4])),
    ("(reshape (range 6) (shape (reshape (range 6) 3 2)))", I(r(6, 3, 2))),
    ("(reshape (range 6) 6)", I(np.arange(6))),
    ("(reshape 7 '[1 1])", I([[7]])),
    ("(reshape [5] '[])", f(5)),
    ("(shape (reshape (range 24) 2 -1 4))", L([2, 3, 4])),
    ("(reshape (range 6) '[4 2])", E("reshape: cannot reshape i32[6] (6 elements) into [4, 2] (8 elements)")),
    ("(reshape (range 7) -1 2)", E("reshape: cannot reshape i32[7] (7 elements) into [-1, 2]")),
    ("(reshape (range 6) -1 -1)", E("at most one -1")),
    "transpose / tr (no perm: reverse the axes), swapaxes.",
    ("(transpose [[1 2 3] [4 5 6]])", F(np.array([[1, 2, 3], [4, 5, 6]]).T)),
    ("(tr (reshape (range 6) 2 3))", I(M23.T)),
    ("(transpose (reshape (range 24) 2 3 4))", I(A234.transpose())),
    ("(transpose (reshape (range 24) 2 3 4) '[1 0 2])", I(A234.transpose(1, 0, 2))),
    ("(transpose (reshape (range 24) 2 3 4) '[0 -1 1])", I(A234.transpose(0, 2, 1))),
    ("(transpose (reshape (range 24) 2 3 4) [2 0 1])", I(A234.transpose(2, 0, 1))),
    ("(transpose [1 2 3])", F([1, 2, 3])),
    ("(transpose 5)", "5"),
    ("(transpose (reshape (range 6) 2 3) '[0 0])", E("transpose: [0, 0] is not a permutation of the axes of i32[2x3]")),
    ("(transpose (range 6) '[1 0])", E("transpose: [1, 0] is not a permutation of the axes of i32[6]")),
    ("(swapaxes (reshape (range 24) 2 3 4) 0 2)", I(np.swapaxes(A234, 0, 2))),
    ("(swapaxes (reshape (range 6) 2 3) -1 0)", I(M23.T)),
    ("(swapaxes [1 2] 0 1)", E("swapaxes: axis 1 out of range for rank 1")),
    "slice: half-open, negative indices, bounds clamped like Python; lists and strings too.",
    ("(slice (range 10) 2 5)", I(np.arange(10)[2:5])),
    ("(slice (range 10) 7)", I(np.arange(10)[7:])),
    ("(slice (range 10) -3)", I(np.arange(10)[-3:])),
    ("(slice (range 10) 2 -2)", I(np.arange(10)[2:-2])),
    ("(slice (range 10) 8 100)", I(np.arange(10)[8:100])),
    ("(slice (range 10) 5 2)", I(np.arange(10)[5:2])),
    ("(slice (range 10) 3 nil)", I(np.arange(10)[3:])),
    ("(slice (reshape (range 12) 3 4) 1 3 :axis 1)", I(M34[:, 1:3])),
    ("(slice (reshape (range 12) 3 4) 1 :axis -1)", I(M34[:, 1:])),
    ("(slice (reshape (range 12) 3 4) 1 2)", I(M34[1:2])),
    ("(slice [[1 2] [3 4]] -1)", F([[3, 4]])),
    ("(slice '[1 2 3 4] 1 3)", L([2, 3])),
    ("(slice '[1 2 3 4] -1)", L([4])),
    ("(slice \"hello\" 1 3)", "el"),
    ("(slice \"hello\" -3)", "llo"),
    ("(slice [[1 2] [3 4]] 0 1 :axis 2)", E("slice: axis 2 out of range for rank 2")),
    ("(slice 5 0 1)", E("slice: cannot slice a scalar")),
    "roll: circular shift; without :axis the flattened tensor is rolled.",
    ("(roll (range 5) 2)", I(np.roll(np.arange(5), 2))),
    ("(roll (range 5) -1)", I(np.roll(np.arange(5), -1))),
    ("(roll (range 5) 7)", I(np.roll(np.arange(5), 7))),
    ("(roll (reshape (range 6) 2 3) 1)", I(np.roll(M23, 1))),
    ("(roll (reshape (range 6) 2 3) 1 :axis 1)", I(np.roll(M23, 1, axis=1))),
    ("(roll (reshape (range 6) 2 3) 1 :axis 0)", I(np.roll(M23, 1, axis=0))),
    ("(roll (reshape (range 6) 2 3) -1 :axis -1)", I(np.roll(M23, -1, axis=-1))),
    ("(roll [1 2 3] 1 :axis 1)", E("roll: axis 1 out of range for rank 1")),
    "concat: lists → list, strings → string, tensors along :axis (default 0), quoted nested lists with :axis as arrays.",
    ("(concat '[1 2] '[3])", L([1, 2, 3])),
    ("(concat '[1] nil '[2])", L([1, 2])),
    ("(concat)", "[]"),
    ("(concat \"ab\" \"cd\")", "abcd"),
    ("(concat [1 2] [3])", F([1, 2, 3])),
    ("(concat (range 2) (range 3))", I(np.concatenate([np.arange(2), np.arange(3)]))),
    ("(concat [[1 2]] [[3 4]])", F([[1, 2], [3, 4]])),
    ("(concat [[1 2]] [[3 4]] :axis 1)", F([[1, 2, 3, 4]])),
    ("(concat [[1 2]] [[3 4]] [[5 6]] :axis -1)", F([[1, 2, 3, 4, 5, 6]])),
    ("(concat '[[1 2]] '[[3 4]] :axis 0)", I([[1, 2], [3, 4]])),
    ("(concat '[[1 2]] '[[3 4]] :axis 1)", I([[1, 2, 3, 4]])),
    ("(concat '[[1 2]] '[[3.5 4]] :axis 0)", F([[1, 2], [3.5, 4]])),
    ("(concat (range 2) [0.5])", F([0, 1, 0.5])),
    ("(concat (list [1 2] [3 4]))", F([1, 2, 3, 4])),
    ("(concat (list (reshape (range 4) 2 2) (reshape (range 2) 2 1)) :axis 1)",
     I(np.concatenate([r(4, 2, 2), r(2, 2, 1)], axis=1))),
    ("(concat [[1 2]] [[3 4 5]])", E("concat: shapes f32[1x2] and f32[1x3] differ outside axis 0")),
    ("(concat [1 2] 3)", E("concat: cannot concatenate scalars")),
    ("(concat [1 2] [3] :axis 1)", E("concat: axis 1 out of range for rank 1")),
    ("(concat (range 2) [1 2] :u32)", E("cannot combine i32 and u32")),
    ("(concat '[1] \"a\")", E("concat: cannot concatenate a string with lists")),
    "stack: a list of equal-shape tensors along a new axis.",
    ("(stack (list [1 2] [3 4]))", F([[1, 2], [3, 4]])),
    ("(stack (list [1 2] [3 4]) :axis 1)", F(np.stack([[1, 2], [3, 4]], axis=1))),
    ("(stack (list [1 2] [3 4]) :axis -1)", F(np.stack([[1, 2], [3, 4]], axis=-1))),
    ("(stack (list (range 3) (range 3)))", I(np.stack([np.arange(3)] * 2))),
    ("(shape (stack (list (reshape (range 6) 2 3) (reshape (range 6) 2 3)) :axis 1))", L([2, 2, 3])),
    ("(stack (list (reshape (range 6) 2 3) (reshape (range 6 12) 2 3)) :axis 2)",
     I(np.stack([r(6, 2, 3), r(6, 2, 3) + 6], axis=2))),
    ("(stack (list 1 2 3))", I([1, 2, 3])),
    ("(stack (list (range 2) [0.5 1]))", F([[0, 1], [0.5, 1]])),
    ("(stack (list [1 2] [3 4 5]))", E("stack: shapes differ: f32[2] and f32[3]")),
    ("(stack '[])", E("stack: nothing to stack")),
    ("(stack (list [1 2]) :axis 2)", E("stack: axis 2 out of range for rank 2")),
    "flip: all axes by default, or :axis (an int or a list); lists are reversed.",
    ("(flip (range 4))", I(np.flip(np.arange(4)))),
    ("(flip [[1 2] [3 4]])", F(np.flip([[1, 2], [3, 4]]))),
    ("(flip [[1 2] [3 4]] :axis 0)", F(np.flip([[1, 2], [3, 4]], axis=0))),
    ("(flip [[1 2] [3 4]] :axis -1)", F(np.flip([[1, 2], [3, 4]], axis=-1))),
    ("(flip (reshape (range 8) 2 2 2) :axis '[0 2])", I(np.flip(r(8, 2, 2, 2), axis=(0, 2)))),
    ("(flip '[1 2 3])", L([3, 2, 1])),
    ("(flip [1 2] :axis 1)", E("flip: axis 1 out of range for rank 1")),
    "tril: on and below diagonal k of the last two axes.",
    ("(tril [[1 2 3] [4 5 6] [7 8 9]])", F(np.tril(F33))),
    ("(tril [[1 2 3] [4 5 6] [7 8 9]] 1)", F(np.tril(F33, 1))),
    ("(tril [[1 2 3] [4 5 6] [7 8 9]] -1)", F(np.tril(F33, -1))),
    ("(tril (reshape (range 6) 2 3))", I(np.tril(M23))),
    ("(tril (reshape (range 6) 3 2) 5)", I(np.tril(r(6, 3, 2), 5))),
    ("(tril (reshape (range 8) 2 2 2))", I(np.tril(r(8, 2, 2, 2)))),
    ("(tril [1 2 3])", E("tril: needs at least 2 dimensions, got f32[3]")),
    "where: element-wise select with broadcasting and SPEC §2.3 promotion of a and b.",
    ("(where (> [1 -2 3] 0) [1 -2 3] 0)", F(np.where(np.array([1, -2, 3]) > 0, [1, -2, 3], 0))),
    ("(where [true false] :bool [1 2] [3 4])", F([1, 4])),
    ("(where (> (range 4) 1) (range 4) -1)", I(np.where(np.arange(4) > 1, np.arange(4), -1))),
    ("(where (> (range 4) 1) (range 4) 0.5)", F(np.where(np.arange(4) > 1, np.arange(4), 0.5))),
    ("(where (> (range 4) 1) (range 4) [9 9 9 9])", F([9, 9, 2, 3])),
    ("(where (> [[1] [0]] 0) [1 2 3] [10 20 30])",
     F(np.where(np.array([[1], [0]]) > 0, [1, 2, 3], [10, 20, 30]))),
    ("(where (range 3) 1 0)", I([0, 1, 1])),
    ("(where true 1 2)", "1"),
    ("(where (> [1 2] 0) [1 2] [1 2 3])", E("where: cannot broadcast condition bool[2] with f32[2] and f32[3]")),
    ("(where (> [1 2] 0) (range 2) [1 2] :u32)", E("cannot combine i32 and u32")),
    "tensor-split: n equal parts along :axis (default 0) → list of tensors.",
    ("(tensor-split (range 6) 3)", L([I([0, 1]), I([2, 3]), I([4, 5])])),
    ("(len (tensor-split (reshape (range 8) 2 4) 2 :axis 1))", "2"),
    ("(nth (tensor-split (reshape (range 8) 2 4) 2 :axis 1) 1)", I(np.split(r(8, 2, 4), 2, axis=1)[1])),
    ("(nth (tensor-split (reshape (range 8) 2 4) 2 :axis -1) 0)", I(np.split(r(8, 2, 4), 2, axis=-1)[0])),
    ("(tensor-split (range 5) 2)", E("tensor-split: axis 0 of i32[5] (size 5) is not divisible into 2 equal parts")),
    ("(tensor-split (range 4) 0)", E("not divisible into 0 equal parts")),
    "broadcast: explicit broadcast to a shape.",
    ("(broadcast [1 2 3] '[2 3])", F(np.broadcast_to(np.array([1, 2, 3]), (2, 3)))),
    ("(broadcast 5 '[2 2])", I(np.broadcast_to(5, (2, 2)))),
    ("(broadcast [[1] [2]] (shape (reshape (range 6) 2 3)))", F(np.broadcast_to(np.array([[1], [2]]), (2, 3)))),
    ("(broadcast (range 2) '[2 1 2])", I(np.broadcast_to(np.arange(2), (2, 1, 2)))),
    ("(broadcast [1 2 3] '[2 4])", E("broadcast: cannot broadcast f32[3] to [2, 4]")),
    "append-and-roll: drop the first row, append v (a sliding window).",
    ("(append-and-roll [1 2 3] 4)", F([2, 3, 4])),
    ("(append-and-roll (range 3) 7)", I([1, 2, 7])),
    ("(append-and-roll [[1 2] [3 4]] [5 6])", F([[3, 4], [5, 6]])),
    ("(append-and-roll [[1 2] [3 4]] 0)", F([[3, 4], [0, 0]])),
    ("(append-and-roll (reshape (range 4) 2 2) (reshape (range 2) 1 2))", I([[2, 3], [0, 1]])),
    ("(append-and-roll [[1 2] [3 4]] [5 6 7])", E("append-and-roll: value f32[3] does not match the rows of f32[2x2]")),
    ("(append-and-roll 5 1)", E("append-and-roll: buffer i32[] has no rows")),
    "len / count on tensors: size of axis 0; scalars have no length.",
    ("(len (reshape (range 6) 3 2))", "3"),
    ("(count [1 2])", "2"),
    ("(len (reshape [5] '[]))", E("has no length")),
]

INDEX = [
    "nth on tensors: a row (a scalar for 1-D); out of range is an error.",
    ("(nth [[1 2] [3 4]] 1)", F([3, 4])),
    ("(nth (range 5) -1)", "4"),
    ("(nth (range 5) (reshape (range 2 3) '[]))", "2"),
    ("(nth (range 5) 5)", E("nth: index 5 out of range for length 5")),
    ("(nth (range 5) -6)", E("nth: index -6 out of range for length 5")),
    ("(nth (reshape [5] '[]) 0)", E("has no length")),
    ("(first (reshape (range 6) 3 2))", I([0, 1])),
    ("(last (reshape (range 6) 3 2))", I([4, 5])),
    "get on tensors: an integer (or integral rank-0 tensor) indexes axis 0; missing → default.",
    ("(def emb (reshape (range 12) 4 3))", None),
    ("(get emb 0)", I(EMB[0])),
    ("(get emb -1)", I(EMB[-1])),
    ("(get emb 4)", "nil"),
    ("(get emb 4 :none)", ":none"),
    ("(get emb (reshape (range 2 3) '[]))", I(EMB[2])),
    ("(get (range 5) (reshape [3] '[]))", "3"),
    ("(get emb 1 2)", I(EMB[1])),
    "get with an index tensor gathers rows (embedding lookup): shape idx.shape + t.shape[1:].",
    ("(get emb (range 2))", I(EMB[np.arange(2)])),
    ("(get emb [3 0])", I(EMB[[3, 0]])),
    ("(get emb [-1])", I(EMB[[-1]])),
    ("(get emb (reshape [0 1 2 3] 2 2))", I(EMB[np.array([[0, 1], [2, 3]])])),
    ("(shape (get emb (reshape [0 1 2 3 0 1] 2 3)))", L([2, 3, 3])),
    "An index past the end is clamped to the last row (StableHLO gather), negative ones count from the end.",
    ("(get [1 2 3] (range 3 -1 -1))", F(np.array([1, 2, 3])[np.clip([3, 2, 1, 0], 0, 2)])),
    ("(get [1 2 3] [-1 -3])", F(np.array([1, 2, 3])[[-1, -3]])),
    ("(get [[1 2] [3 4]] [1 1 0])", F(np.array([[1, 2], [3, 4]])[[1, 1, 0]])),
    ("(get emb [0.5])", E("get: indices must be integers, got f32[1]")),
    "(get x ... i) indexes the last axis.",
    ("(get emb ... 1)", I(EMB[..., 1])),
    ("(get emb ... -1)", I(EMB[..., -1])),
    ("(get emb ... 3)", "nil"),
    ("(get [1 2 3] ... 0)", f(1)),
    ("(get emb ... [0 2])", I(EMB[..., [0, 2]])),
    ("(get (reshape (range 24) 2 3 4) ... 0)", I(A234[..., 0])),
    ("(get (reshape (range 24) 2 3 4) ... (reshape (range 1 2) '[]))", I(A234[..., 1])),
    "get-in navigates through tensors along axis 0.",
    ("(get-in {:w emb} [:w 1])", I(EMB[1])),
    ("(get-in {:w emb} [:w 1 2])", "5"),
    ("(get-in {:w emb} [:w 9] :missing)", ":missing"),
    "index-update: functional replacement of slice i along axis 0 (i may be a runtime scalar).",
    ("(index-update [1 2 3] 1 9)", F([1, 9, 3])),
    ("(index-update (range 3) -1 7)", I([0, 1, 7])),
    ("(index-update [[1 2] [3 4]] 0 [9 8])", F([[9, 8], [3, 4]])),
    ("(index-update [[1 2] [3 4]] 1 0)", F([[1, 2], [0, 0]])),
    ("(index-update [[1 2] [3 4]] (reshape (range 1 2) '[]) [5 6])", F([[1, 2], [5, 6]])),
    ("(index-update (range 3) 0 2.5)", F([2.5, 1, 2])),
    ("(index-update (reshape (range 8) 2 2 2) 1 (reshape (range 4) 2 2))", I(np.concatenate([r(8, 2, 2, 2)[:1], r(4, 1, 2, 2)]))),
    ("(index-update '[1 2 3] 0 :x)", "[:x, 2, 3]"),
    ("(index-update [1 2 3] 3 0)", E("index-update: index 3 out of range for axis 0 of f32[3]")),
    ("(index-update [1 2 3] -4 0)", E("index-update: index -4 out of range for axis 0 of f32[3]")),
    ("(index-update [[1 2] [3 4]] 0 [1 2 3])", E("index-update: value f32[3] does not fit a row of f32[2x2]")),
    ("(index-update 5 0 1)", E("index-update: cannot index a scalar")),
    "dynamic-slice: window of static size at runtime starts, clamped so the window fits.",
    ("(dynamic-slice (range 10) 2 3)", I([2, 3, 4])),
    ("(dynamic-slice (range 10) 8 3)", I([7, 8, 9])),
    ("(dynamic-slice (range 10) -2 3)", I([0, 1, 2])),
    ("(dynamic-slice (range 10) (reshape (range 4 5) '[]) 2)", I([4, 5])),
    ("(dynamic-slice (reshape (range 12) 3 4) 1 2)", I(M34[1:3])),
    ("(dynamic-slice (reshape (range 12) 3 4) '[1 2] '[2 2])", I(M34[1:3, 2:4])),
    ("(dynamic-slice (reshape (range 12) 3 4) [2 3] '[2 2])", I(M34[1:3, 2:4])),
    ("(dynamic-slice (reshape (range 12) 3 4) (range 0 2) '[1 3])", I(M34[0:1, 1:4])),
    ("(dynamic-slice (reshape (range 24) 2 3 4) '[1 1] '[1 2])", I(A234[1:2, 1:3, :])),
    ("(dynamic-slice [[1 2] [3 4]] 1 1)", F([[3, 4]])),
    ("(dynamic-slice (range 10) 0 11)", E("dynamic-slice: size 11 does not fit axis 0 of i32[10]")),
    ("(dynamic-slice (reshape (range 12) 3 4) '[0 0 0] '[1 1 1])", E("dynamic-slice: 3 start indices for a rank-2 tensor")),
    ("(dynamic-slice (range 3) 0 '[1 1])", E("dynamic-slice: sizes [1, 1] have more entries than i32[3] has axes")),
    ("(dynamic-slice 5 0 1)", E("dynamic-slice: cannot slice a scalar")),
    "dynamic-update-slice: writes update at (clamped) starts.",
    ("(dynamic-update-slice (range 5) [9 9] '[1])", F([0, 9, 9, 3, 4])),
    ("(dynamic-update-slice (range 5) (range 2) 4)", I([0, 1, 2, 0, 1])),
    ("(dynamic-update-slice (range 5) (range 2) -3)", I([0, 1, 2, 3, 4])),
    ("(dynamic-update-slice (reshape (range 12) 3 4) (reshape (range 100 104) 2 2) '[1 1])",
     I(np.array([[0, 1, 2, 3], [4, 100, 101, 7], [8, 102, 103, 11]]))),
    ("(dynamic-update-slice (reshape (range 12) 3 4) (range 100 104) '[2 0])",
     I(np.array([[0, 1, 2, 3], [4, 5, 6, 7], [100, 101, 102, 103]]))),
    ("(dynamic-update-slice (reshape (range 12) 3 4) (range 100 102) (range 5 7))",
     I(np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 100, 101]]))),
    ("(dynamic-update-slice [[1 2] [3 4]] 0 '[0 1])", F([[1, 0], [3, 4]])),
    ("(dynamic-update-slice (range 3) (range 4) 0)", E("dynamic-update-slice: update i32[4] does not fit in i32[3]")),
    ("(dynamic-update-slice (range 3) (reshape (range 4) 2 2) 0)", E("dynamic-update-slice: update i32[2x2] has more axes than i32[3]")),
    "top_k: the k largest along the last axis → (values indices), descending, first index on ties.",
    ("(top_k [3 1 4 1 5 9 2 6] 3)", T(F([9, 6, 5]), I([5, 7, 4]))),
    ("(top_k [1 3 3 2] 2)", T(F([3, 3]), I([1, 2]))),
    ("(top_k [2 2 2] 3)", T(F([2, 2, 2]), I([0, 1, 2]))),
    ("(first (top_k [[1 5 2] [7 0 7]] 2))", F([[5, 2], [7, 7]])),
    ("(second (top_k [[1 5 2] [7 0 7]] 2))", I([[1, 2], [0, 2]])),
    ("(top_k (range 5) 2)", T(I([4, 3]), I([4, 3]))),
    ("(top_k [1 2] 0)", T(F(np.zeros(0)), I(np.zeros(0)))),
    ("(top_k [1 2] 3)", E("top_k: k = 3 out of range for the last axis of f32[2]")),
    ("(top_k 5 1)", E("top_k: needs at least 1 dimension")),
    "sort on tensors: along :axis (default last), :reverse for descending; lists sort as before.",
    ("(sort [3 1 2])", F([1, 2, 3])),
    ("(sort [3 1 2] :reverse)", F([3, 2, 1])),
    ("(sort [[3 1 2] [0 -1 5]])", F(np.sort([[3, 1, 2], [0, -1, 5]]))),
    ("(sort [[3 1 2] [0 -1 5]] :axis 0)", F(np.sort([[3, 1, 2], [0, -1, 5]], axis=0))),
    ("(sort [[3 1 2] [0 -1 5]] :axis -2 :reverse)", F(-np.sort(-np.array([[3, 1, 2], [0, -1, 5]]), axis=0))),
    ("(sort (range 3) :reverse)", I([2, 1, 0])),
    ("(sort [3 nan 1])", F([1, 3, np.nan])),
    ("(sort '[3 1 2])", L([1, 2, 3])),
    ("(sort [3 1 2] :key neg)", E("sort: :key applies to lists only")),
    ("(sort (reshape [5] '[]))", E("sort: cannot sort a scalar")),
    ("(sort [1 2] :axis 1)", E("sort: axis 1 out of range for rank 1")),
]


def render(name, title, cases):
    lines = [";; -*- mode: clojure -*-",
             f";; {name}.shf — {title}",
             ";; Generated by tests/tools/shape_goldens.py: every expected tensor is NumPy's str() of the",
             ";; same computation. Edit the cases there and rerun it."]
    count = 0
    for c in cases:
        if isinstance(c, str):
            lines += ["", ";; " + c]
            continue
        form, want = c
        if want is None:
            lines.append(form)
            continue
        count += 1
        first, *rest = want.split("\n")
        marker = "" if first.startswith("!! ") else "=> "
        lines.append(f"{form}  ;; {marker}{first}")
        lines += [f";; .. {x}" for x in rest]
    with open(os.path.join(LANG, name + ".shf"), "w") as out:
        out.write("\n".join(lines) + "\n")
    return count


n1 = render("shape", "shape and structure builtins (SPEC §5.5).", SHAPE)
n2 = render("index", "indexing, dynamic slices, top_k and tensor sort (SPEC §4.4, §5.6, §5.11).", INDEX)
print(f"shape.shf: {n1} cases, index.shf: {n2} cases")
