"""Dynamic shapes for the capture engine, used only while compiling (never on the hit path).

A compile that treats some sizes or ints as symbolic gets one `DynamicShapes`: torch's ShapeEnv and
a FakeTensorMode over it. The engine (tracer/) asks it for fake example values of its inputs, runs
the graph's operators on them (the ShapeEnv records every assumption it makes as a guard), hands the
fakes to the backend inside a TracingContext, and finally asks for the guards as small postfix
programs over the inputs' sizes, strides and ints, which the C++ guard tree evaluates with no Python.

Every symbol is created here, so each one maps to a `ref`: (input slot, kind, dim) with kind 0 = a
tensor size, 1 = a tensor stride, 2 = an int input, 3 = a float input, 4 = the item() of a 0-d int
tensor input (the graph reads it as a number: a size given as a tensor). Slots are the engine's own
numbering of the sources it asked about.

A guard over a float input is a program in float mode (its first instruction FMODE): the evaluator
computes it in doubles, as Python computes the user's float arithmetic."""
import dataclasses
import math
import struct

import sympy
import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._guards import GuardSource, Source, TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

SIZE, STRIDE, INT, FLOAT, ITEM, ITEM_FLOAT = 0, 1, 2, 3, 4, 5

# Postfix program opcodes (tracer/guards.cpp evaluates them over int64 values; a program that starts
# with FMODE over doubles, FCONST's argument the bits of a double).
(CONST, REF, ADD, MUL, FLOORDIV, MOD, POW, EQ, NE, LT, LE, GT, GE, AND, OR, NOT, MIN, MAX, SQRT_TRUNC, TRUNCDIV,
 ROUNDDIV, FMODE, FCONST, FDIV, FTRUNC, FFLOOR, FCEIL, FROUND, FSQRT) = range(29)


def _float_bits(x):
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


@dataclasses.dataclass(frozen=True)
class _Src(Source):
    """A source named by the engine's guard text (L['x'], L['self'].w ...)."""
    text: str

    @property
    def _name_template(self):
        return self.text

    @property
    def guard_source(self):
        return GuardSource.LOCAL


class Unexpressible(Exception):
    """A shape guard the C++ evaluator cannot express."""


def compile_static(backend, gm, inputs, fullgraph=False):
    """Call the backend of a static compile as TorchDynamo does: the real inputs, with a fake mode
    over a ShapeEnv current in a TracingContext. AOTAutograd traces with that mode; it can trace a
    size that depends on values (nonzero, a boolean-mask assignment) only with a ShapeEnv, and with
    none current it makes its own mode without one. The mode already holds a fake of each input
    with its real sizes (TorchDynamo's static dims): from_tensor finds it there, where it would make
    every size of an unknown input symbolic. The "eager" backend does not trace: it gets the inputs
    with nothing current."""
    if getattr(backend, "_dynview_ignores_inputs", False):
        return backend(gm, inputs)
    # As TorchDynamo's ShapeEnv: a data-dependent scalar or size is a fallback to eager (its
    # exceptions_allowed_to_be_fallback) unless the compile is fullgraph or the config allows it.
    from torch._dynamo import config
    env = ShapeEnv(allow_scalar_outputs=fullgraph or config.capture_scalar_outputs,
                   allow_dynamic_output_shape_ops=fullgraph or config.capture_dynamic_output_shape_ops)
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    try:
        fakes = [mode.from_tensor(t, static_shapes=True) for t in inputs if isinstance(t, torch.Tensor)]
    except Exception:  # an input the fake mode cannot copy (an unknown tensor subclass): as before
        return backend(gm, inputs)
    with tracing(TracingContext(mode)):
        compiled = backend(gm, inputs)
    del fakes  # (held until the backend ran: the mode's memo of them is weak)
    return compiled

