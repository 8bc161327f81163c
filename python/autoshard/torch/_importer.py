"""Translates the ATen graph of torch.export (training IR) into a training
step in the `train` dialect.

Every value of the graph is either
  - a constant (`Const`): buffers, lifted tensors, and everything computed
    from them and from literals alone (position ids, causal masks, rotary
    tables), evaluated here with torch, and written as `train.constant`
    only where a step op reads it; or
  - a step value (`Value`): parameters, the batch inputs, and what depends
    on them, each an SSA value of the emitted function.
An ATen op with a step value among its operands has a rule in RULES that
writes train ops; an op without one fails with ExportError naming the op,
the module path and the source line.
"""

import hashlib
import math
import operator
import os

import torch

from . import _mlir as mlir

aten = torch.ops.aten


class ExportError(Exception):
    """A construct of the model that the importer cannot express."""


class Value:
    """An SSA value of the emitted step."""

    __slots__ = ("name", "shape", "elem")

    def __init__(self, name, shape, elem):
        self.name, self.shape, self.elem = name, tuple(shape), elem

    @property
    def type(self):
        return mlir.tensor_type(self.shape, self.elem)


class Const:
    """A tensor known at export time."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _is_tensor_like(x):
    return isinstance(x, (Value, Const))


def _flatten(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flatten(a)
        else:
            yield a


def _where(node):
    """Where a node comes from, for an error message: lines
    '  in MODULE (Type)' and '  at FILE:LINE: code'."""
    text = ""
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path, kind = list(stack.values())[-1]
        path = _strip_wrapper(str(path))
        kind = getattr(kind, "__name__", None) or str(kind).split(".")[-1]
        text += f"\n  in {path or '<root>'} ({kind.strip(chr(39))})"
    trace = node.meta.get("stack_trace")
    if trace:
        lines = [l.strip() for l in trace.strip().splitlines() if l.strip()]
        frames = [i for i, l in enumerate(lines) if l.startswith("File ")]
        # The innermost frame outside torch itself: the user's line, or the
        # model library's (transformers) for a library model.
        own = [i for i in frames if _TORCH_DIR not in lines[i]]
        if frames:
            index = (own or frames)[-1]
            frame = lines[index]
            code = lines[index + 1] if index + 1 < len(lines) and \
                not lines[index + 1].startswith("File ") else ""
            parts = frame.split('"')
            where = parts[1] if len(parts) > 1 else frame
            line = frame.split("line ")[-1].split(",")[0]
            text += f"\n  at {where}:{line}"
            if code:
                text += f": {code}"
    return text


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _strip_wrapper(path):
    # The exported module wraps the user's as attribute `m`.
    for prefix in ("L['self'].m.", "m.", "L__self___m_"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return "" if path in ("m", "L['self'].m", "L['self']") else path


def _op_name(target):
    return str(target).replace("::", ".")


class Importer:
    def __init__(self, ep, params, inputs, precision):
        """`params`: placeholder name -> (canonical parameter name, tensor);
        `inputs`: list of (placeholder name, input name, example tensor)."""
        self.ep = ep
        self.params = params
        self.inputs = inputs
        self.precision = precision
        self.lines = []
        self.counter = 0
        self.env = {}
        self.const_cache = {}
        self.dropout_streams = 0
        self.param_values = {}  # canonical name -> Value (argument)
        self.input_values = {}  # input name -> Value (argument)
        self.origins = {}  # SSA name -> input names an i32 value comes from
        self.loss_targets = []
        self.id_uses = set()  # inputs read as ids (embedding lookups)
        # SSA name of a transpose's result -> (its input, permutation): an
        # index taken from it is taken before the transpose instead.
        self.transposed = {}
        self.node = None

    # ---------------------------------------------------------------- errors
    def error(self, message):
        where = _where(self.node) if self.node is not None else ""
        return ExportError(f"autoshard.torch: {message}{where}")

    # -------------------------------------------------------------- emission
    def fresh(self):
        self.counter += 1
        return f"%v{self.counter}"

    def emit(self, op, operands, shape, elem, attrs=None):
        result = Value(self.fresh(), shape, elem)
        if elem == "i32":
            self.origins[result.name] = set().union(
                *(self.origins.get(v.name, set()) for v in operands))
        operand_list = ", ".join(v.name for v in operands)
        types = ", ".join(v.type for v in operands)
        self.lines.append(
            f"    {result.name} = \"train.{op}\"({operand_list})"
            f"{mlir.attr_dict(attrs)} : ({types}) -> {result.type}")
        return result

    def materialize(self, x, elem=None, minimal=False):
        """The step value of `x`; a constant becomes a train.constant in the
        element type `elem` (default: its own). With `minimal`, a constant
        that only broadcasts against step values is first reduced to its
        smallest broadcastable form: dimensions whose slices are all equal
        become 1 and leading 1s are dropped, so that a mask built for the
        global batch ([B, 1, T, T]) does not carry the batch that each rank
        holds only a share of."""
        if isinstance(x, Value):
            return x
        if not isinstance(x, Const):
            raise self.error(f"expected a tensor, got {type(x).__name__}")
        t = x.tensor
        if elem is None:
            elem = mlir.element_type(t.dtype)
            if elem is None:
                raise self.error(f"a constant of dtype {t.dtype} (the step "
                                 f"holds f32, bf16, int32 and bool tensors)")
        if minimal:
            t = _minimal_broadcast(t)
        # One train.constant per distinct value (each layer refolds the
        # same mask and rotary tables).
        key = ("const", elem, tuple(t.shape), str(t.dtype),
               hashlib.sha1(t.contiguous().numpy().tobytes()).hexdigest()
               if t.dtype != torch.bfloat16 else
               hashlib.sha1(t.contiguous().view(torch.int16).numpy()
                            .tobytes()).hexdigest())
        cached = self.const_cache.get(key)
        if cached is not None:
            return cached
        if elem in ("f32", "bf16") and t.dtype.is_floating_point is False:
            t = t.to(torch.float32)
        if t.numel() == 1 and elem in ("f32", "bf16"):
            value = self.emit("full", [], tuple(t.shape), elem,
                              {"value": mlir.f32(t.reshape(()).item())})
        else:
            value = Value(self.fresh(), tuple(t.shape), elem)
            self.lines.append(f"    {value.name} = \"train.constant\"() "
                              f"{{value = {mlir.dense(t, elem)}}} : () -> "
                              f"{value.type}")
        self.const_cache[key] = value
        return value

    # ------------------------------------------------------------- the graph
    def run(self):
        graph = self.ep.graph
        sig = self.ep.graph_signature
        lifted = dict(sig.inputs_to_lifted_tensor_constants)
        buffers = dict(sig.inputs_to_buffers)
        if getattr(sig, "buffers_to_mutate", None):
            names = ", ".join(sorted(set(sig.buffers_to_mutate.values())))
            raise ExportError(
                f"autoshard.torch: the forward pass updates buffers ({names}), "
                f"as BatchNorm's running statistics do; a training step here "
                f"updates only parameters (use LayerNorm/GroupNorm-style "
                f"normalisation, or freeze the statistics)")
        if getattr(sig, "user_inputs_to_mutate", None):
            raise ExportError("autoshard.torch: the forward pass modifies its "
                              "inputs in place")
        # Batch normalisation first: its counter's in-place update comes
        # before it in the graph and would be the less helpful error.
        for node in graph.nodes:
            if node.op == "call_function" and getattr(
                    node.target, "overloadpacket", None) in BATCH_NORMS:
                self.node = node
                RULES[node.target.overloadpacket](self, node)
        input_of = {ph: name for ph, name, _ in self.inputs}
        self.arg_values = []
        for node in graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self.env[node.name] = self.placeholder(node, lifted, buffers,
                                                       input_of)
            elif node.op == "call_function":
                self.env[node.name] = self.call(node)
            elif node.op == "output":
                return self.output(node)
        raise ExportError("autoshard.torch: the graph has no output")

    def placeholder(self, node, lifted, buffers, input_of):
        name = node.name
        if name in self.params:
            canonical, tensor = self.params[name]
            if not node.users:
                return None  # unused, or a tied name that another reads
            value = self.param_values.get(canonical)
            if value is None:
                elem = mlir.element_type(tensor.dtype)
                if elem not in ("f32",):
                    raise self.error(
                        f"parameter '{canonical}' has dtype {tensor.dtype}; "
                        f"parameters are f32 (precision='bf16' computes in "
                        f"bf16 from f32 master weights)")
                value = Value(self.fresh_arg(), tuple(tensor.shape), "f32")
                self.param_values[canonical] = value
            return self.param_value(value)
        if name in buffers:
            return Const(self.ep.state_dict.get(buffers[name])
                         if buffers[name] in self.ep.state_dict
                         else self.ep.constants[buffers[name]])
        if name in lifted:
            return Const(self.ep.constants[lifted[name]])
        if name in input_of:
            val = node.meta.get("val")
            elem = mlir.element_type(val.dtype)
            if elem is None or elem == "i1":
                raise self.error(
                    f"input '{input_of[name]}' has dtype {val.dtype}; inputs "
                    f"are float32, bfloat16 or integer tensors")
            if len(val.shape) == 0:
                raise self.error(
                    f"input '{input_of[name]}' is a scalar; every input's "
                    f"first dimension is the global batch")
            value = Value(self.fresh_arg(), tuple(val.shape), elem)
            self.input_values[input_of[name]] = value
            self.origins[value.name] = {input_of[name]}
            return value
        raise self.error(f"an input of the exported graph ('{name}') that is "
                         f"neither a parameter, a buffer, a constant nor a "
                         f"user input")

    def fresh_arg(self):
        value = f"%arg{len(self.arg_values)}"
        self.arg_values.append(value)
        return value

    def param_value(self, value):
        """The parameter as the forward pass reads it: itself in f32, its
        bf16 copy under precision='bf16' (f32 master weights)."""
        if self.precision != "bf16":
            return value
        cached = self.const_cache.get(("cast", value.name))
        if cached is None:
            cached = self.emit("cast", [value], value.shape, "bf16")
            self.const_cache[("cast", value.name)] = cached
        return cached

    def output(self, node):
        outs = list(_flatten(node.args))
        if len(outs) != 1:
            raise self.error(f"the step must return one scalar loss, the "
                             f"graph returns {len(outs)} values")
        loss = self.env[outs[0].name] if hasattr(outs[0], "name") else outs[0]
        if not isinstance(loss, Value) or loss.shape != () or \
                loss.elem not in ("f32", "bf16"):
            raise self.error("the loss must be a scalar float tensor computed "
                             "from the parameters and the inputs")
        if loss.elem != "f32":
            loss = self.emit("cast", [loss], (), "f32")
        return loss

    def call(self, node):
        target = node.target
        if target is operator.getitem:
            seq, index = node.args
            return self.env[seq.name][index]
        args = self.resolve(node.args)
        kwargs = self.resolve(node.kwargs)
        packet = getattr(target, "overloadpacket", None)
        schema = getattr(target, "_schema", None)
        if schema is not None and schema.is_mutable and \
                packet not in IDENTITY:
            self.refuse_in_place(node, target, args)
        if packet in IDENTITY:
            if packet is aten._assert_tensor_metadata:
                return None
            return args[0]
        if not any(isinstance(a, Value) for a in
                   _flatten(list(args) + list(kwargs.values()))):
            if packet in RANDOM:
                raise self.error(f"{_op_name(target)} draws random numbers "
                                 f"from constants only")
            return self.fold(target, args, kwargs)
        rule = RULES.get(packet)
        if rule is None:
            raise self.error(f"the ATen op {_op_name(target)} has no rule in "
                             f"the importer (docs/PyTorch.md lists the "
                             f"supported ops)")
        return rule(self, node, *args, **kwargs)

    def refuse_in_place(self, node, target, args):
        """torch.export's training IR keeps in-place ops: on a buffer it is
        state the step would not keep, on an activation an alias that the
        step's values do not have."""
        first = node.args[0] if node.args else None
        if isinstance(first, torch.fx.Node) and first.op == "placeholder":
            sig = self.ep.graph_signature
            buffer = dict(sig.inputs_to_buffers).get(first.name)
            if buffer is not None:
                raise self.error(
                    f"{_op_name(target)} updates the buffer "
                    f"'{_strip_wrapper(buffer)}' in place; a training step "
                    f"here updates only parameters (keep the value as a "
                    f"parameter, or compute it outside the model)")
        raise self.error(
            f"the in-place op {_op_name(target)}: use its out-of-place form "
            f"(torch.relu(x) rather than x.relu_(), nn.ReLU() without "
            f"inplace=True)")

    def resolve(self, x):
        if isinstance(x, torch.fx.Node):
            return self.env[x.name]
        if isinstance(x, (list, tuple)):
            return type(x)(self.resolve(a) for a in x)
        if isinstance(x, dict):
            return {k: self.resolve(v) for k, v in x.items()}
        return x

    def fold(self, target, args, kwargs):
        def real(x):
            if isinstance(x, Const):
                return x.tensor
            if isinstance(x, (list, tuple)):
                return type(x)(real(a) for a in x)
            return x
        out = target(*real(args), **{k: real(v) for k, v in kwargs.items()})
        return _wrap(out)

    # ------------------------------------------------------------ utilities
    def result_meta(self, node, index=None):
        val = node.meta.get("val")
        if index is not None:
            val = val[index]
        if not isinstance(val, torch.Tensor):
            raise self.error("a result without a tensor type")
        if any(not isinstance(d, int) for d in val.shape):
            raise self.error(f"a dynamic shape ({list(val.shape)}); export "
                             f"with static shapes (no dynamic_shapes)")
        elem = mlir.element_type(val.dtype)
        if elem is None:
            raise self.error(f"a result of dtype {val.dtype} (the step holds "
                             f"f32, bf16, int32 and bool tensors)")
        if elem == "f32" and self.precision == "bf16":
            elem = "bf16"
        return tuple(val.shape), elem

    def float_elem(self, *values):
        for v in values:
            if isinstance(v, Value) and v.elem in ("f32", "bf16"):
                return v.elem
        return "bf16" if self.precision == "bf16" else "f32"