class DynamicShapes:
    def __init__(self):
        # duck_shape=False: equal sizes of different inputs are not assumed equal (a fresh symbol
        # each); relations the graph needs are recorded as guards instead.
        self.env = ShapeEnv(duck_shape=False)
        self.mode = FakeTensorMode(shape_env=self.env, allow_non_fake_inputs=True)
        self.refs = []        # ref index -> (slot, kind, dim)
        self.names = []       # ref index -> text, e.g. L['x'].size()[0]
        self.sym_ref = {}     # sympy.Symbol -> ref index
        self.dynamic = []     # (ref index, symbol) of dynamic sizes: 0/1 specialisation gives 2 <= size
        self.stride_checks = []  # (ref index of the real stride, sympy expr it must equal)
        self.where = {}       # ref index -> (step, line) of the step that made the input symbolic
        self.origin = []      # env.guards index -> (step, line) of the step that added it
        self.floats = []      # ref index of each float input (a NaN one compiles again: not isnan)
        self.drawn_syms = set()  # symbols of random-module draws: no guard may read one (drawn)

    def note(self, step, line):
        """The engine ran `step` and saw env.guards grow: the new guards are that step's. True when
        one of them reads a random draw (the engine breaks at that step instead)."""
        new = self.env.guards[len(self.origin):]
        self.origin.extend([(step, line)] * len(new))
        return bool(self.drawn_syms) and any(g.expr.free_symbols & self.drawn_syms for g in new)

    def _ref(self, slot, kind, dim, text):
        self.refs.append((slot, kind, dim))
        self.names.append(text)
        return len(self.refs) - 1

    def tensor(self, t, dyn_dims, text, slot, step=-1, line=-1, dyn_strides=()):
        """A fake of real tensor `t`, symbolic in the sizes `dyn_dims` and the strides `dyn_strides`
        (each its own symbol; the other strides follow from the sizes). Returns (fake, size_mask,
        stride_mask): the masks name the sizes and strides TENSOR_MATCH must not compare (guards
        cover them)."""
        if not dyn_dims and not dyn_strides and slot >= 0 and t.dim() == 0:
            # A 0-d int tensor (the engine gives those a slot): faked with its source, so its fake
            # answers item() with a backed symbol whose hint is its value (the converter's
            # item_memo), as TorchDynamo fakes one: an operator given it as a size (new_zeros(b, n),
            # narrow(d, 0, n)) makes a symbolic size rather than breaking, and its guards (if any)
            # read the tensor's value.
            ctx = StatelessSymbolicContext(dynamic_sizes=[], constraint_sizes=[])
            fake = self.mode.from_tensor(t, symbolic_context=ctx, source=_Src(text))
            s = fake.item_memo
            if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol) and s.node.expr not in self.sym_ref:
                k = self.sym_ref[s.node.expr] = self._ref(slot, ITEM, -1, f"{text}.item()")
                self.where[k] = (step, line)
            elif isinstance(s, torch.SymFloat) and isinstance(s.node.expr, sympy.Symbol) and s.node.expr not in self.sym_ref:
                # a 0-d float64 tensor (torch.full((2,), s)): a backed SymFloat, its guards in float mode
                k = self.sym_ref[s.node.expr] = self._ref(slot, ITEM_FLOAT, -1, f"{text}.item()")
                self.where[k] = (step, line)
                self.floats.append(k)
            return fake, 0, 0
        if not dyn_dims and not dyn_strides:
            return self.mode.from_tensor(t, static_shapes=True), 0, 0
        ctx = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC if i in dyn_dims else DimDynamic.STATIC for i in range(t.dim())],
            dynamic_strides=[DimDynamic.DYNAMIC if i in dyn_strides else DimDynamic.INFER_STRIDE for i in range(t.dim())],
            constraint_sizes=[None] * t.dim())
        fake = self.mode.from_tensor(t, symbolic_context=ctx, source=_Src(text))
        size_mask = stride_mask = 0
        for i, s in enumerate(fake.shape):
            if isinstance(s, torch.SymInt):
                expr = s.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in self.sym_ref:
                    k = self._ref(slot, SIZE, i, f"{text}.size()[{i}]")
                    self.where[k] = (step, line)
                    self.sym_ref[expr] = k
                    self.dynamic.append((k, expr))
                size_mask |= 1 << i
        for i, s in enumerate(fake.stride()):
            if isinstance(s, torch.SymInt):
                k = self._ref(slot, STRIDE, i, f"{text}.stride()[{i}]")
                self.where[k] = (step, line)
                expr = s.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in self.sym_ref:
                    # a stride of its own (automatic dynamic strides): its range guarded as a size's
                    # (strides 0 and 1 specialised, as TorchDynamo's)
                    self.sym_ref[expr] = k
                    self.dynamic.append((k, expr))
                else:
                    self.stride_checks.append((k, expr))
                stride_mask |= 1 << i
        return fake, size_mask, stride_mask

    def symint(self, value, text, slot, step=-1, line=-1):
        """A symbolic int for an int input (no 0/1 specialisation, as TorchDynamo)."""
        s = self.env.create_unspecified_symint_and_symbol(value, _Src(text), DimDynamic.DYNAMIC)
        k = self.sym_ref[s.node.expr] = self._ref(slot, INT, -1, text)
        self.where[k] = (step, line)
        return s

    def _float_fake(self, value, text):
        """The fake of torch._as_tensor_fullprec(value) and its item(), a backed SymFloat."""
        from torch._dynamo.source import FloatTensorSource
        fake = self.mode.from_tensor(torch._as_tensor_fullprec(value), source=FloatTensorSource(_Src(text)))
        s = fake.item_memo
        if not isinstance(s, torch.SymFloat):
            raise TypeError(f"no symbolic float for {text}")
        return fake, s

    def symfloat(self, value, text, slot, step=-1, line=-1):
        """A float input, as TorchDynamo takes one: the graph is given it as a 0-d float64 tensor
        (torch._as_tensor_fullprec) and reads it with item(). Returns (fake tensor, SymFloat): the
        fake's item() is that SymFloat, a backed symbol whose hint is `value`."""
        fake, s = self._float_fake(value, text)
        k = self.sym_ref[s.node.expr] = self._ref(slot, FLOAT, -1, text)
        self.where[k] = (step, line)
        self.floats.append(k)
        return fake, s

    def drawn(self, value, text, slot, step=-1, line=-1):
        """A number drawn by Python's random module when the compiled code runs, read by the traced
        code: (fake 0-d float64 tensor, SymFloat) for a float, as symfloat makes them, (None, SymInt)
        for an int. Unguarded: its value is unknown until then, so no guard may read its symbol
        (note tells the engine, which breaks at the step that would add one)."""
        if isinstance(value, float):
            fake, s = self._float_fake(value, text)
            self.sym_ref[s.node.expr] = self._ref(slot, FLOAT, -1, text)
        else:
            fake, s = None, self.symint(value, text, slot, step, line)
        self.drawn_syms.add(s.node.expr)
        return fake, s

    def factory(self, fn, args, kwargs):
        """Run a tensor factory (torch.zeros(n, 3) ...) under the fake mode."""
        with self.mode, enable_python_dispatcher():
            return fn(*args, **kwargs)

    def compile(self, backend, gm, example_inputs):
        """Call the backend as TorchDynamo does: fakes as example inputs, our fake mode current."""
        with tracing(TracingContext(self.mode)):
            return backend(gm, example_inputs)

    # ---- guards ---------------------------------------------------------------------------------

    def guards(self):
        """[(text, [(slot, kind, dim)...], [(op, arg)...], step, line)]: every assumption as a
        program over refs local to the guard, with the step and user line that made it."""
        out, seen = [], set()

        def add(expr, at):
            expr = sympy.sympify(expr)
            if expr is sympy.true or expr in seen:
                return
            seen.add(expr)
            local, prog = [], []
            self._emit(expr, prog, local)
            out.append((self._text(expr), [self.refs[k] for k in local], prog, at[0], at[1]))

        for k, sym in self.dynamic:
            lower = self.env.var_to_range[sym].lower if sym in self.env.var_to_range else 2
            add(sympy.Le(int(lower) if lower.is_finite else 2, sym), self.where.get(k, (-1, -1)))
        for k, expr in self.stride_checks:
            add(sympy.Eq(_StrideSym(k), expr, evaluate=False), self.where.get(k, (-1, -1)))
        for k in self.floats:  # (TorchDynamo's implicit guard: its ShapeEnv cannot model NaN)
            step, line = self.where.get(k, (-1, -1))
            out.append((f"not math.isnan({self.names[k]})", [self.refs[k]], [(FMODE, 0), (REF, 0), (REF, 0), (EQ, 0)],
                        step, line))
        for i, g in enumerate(self.env.guards):
            add(g.expr, self.origin[i] if i < len(self.origin) else (-1, -1))
        return out

    def _emit_leaf(self, e, prog, local):
        """A ref (an input's symbol, a stride) or a truth value: emitted, True; else False."""
        k = e.ref if isinstance(e, _StrideSym) else None
        if k is None and isinstance(e, sympy.Symbol):
            if e not in self.sym_ref:
                raise Unexpressible(f"symbol {e} was not created by dynview")
            if e in self.drawn_syms:  # (one added after the trace, by the backend: the engine breaks at a step's)
                raise Unexpressible(f"a guard on {self.names[self.sym_ref[e]]}, a random draw")
            k = self.sym_ref[e]
        if k is not None:
            if k not in local:
                local.append(k)
            prog.append((REF, local.index(k)))
            return True
        if e is sympy.true or e is sympy.false:
            prog.append((CONST, 1 if e is sympy.true else 0))
            return True
        return False

    def _is_float_guard(self, e):
        return any(s in self.sym_ref and self.refs[self.sym_ref[s]][1] in (FLOAT, ITEM_FLOAT) for s in e.free_symbols)

    def _emit_float(self, e, prog, local):
        """e (over a float input) in float mode: every value a double, as Python computes it."""
        if self._emit_leaf(e, prog, local):
            return
        if isinstance(e, sympy.Integer):
            if abs(int(e)) > 2 ** 53:
                raise Unexpressible(f"the integer {e} in a float guard")
            prog.append((CONST, int(e)))
            return
        if e.is_Number:
            if not (e.is_Float or e.is_Rational):
                raise Unexpressible(f"the number {e} in a float guard")
            prog.append((FCONST, _float_bits(e)))
            return
        name = type(e).__name__
        if name == "ToFloat":
            self._emit_float(e.args[0], prog, local)
            return
        binary = {"FloatTrueDiv": FDIV, "IntTrueDiv": FDIV, "Equality": EQ, "Unequality": NE, "StrictLessThan": LT,
                  "LessThan": LE, "StrictGreaterThan": GT, "GreaterThan": GE}
        nary = {"Add": ADD, "Mul": MUL, "And": AND, "Or": OR, "Min": MIN, "Max": MAX}
        if name == "Pow" and len(e.args) == 2 and e.args[1].is_Integer and int(e.args[1]) == -1:
            prog.append((CONST, 1))  # x ** -1: 1 / x (sympy's form of a division)
            self._emit_float(e.args[0], prog, local)
            prog.append((FDIV, 0))
            return
        if name == "Pow" and len(e.args) == 2 and e.args[1].is_Integer and 0 <= int(e.args[1]) <= 64:
            if int(e.args[1]) == 0:
                prog.append((CONST, 1))
                return
            self._emit_float(e.args[0], prog, local)
            for _ in range(int(e.args[1]) - 1):
                self._emit_float(e.args[0], prog, local)
                prog.append((MUL, 0))
            return
        if name in binary and len(e.args) == 2:
            self._emit_float(e.args[0], prog, local)
            self._emit_float(e.args[1], prog, local)
            prog.append((binary[name], 0))
            return
        if name == "Mul" and any(_reciprocal(a) for a in e.args):
            # x * y**-1: x / y, as the user's code divides (a product of reciprocals rounds otherwise)
            num = [a for a in e.args if not _reciprocal(a)]
            self._emit_float(sympy.Mul(*num) if num else sympy.Integer(1), prog, local)
            for a in e.args:
                if _reciprocal(a):
                    self._emit_float(a.args[0], prog, local)
                    prog.append((FDIV, 0))
            return
        if name in nary and e.args:
            self._emit_float(e.args[0], prog, local)
            for a in e.args[1:]:
                self._emit_float(a, prog, local)
                prog.append((nary[name], 0))
            return
        unary = {"Not": NOT, "TruncToInt": FTRUNC, "TruncToFloat": FTRUNC, "FloorToInt": FFLOOR, "CeilToInt": FCEIL,
                 "RoundToInt": FROUND, "OpaqueUnaryFn_sqrt": FSQRT}
        if name in unary and len(e.args) == 1:
            self._emit_float(e.args[0], prog, local)
            prog.append((unary[name], 0))
            return
        raise Unexpressible(f"{name} in a float guard {e}")

    def _emit(self, e, prog, local):
        if not prog and self._is_float_guard(e):
            prog.append((FMODE, 0))
            self._emit_float(e, prog, local)
            return
        e = e.replace(_is_int_sqrt, lambda x: _SqrtTrunc(_int_sqrt_arg(x)))
        if e.has(sympy.Float) or any(type(a).__name__ in _TRUE_DIVISION for a in sympy.preorder_traversal(e)):
            e = _over_integers(e)

        if self._emit_leaf(e, prog, local):
            return
        if isinstance(e, sympy.Integer) or (e.is_Number and e.is_integer):
            prog.append((CONST, int(e)))
            return
        name = type(e).__name__
        binary = {"FloorDiv": FLOORDIV, "CleanDiv": FLOORDIV, "Mod": MOD, "PythonMod": MOD, "Pow": POW,
                  "_TruncDiv": TRUNCDIV, "_RoundDiv": ROUNDDIV,
                  "Equality": EQ, "Unequality": NE, "StrictLessThan": LT, "LessThan": LE,
                  "StrictGreaterThan": GT, "GreaterThan": GE}
        nary = {"Add": ADD, "Mul": MUL, "And": AND, "Or": OR, "Min": MIN, "Max": MAX}
        if name in binary and len(e.args) == 2:
            if name == "Pow" and not (e.args[1].is_Integer and int(e.args[1]) >= 0):
                raise Unexpressible(f"power {e}")
            self._emit(e.args[0], prog, local)
            self._emit(e.args[1], prog, local)
            prog.append((binary[name], 0))
            return
        if name in nary and e.args:
            self._emit(e.args[0], prog, local)
            for a in e.args[1:]:
                self._emit(a, prog, local)
                prog.append((nary[name], 0))
            return
        if name == "Not" or name == "_SqrtTrunc":
            self._emit(e.args[0], prog, local)
            prog.append((NOT if name == "Not" else SQRT_TRUNC, 0))
            return
        raise Unexpressible(f"{name} in {e}")

    def _text(self, e):
        if isinstance(e, _StrideSym):
            return self.names[e.ref]
        if isinstance(e, sympy.Symbol):
            return self.names[self.sym_ref[e]] if e in self.sym_ref else str(e)
        if isinstance(e, sympy.Rel):
            op = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
                  "StrictGreaterThan": ">", "GreaterThan": ">="}[type(e).__name__]
            return f"{self._text(e.args[0])} {op} {self._text(e.args[1])}"
        if e.args and type(e).__name__ in ("Add", "Mul"):
            sep = " + " if type(e).__name__ == "Add" else "*"
            return sep.join(self._text(a) for a in e.args)
        if e.args:
            return f"{type(e).__name__}({', '.join(self._text(a) for a in e.args)})"
        return str(e)


def _reciprocal(e):
    return isinstance(e, sympy.Pow) and e.args[1] == -1


class _SqrtTrunc(sympy.Function):
    """int(float(a) ** 0.5) of an integer a (DiT's `int(num_patches ** 0.5)`): the guard evaluator's
    SQRT_TRUNC, which computes it as CPython does."""
    is_integer = True


def _is_int_sqrt(e):
    """TruncToInt or FloorToInt of (ToFloat of) an integer to the power 0.5."""
    if type(e).__name__ not in ("TruncToInt", "FloorToInt") or type(e.args[0]).__name__ != "FloatPow":
        return False
    base, exp = e.args[0].args
    return exp == sympy.Float(0.5) or exp == sympy.Rational(1, 2)


def _int_sqrt_arg(e):
    base = e.args[0].args[0]
    return base.args[0] if type(base).__name__ == "ToFloat" else base


class _TruncDiv(sympy.Function):
    """a / b of integers rounded toward zero (math.trunc of a division): the evaluator's TRUNCDIV."""
    is_integer = True


class _RoundDiv(sympy.Function):
    """a / b of integers rounded half to even (round() of a division): the evaluator's ROUNDDIV."""
    is_integer = True


_TRUE_DIVISION = ("IntTrueDiv", "FloatTrueDiv", "ToFloat", "CeilToInt", "FloorToInt", "TruncToInt", "RoundToInt")