def _wrap(out):
    if isinstance(out, torch.Tensor):
        return Const(out)
    if isinstance(out, (list, tuple)):
        return type(out)(_wrap(o) for o in out)
    return out


def _minimal_broadcast(t):
    for d in range(t.dim()):
        if t.shape[d] > 1:
            first = t.narrow(d, 0, 1)
            if torch.equal(first.expand_as(t), t):
                t = first
    while t.dim() > 0 and t.shape[0] == 1:
        t = t.reshape(t.shape[1:])
    return t.contiguous()


def _norm_dim(dim, rank):
    return dim + rank if dim < 0 else dim


# ------------------------------------------------------------------- rules

RULES = {}
IDENTITY = {aten.alias, aten.detach, aten.detach_, aten.lift_fresh_copy,
            aten.clone, aten.contiguous, aten._assert_tensor_metadata}
RANDOM = {aten.dropout, aten.native_dropout, aten.rand, aten.randn,
          aten.rand_like, aten.randn_like, aten.bernoulli}


def rule(*packets):
    def register(fn):
        for p in packets:
            RULES[p] = fn
        return fn
    return register


UNARY = {
    aten.neg: "neg", aten.exp: "exp", aten.log: "log", aten.tanh: "tanh",
    aten.sigmoid: "sigmoid", aten.rsqrt: "rsqrt", aten.sqrt: "sqrt",
    aten.sin: "sin", aten.cos: "cos", aten.silu: "silu",
    aten.reciprocal: "reciprocal", aten.abs: "abs", aten.relu: "relu",
    aten.erf: "erf",
}