def _over_integers(e):
    """The guard `e` over integers, where it compares true divisions of sizes (math.ceil(h / 2) * 2
    guards Eq(IntTrueDiv(s0, 2), 3.0)): divisions as exact rationals, a comparison as its difference's
    numerator against 0 (the denominator is positive: a product of sizes and positive constants),
    ceil and floor of a division by a positive constant as floor divisions."""
    if isinstance(e, (sympy.And, sympy.Or)):
        return e.func(*(_over_integers(a) for a in e.args))
    if isinstance(e, sympy.Not):
        return sympy.Not(_over_integers(e.args[0]))
    if not isinstance(e, sympy.Rel):
        return _exact(e)
    num, den = sympy.fraction(sympy.together(_exact(e.lhs) - _exact(e.rhs)))
    if den.is_positive is not True:
        raise Unexpressible(f"a division by a value of unknown sign in {e}")
    return e.func(sympy.expand(num), 0)


def _exact(e):
    """e with true divisions as rationals and floats as the exact values they hold; ceil/floor of a
    division by a positive integer as floor divisions, trunc and round of a quotient of integers as the
    evaluator's exact TRUNCDIV and ROUNDDIV. Raises Unexpressible for what is not exact."""
    if isinstance(e, sympy.Float):
        return sympy.Rational(e)
    if not e.args:
        return e
    name = type(e).__name__
    args = [_exact(a) for a in e.args]
    if name in ("IntTrueDiv", "FloatTrueDiv"):
        return args[0] / args[1]
    if name == "ToFloat":
        return args[0]
    if name in ("CeilToInt", "FloorToInt"):
        num, den = sympy.fraction(sympy.together(args[0]))
        if not (den.is_Integer and den > 0):
            raise Unexpressible(f"{name} of a division by a value that is not a positive constant in {e}")
        from torch.utils._sympy.functions import FloorDiv
        return FloorDiv(num, den) if name == "FloorToInt" else -FloorDiv(-num, den)
    if name in ("TruncToInt", "RoundToInt"):  # of a quotient of integers, whatever their signs (den != 0)
        num, den = sympy.fraction(sympy.together(args[0]))
        if not all(p.is_integer for p in (num, den)):
            raise Unexpressible(f"{name} of what is not a quotient of integers in {e}")
        return (_TruncDiv if name == "TruncToInt" else _RoundDiv)(num, den)
    return e.func(*args)


class _StrideSym(sympy.Symbol):
    """The real stride of an input (a ref), standing on the left of a stride guard."""

    def __new__(cls, ref):
        obj = super().__new__(cls, f"__dv_stride_{ref}", integer=True)
        obj.ref = ref
        return obj


# ---- example values on fake tensors (static compiles: autocast, channels-last convolutions) -----
# A static compile's example values are meta tensors, which autocast never casts (only tensors of the
# device it is on are eligible): under torch.autocast a linear's example would say float32 where the
# graph makes bfloat16, and code that reads its dtype would take the other branch. Under autocast
# the engine runs each operator on fake tensors of the real device instead (FakeTensor over the meta
# example), as TorchDynamo's fake tensors are, and takes meta tensors of the result back. So for a
# convolution of a channels-last input, whose meta kernel returns a contiguous result where the CPU
# and CUDA kernels keep the layout (the Python meta registrations fake tensors use pick it).
_fake_mode = None


def fake_example(fn, method, args, kwargs, device):
    """fn(*args, **kwargs) (or args[0].method(...)) on fakes of the meta tensors in args, on `device`:
    (the result with meta tensors, the device of its first tensor or None)."""
    global _fake_mode
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._pytree import tree_map
    if _fake_mode is None:
        _fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode = _fake_mode
    made = {}  # id(fake) -> the meta tensor it stands for (an in-place op returns its input)

    def fake(t):
        if isinstance(t, torch.Tensor) and t.device.type == "meta" and not isinstance(t, FakeTensor):
            r = FakeTensor(mode, t.detach(), device)
            if t.requires_grad:  # a leaf stays a leaf; a result of the trace is not one (in-place ops on it trace)
                r.requires_grad_()
                if not t.is_leaf:
                    with mode, torch.enable_grad():
                        r = r.clone()
            made[id(r)] = (r, t)
            return r
        return t

    fargs, fkw = tree_map(fake, (tuple(args), dict(kwargs)))
    with mode:
        out = getattr(fargs[0], method)(*fargs[1:], **fkw) if method else fn(*fargs, **fkw)

    def back(t):
        if isinstance(t, FakeTensor):
            if id(t) in made:
                return made[id(t)][1]
            e = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            if not t.requires_grad:
                return e
            with torch.enable_grad():  # not a leaf, as an op's result (a clone where that keeps the strides)
                c = e.requires_grad_().clone()
                return c if c.stride() == e.stride() else e.view(e.shape)
        return t

    first = next((t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, FakeTensor)), None)
    return tree_map(back, out), (first.device if first is not None else None)