@rule(*UNARY)
def _unary(imp, node, x):
    shape, elem = imp.result_meta(node)
    return imp.emit(UNARY[node.target.overloadpacket], [x], shape, elem)


@rule(aten.gelu)
def _gelu(imp, node, x, approximate="none"):
    shape, elem = imp.result_meta(node)
    return imp.emit("gelu" if approximate == "tanh" else "gelu_erf", [x],
                    shape, elem)


def _scalar_of(x):
    """The Python number of a scalar operand (a number or a one-element
    constant), else None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, Const) and x.tensor.numel() == 1 and \
            x.tensor.dim() == 0:
        return float(x.tensor.item())
    return None


BINARY = {aten.add: "add", aten.sub: "sub", aten.mul: "mul", aten.div: "div",
          aten.maximum: "maximum", aten.minimum: "minimum",
          aten.pow: "pow", aten.rsub: "sub"}


# name -> (op, attribute, attribute value of the scalar) of x OP scalar.
SCALAR_FORMS = {
    "add": ("add_scalar", "value", lambda v: v),
    "sub": ("add_scalar", "value", lambda v: -v),
    "mul": ("scale", "factor", lambda v: v),
    "div": ("scale", "factor", lambda v: 1.0 / v),
    "pow": ("pow_scalar", "exponent", lambda v: v),
}


@rule(*BINARY)
def _binary(imp, node, a, b, *rest, alpha=1, rounding_mode=None, **_):
    packet = node.target.overloadpacket
    if rest:
        alpha = rest[0]
    if rounding_mode is not None:
        raise imp.error(f"division with rounding_mode={rounding_mode!r}")
    if packet is aten.rsub:
        a, b = b, a
    shape, elem = imp.result_meta(node)
    if elem not in ("f32", "bf16"):
        raise imp.error(f"{_op_name(node.target)} on {elem} tensors computed "
                        f"from the inputs (integer arithmetic happens only "
                        f"on constants)")
    if alpha != 1:
        if packet not in (aten.add, aten.sub, aten.rsub):
            raise imp.error("alpha on a product")
        b = _scale(imp, b, float(alpha), elem)
    sa, sb = _scalar_of(a), _scalar_of(b)
    name = BINARY[packet]
    # x OP scalar as one op with an attribute; scalar OP x too where OP
    # commutes, and scalar - x as -x + scalar.
    scalar, value = None, None
    if sb is not None and isinstance(a, Value) and name in SCALAR_FORMS:
        scalar, value = sb, a
    elif sa is not None and isinstance(b, Value) and name in ("add", "mul"):
        scalar, value = sa, b
    elif sa is not None and isinstance(b, Value) and name == "sub":
        scalar, value = sa, imp.emit("neg", [b], b.shape, elem)
        name = "add"
    if value is not None:
        op, attr, of = SCALAR_FORMS[name]
        return imp.emit(op, [value], shape, elem, {attr: mlir.f32(of(scalar))})
    lhs = _operand(imp, a, elem)
    rhs = _operand(imp, b, elem)
    return imp.emit(name, [lhs, rhs], shape, elem)


def _operand(imp, x, elem):
    """A float operand of a broadcasting op: a step value cast to `elem`
    where needed, a constant in its smallest broadcastable form."""
    if isinstance(x, (int, float)):
        return imp.emit("full", [], (), elem, {"value": mlir.f32(x)})
    if isinstance(x, Const):
        return imp.materialize(x, elem, minimal=True)
    if x.elem != elem:
        if x.elem not in ("f32", "bf16"):
            raise imp.error(f"a {x.elem} tensor in float arithmetic")
        return imp.emit("cast", [x], x.shape, elem)
    return x


def _scale(imp, x, factor, elem):
    if isinstance(x, Value):
        return imp.emit("scale", [x], x.shape, elem,
                        {"factor": mlir.f32(factor)})
    if isinstance(x, Const):
        return Const(x.tensor * factor)
    return x * factor


COMPARE = {aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge",
           aten.eq: "eq", aten.ne: "ne"}
PREDICATES = {"lt": 0, "le": 1, "gt": 2, "ge": 3, "eq": 4, "ne": 5}


@rule(*COMPARE)
def _compare(imp, node, a, b):
    shape, _ = imp.result_meta(node)
    elem = imp.float_elem(a, b)
    for v in (a, b):
        if isinstance(v, Value) and v.elem not in ("f32", "bf16"):
            raise imp.error("a comparison of integer tensors computed from "
                            "the inputs")
    pred = PREDICATES[COMPARE[node.target.overloadpacket]]
    return imp.emit("compare", [_operand(imp, a, elem), _operand(imp, b, elem)],
                    shape, "i1", {"predicate": f"{pred} : i32"})


def _mask(imp, m):
    if isinstance(m, Const):
        return imp.materialize(Const(m.tensor.to(torch.bool)), "i1",
                               minimal=True)
    if m.elem != "i1":
        raise imp.error("a condition that is not a bool tensor")
    return m


@rule(aten.where)
def _where_rule(imp, node, cond, a, b):
    shape, elem = imp.result_meta(node)
    return imp.emit("select", [_mask(imp, cond), _operand(imp, a, elem),
                               _operand(imp, b, elem)], shape, elem)


@rule(aten.masked_fill)
def _masked_fill(imp, node, x, mask, value):
    shape, elem = imp.result_meta(node)
    fill = _operand(imp, value if not isinstance(value, Const)
                    else float(value.tensor.item()), elem)
    return imp.emit("select", [_mask(imp, mask), fill, _operand(imp, x, elem)],
                    shape, elem)


def _reduce(imp, node, op, x, dims, keepdim):
    shape, elem = imp.result_meta(node)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(len(x.shape)))
    if isinstance(dims, int):
        dims = [dims]
    dims = sorted(_norm_dim(d, len(x.shape)) for d in dims)
    attrs = {"dims": mlir.i64_array(dims)}
    if keepdim:
        attrs["keepdim"] = None
    return imp.emit(op, [_operand(imp, x, elem)], shape, elem, attrs)


@rule(aten.mean)
def _mean(imp, node, x, dim=None, keepdim=False, dtype=None):
    return _reduce(imp, node, "reduce_mean", x, dim, keepdim)


@rule(aten.sum)
def _sum(imp, node, x, dim=None, keepdim=False, dtype=None):
    return _reduce(imp, node, "reduce_sum", x, dim, keepdim)


@rule(aten.amax)
def _amax(imp, node, x, dim=(), keepdim=False):
    return _reduce(imp, node, "reduce_max", x, dim, keepdim)


def _softmax_like(op):
    def fn(imp, node, x, dim, *rest, **_):
        shape, elem = imp.result_meta(node)
        x = _operand(imp, x, elem)
        rank = len(x.shape)
        dim = _norm_dim(dim, rank)
        if dim == rank - 1:
            return imp.emit(op, [x], shape, elem)
        perm = list(range(rank))
        perm[dim], perm[-1] = perm[-1], perm[dim]
        moved = tuple(x.shape[p] for p in perm)
        t = imp.emit("transpose", [x], moved, elem,
                     {"permutation": mlir.i64_array(perm)})
        s = imp.emit(op, [t], moved, elem)
        return imp.emit("transpose", [s], shape, elem,
                        {"permutation": mlir.i64_array(perm)})
    return fn


RULES[aten.softmax] = RULES[aten._softmax] = _softmax_like("softmax")
RULES[aten.log_softmax] = RULES[aten._log_softmax] = \
    _softmax_like("log_softmax")


# ------------------------------------------------------------------ views

def _reshape_to(imp, x, shape):
    x = imp.materialize(x)
    if tuple(shape) == tuple(x.shape):
        return x
    return imp.emit("reshape", [x], tuple(shape), x.elem)


@rule(aten.view, aten.reshape, aten._unsafe_view, aten.unsqueeze,
      aten.squeeze, aten.flatten, aten.unflatten)
def _view(imp, node, x, *_, **__):
    shape, _elem = imp.result_meta(node)
    return _reshape_to(imp, x, shape)


def _permute(imp, x, perm, shape):
    if list(perm) == list(range(len(perm))):
        return x
    result = imp.emit("transpose", [x], shape, x.elem,
                      {"permutation": mlir.i64_array(perm)})
    imp.transposed[result.name] = (x, list(perm))
    return result


@rule(aten.transpose)
def _transpose(imp, node, x, d0, d1):
    shape, _ = imp.result_meta(node)
    rank = len(x.shape)
    perm = list(range(rank))
    d0, d1 = _norm_dim(d0, rank), _norm_dim(d1, rank)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _permute(imp, x, perm, shape)


@rule(aten.t)
def _t(imp, node, x):
    shape, _ = imp.result_meta(node)
    if len(x.shape) < 2:
        return x
    return _permute(imp, x, [1, 0], shape)


@rule(aten.permute)
def _permute_rule(imp, node, x, dims):
    shape, _ = imp.result_meta(node)
    rank = len(x.shape)
    return _permute(imp, x, [_norm_dim(d, rank) for d in dims], shape)


@rule(aten.expand)
def _expand(imp, node, x, size, *_, **__):
    shape, _ = imp.result_meta(node)
    if isinstance(x, Const):
        x = imp.materialize(x, minimal=True)
    if tuple(x.shape) == tuple(shape):
        return x
    return imp.emit("broadcast_to", [x], shape, x.elem)


_TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16,
                 "i32": torch.int32, "i1": torch.bool}


def _slice_value(imp, x, dim, start, end, shape):
    if start == 0 and end >= x.shape[dim]:
        return x
    if end <= start:
        # An empty slice (Phi-3's pass-through half of a rotary embedding
        # over the whole head): a constant with no elements, which a
        # concatenation drops.
        return Const(torch.empty(shape, dtype=_TORCH_DTYPES[x.elem]))
    return imp.emit("slice", [x], shape, x.elem,
                    {"dim": mlir.i64(dim), "start": mlir.i64(start),
                     "end": mlir.i64(end)})


def _clamp_range(start, end, size):
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    return max(0, min(start, size)), max(0, min(end, size))


@rule(aten.slice)
def _slice(imp, node, x, dim=0, start=None, end=None, step=1):
    shape, _ = imp.result_meta(node)
    x = imp.materialize(x)
    dim = _norm_dim(dim, len(x.shape))
    if step != 1:
        raise imp.error(f"a slice with step {step} (only step 1)")
    start, end = _clamp_range(start, end, x.shape[dim])
    return _slice_value(imp, x, dim, start, end, shape)


def _take_index(imp, x, dim, index, shape):
    """x[..., index, ...] along `dim`, the dimension dropped (select,
    unbind). From a transpose's result, the index is taken from the
    transpose's input and the rest transposed: timm's attention splits q, k
    and v with `qkv.permute(2, 0, 3, 1, 4).unbind(0)`, and taken after the
    permute, the batch would sit behind the q/k/v axis, which the
    partitioner cannot split."""
    if x.name in imp.transposed:
        source, perm = imp.transposed[x.name]
        src = perm[dim]
        taken = list(source.shape)
        del taken[src]
        inner = _take_index(imp, source, src, index, tuple(taken))
        rest = [p - (p > src) for j, p in enumerate(perm) if j != dim]
        return _permute(imp, inner, rest, shape)
    kept = list(x.shape)
    kept[dim] = 1
    one = _slice_value(imp, x, dim, index, index + 1, tuple(kept))
    return _reshape_to(imp, one, shape)


@rule(aten.select)
def _select_index(imp, node, x, dim, index):
    shape, _ = imp.result_meta(node)
    x = imp.materialize(x)
    dim = _norm_dim(dim, len(x.shape))
    index = index + x.shape[dim] if index < 0 else index
    return _take_index(imp, x, dim, index, shape)


@rule(aten.split, aten.split_with_sizes)
def _split(imp, node, x, sizes, dim=0):
    x = imp.materialize(x)
    dim = _norm_dim(dim, len(x.shape))
    total = x.shape[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, total - s) for s in range(0, total, sizes)]
    outs, start = [], 0
    for i, size in enumerate(sizes):
        shape, _ = imp.result_meta(node, i)
        outs.append(_slice_value(imp, x, dim, start, start + size, shape))
        start += size
    return outs


@rule(aten.chunk)
def _chunk(imp, node, x, chunks, dim=0):
    x = imp.materialize(x)
    dim = _norm_dim(dim, len(x.shape))
    size = -(-x.shape[dim] // chunks)  # torch.chunk: ceil(n / chunks) each
    return _split(imp, node, x, size, dim)


@rule(aten.unbind)
def _unbind(imp, node, x, dim=0):
    x = imp.materialize(x)
    dim = _norm_dim(dim, len(x.shape))
    outs = []
    for i in range(x.shape[dim]):
        shape, _ = imp.result_meta(node, i)
        outs.append(_take_index(imp, x, dim, i, shape))
    return outs


@rule(aten.cat)
def _cat(imp, node, tensors, dim=0):
    shape, elem = imp.result_meta(node)
    rank = len(shape)
    dim = _norm_dim(dim, rank)
    parts = []
    for t in tensors:
        if isinstance(t, Const) and t.tensor.numel() == 0:
            continue  # an empty cache or padding: nothing to concatenate
        v = _operand(imp, t, elem) if isinstance(t, Value) and \
            t.elem in ("f32", "bf16") else imp.materialize(t, None if
                                                           elem == "i32"
                                                           else elem)
        parts.append(v)
    if len(parts) == 1:
        return parts[0]
    return imp.emit("concat", parts, shape, elem, {"dim": mlir.i64(dim)})


@rule(aten.pad, aten.constant_pad_nd)
def _pad(imp, node, x, pad, mode="constant", value=None):
    if mode != "constant":
        raise imp.error(f"padding mode {mode!r} (only constant)")
    shape, elem = imp.result_meta(node)
    x = imp.materialize(x)
    value = 0.0 if value is None else float(value)
    rank = len(x.shape)
    cur = x
    for i in range(0, len(pad), 2):
        dim = rank - 1 - i // 2
        low, high = pad[i], pad[i + 1]
        if low == 0 and high == 0:
            continue
        if low < 0 or high < 0:
            raise imp.error("negative padding (cropping)")
        new_shape = list(cur.shape)
        new_shape[dim] += low + high
        cur = imp.emit("pad", [cur], tuple(new_shape), elem,
                       {"dim": mlir.i64(dim), "low": mlir.i64(low),
                        "high": mlir.i64(high), "value": mlir.f32(value)})
    return cur


@rule(aten.to, aten._to_copy, aten.type_as)
def _to(imp, node, x, *args, **kwargs):
    shape, elem = imp.result_meta(node)
    if x.elem == elem:
        return x
    if x.elem in ("f32", "bf16") and elem in ("f32", "bf16"):
        return imp.emit("cast", [x], shape, elem)
    raise imp.error(f"a conversion from {x.elem} to {elem} of a tensor "
                    f"computed from the inputs")


# ---------------------------------------------------------- linear algebra

def _matmul(imp, a, b, shape, elem, transpose_rhs=False):
    attrs = {"transpose_rhs": None} if transpose_rhs else None
    return imp.emit("matmul", [_operand_full(imp, a, elem),
                               _operand_full(imp, b, elem)],
                    shape, elem, attrs)


def _operand_full(imp, x, elem):
    if isinstance(x, Const):
        return imp.materialize(x, elem)
    return _operand(imp, x, elem)


@rule(aten.mm, aten.bmm, aten.matmul)
def _mm(imp, node, a, b):
    shape, elem = imp.result_meta(node)
    return _matmul(imp, a, b, shape, elem)


@rule(aten.linear)
def _linear(imp, node, x, w, b=None):
    shape, elem = imp.result_meta(node)
    y = _matmul(imp, x, w, shape, elem, transpose_rhs=True)
    if b is None:
        return y
    return imp.emit("add", [y, _operand_full(imp, b, elem)], shape, elem)


@rule(aten.addmm)
def _addmm(imp, node, bias, a, b, beta=1, alpha=1):
    shape, elem = imp.result_meta(node)
    if beta != 1 or alpha != 1:
        raise imp.error("addmm with beta or alpha other than 1")
    y = _matmul(imp, a, b, shape, elem)
    return imp.emit("add", [y, _operand_full(imp, bias, elem)], shape, elem)


@rule(aten.embedding)
def _embedding(imp, node, weight, ids, padding_idx=-1, scale_grad=False,
               sparse=False):
    shape, elem = imp.result_meta(node)
    if padding_idx is not None and padding_idx >= 0:
        raise imp.error(f"an embedding with padding_idx={padding_idx} (its "
                        f"row gets no gradient in torch; build the embedding "
                        f"without padding_idx)")
    if scale_grad or sparse:
        raise imp.error("an embedding with scale_grad_by_freq or sparse")
    table = _operand_full(imp, weight, elem)
    ids = imp.materialize(ids, "i32")
    if ids.elem != "i32":
        raise imp.error("embedding ids that are not integers")
    imp.id_uses |= imp.origins.get(ids.name, set())
    return imp.emit("embedding", [ids, table], shape, elem)


@rule(aten.layer_norm)
def _layer_norm(imp, node, x, normalized_shape, weight=None, bias=None,
                eps=1e-5, cudnn_enable=True):
    shape, elem = imp.result_meta(node)
    if len(normalized_shape) != 1:
        raise imp.error(f"layer_norm over {len(normalized_shape)} dimensions "
                        f"(only the last one)")
    d = normalized_shape[0]
    ones = Const(torch.ones(d)) if weight is None else weight
    zeros = Const(torch.zeros(d)) if bias is None else bias
    return imp.emit("layer_norm", [_operand(imp, x, elem),
                                   _operand_full(imp, ones, elem),
                                   _operand_full(imp, zeros, elem)],
                    shape, elem, {"epsilon": mlir.f32(eps)})


@rule(aten.scaled_dot_product_attention)
def _sdpa(imp, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
          scale=None, enable_gqa=False):
    shape, elem = imp.result_meta(node)
    q, k, v = (_operand(imp, t, elem) if isinstance(t, Value) else
               imp.materialize(t, elem) for t in (q, k, v))
    *lead, L, E = q.shape
    S = k.shape[-2]
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        k, v = (_repeat_heads(imp, t, q.shape[-3]) for t in (k, v))
    scores_shape = tuple(lead) + (L, S)
    s = imp.emit("matmul", [q, k], scores_shape, elem, {"transpose_rhs": None})
    factor = scale if scale is not None else 1.0 / math.sqrt(E)
    s = imp.emit("scale", [s], scores_shape, elem,
                 {"factor": mlir.f32(factor)})
    neg_inf = None
    if is_causal:
        mask = Const(torch.ones(L, S, dtype=torch.bool).tril())
        neg_inf = imp.emit("full", [], (), elem,
                           {"value": mlir.f32(float("-inf"))})
        s = imp.emit("select", [imp.materialize(mask, "i1", minimal=True), s,
                                neg_inf], scores_shape, elem)
    if attn_mask is not None:
        is_bool = (attn_mask.tensor.dtype == torch.bool
                   if isinstance(attn_mask, Const) else attn_mask.elem == "i1")
        if is_bool:
            if neg_inf is None:
                neg_inf = imp.emit("full", [], (), elem,
                                   {"value": mlir.f32(float("-inf"))})
            s = imp.emit("select", [_mask(imp, attn_mask), s, neg_inf],
                         scores_shape, elem)
        else:
            s = imp.emit("add", [s, _operand(imp, attn_mask, elem)],
                         scores_shape, elem)
    p = imp.emit("softmax", [s], scores_shape, elem)
    if dropout_p > 0:
        p = _dropout_value(imp, p, dropout_p)
    return imp.emit("matmul", [p, v], shape, elem)


def _repeat_heads(imp, t, heads):
    *lead, h, s, d = t.shape
    g = heads // h
    b = tuple(lead)
    x = imp.emit("reshape", [t], b + (h, 1, s, d), t.elem)
    x = imp.emit("broadcast_to", [x], b + (h, g, s, d), t.elem)
    return imp.emit("reshape", [x], b + (heads, s, d), t.elem)


def _dropout_value(imp, x, p):
    stream = imp.dropout_streams
    imp.dropout_streams += 1
    return imp.emit("dropout", [x], x.shape, x.elem,
                    {"p": mlir.f32(p), "stream": mlir.i64(stream)})


@rule(aten.dropout, aten.feature_dropout)
def _dropout(imp, node, x, p, train):
    if node.target.overloadpacket is aten.feature_dropout and p > 0 and train:
        raise imp.error("channel dropout (Dropout2d/3d)")
    if not train or p == 0:
        return x
    return _dropout_value(imp, x, float(p))


@rule(aten.cross_entropy_loss)
def _cross_entropy(imp, node, logits, target, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    if weight is not None:
        raise imp.error("cross_entropy with class weights")
    if reduction != 1:
        raise imp.error("cross_entropy with reduction other than 'mean'")
    if label_smoothing:
        raise imp.error("cross_entropy with label_smoothing")
    if not isinstance(target, Value) or target.elem != "i32":
        raise imp.error("cross_entropy against class probabilities (only "
                        "integer class labels)")
    if len(logits.shape) != len(target.shape) + 1 or \
            tuple(logits.shape[:-1]) != tuple(target.shape):
        raise imp.error(f"cross_entropy of logits {list(logits.shape)} "
                        f"against labels {list(target.shape)}: the classes "
                        f"must be the last dimension (flatten to [N, C] and "
                        f"[N])")
    imp.loss_targets.append(target)
    attrs = {"ignore_index": mlir.i64(ignore_index)}
    return imp.emit("softmax_cross_entropy", [logits, target], (), "f32",
                    attrs)


@rule(aten.nll_loss, aten.nll_loss_nd, aten.nll_loss_forward)
def _nll_loss(imp, node, logp, target, weight=None, reduction=1,
              ignore_index=-100):
    # F.nll_loss / nn.NLLLoss as torch.export records them (nll_loss_nd);
    # nll_loss_forward also returns the counted weight, which only its
    # backward reads.
    forward = node.target.overloadpacket is aten.nll_loss_forward
    if weight is not None:
        raise imp.error("nll_loss with class weights")
    if reduction != 1:
        raise imp.error("nll_loss with reduction other than 'mean'")
    if not isinstance(target, Value) or target.elem != "i32":
        raise imp.error("nll_loss against non-integer targets (only integer "
                        "class labels)")
    if not isinstance(logp, Value):
        raise imp.error("nll_loss of a constant input")
    rank = len(logp.shape)
    if rank < 2 or tuple(target.shape) != \
            (logp.shape[0],) + tuple(logp.shape[2:]):
        raise imp.error(f"nll_loss of input {list(logp.shape)} against "
                        f"labels {list(target.shape)}: expected [N, C] and "
                        f"[N] (or [N, C, d...] and [N, d...])")
    if rank > 2:
        # torch's classes are dimension 1; train.nll_loss's the last. A
        # log_softmax over dimension 1 ends in the inverse transpose, which
        # folds away with this one (autoshard-raise then sees the pair).
        perm = [0] + list(range(2, rank)) + [1]
        logp = imp.emit("transpose", [logp],
                        tuple(logp.shape[p] for p in perm), logp.elem,
                        {"permutation": mlir.i64_array(perm)})
    imp.loss_targets.append(target)
    loss = imp.emit("nll_loss", [logp, target], (), "f32",
                    {"ignore_index": mlir.i64(ignore_index)})
    return (loss, None) if forward else loss


@rule(aten.full_like, aten.zeros_like, aten.ones_like, aten.empty_like)
def _like(imp, node, x, *args, **kwargs):
    val = node.meta.get("val")
    fill = {aten.zeros_like: 0, aten.ones_like: 1, aten.empty_like: 0}.get(
        node.target.overloadpacket)
    if fill is None:
        fill = args[0] if args else kwargs["fill_value"]
    return Const(torch.full(tuple(val.shape), fill, dtype=val.dtype))


BATCH_NORMS = (aten.batch_norm, aten._native_batch_norm_legit_functional,
               aten.native_batch_norm,
               aten._native_batch_norm_legit_no_training, aten.instance_norm)


@rule(*BATCH_NORMS)
def _batch_norm(imp, node, *args, **kwargs):
    raise imp.error("batch normalisation: it normalises over the batch, "
                    "which each rank holds only a share of, and updates "
                    "running statistics (buffers) that the step does not "
                    "keep; use LayerNorm, RMSNorm or GroupNorm-style "
                    "normalisation over features")


@rule(aten.sym_size)
def _sym_size(imp, node, x, dim):
    return x.shape[dim]
