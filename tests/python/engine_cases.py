"""A corpus of functions and modules written the way people write PyTorch, each with an input
factory. Used by test_engine_cases.py (dynview against eager and against torch._dynamo.explain)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CASES = []


def case(*shapes, dtype=torch.float32, extra=None, inductor=False):
    """Register fn with inputs of `shapes`; extra(seed) may add non-tensor arguments."""
    def deco(fn):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            args = [torch.randn(*s, generator=g, dtype=dtype) for s in shapes]
            if extra is not None:
                args += list(extra(seed))
            return args
        CASES.append((fn.__name__, fn, make, inductor))
        return fn
    return deco


def module_case(build, *shapes, inductor=False):
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(*s, generator=g) for s in shapes]
    torch.manual_seed(0)
    m = build()
    CASES.append((type(m).__name__ + "_" + build.__name__, m, make, inductor))


# ---- elementwise ----
@case((4, 5), (4, 5), inductor=True)
def add_mul(x, y): return x + y * 2
@case((8,), inductor=True)
def unary_chain(x): return torch.sin(x).cos().exp() - torch.tanh(x)
@case((3, 4))
def scalar_ops(x): return (x - 1.5) / 3 + x ** 2 - 2 ** x.abs()
@case((3, 4), (4,))
def broadcast(x, b): return x * b + b
@case((5,))
def neg_abs(x): return -x + abs(x) + x.neg().abs()
@case((2, 3), (2, 3))
def compare_where(x, y): return torch.where(x > y, x, y) + (x >= 0).float()
@case((6,))
def clamp_ops(x): return x.clamp(min=-0.5, max=0.5) + torch.clamp(x, -1, 1)
@case((4, 4), inductor=True)
def activations(x): return F.relu(x) + F.gelu(x) + F.silu(x) + torch.sigmoid(x) + F.leaky_relu(x, 0.1)
@case((3, 3))
def inplace_ops(x):
    y = x.clone()
    y.add_(1)
    y.mul_(2)
    return y
@case((4,), (4,))
def min_max(x, y): return torch.maximum(x, y) - torch.minimum(x, y)
@case((5, 5))
def math_consts(x): return x * math.pi + math.sqrt(2.0)
@case((3,), dtype=torch.float64)
def double_dtype(x): return x * 2 + 1
@case((4,))
def type_conversions(x): return x.to(torch.float64) + x.double() + x.half().float()
@case((2, 2))
def pow_ops(x): return x.pow(2) + torch.pow(x, 3) + x ** 0.5 * 0 + x.square()
@case((10,))
def floor_ceil(x): return torch.floor(x) + torch.ceil(x) + torch.round(x) + x.trunc()

# ---- reductions ----
@case((4, 5), inductor=True)
def reductions(x): return x.sum() + x.mean() + x.max() + x.min() + x.std()
@case((4, 5))
def reductions_dim(x): return x.sum(dim=1) + x.mean(1) + x.amax(dim=-1) + x.norm(dim=1)
@case((4, 5))
def argmax_keepdim(x): return x.argmax(dim=1, keepdim=True).float() + x.sum(-1, keepdim=True)
@case((3, 4))
def max_with_indices(x):
    v, i = x.max(dim=1)
    return v + i.float()
@case((6,))
def cumsum_prod(x): return x.cumsum(0) + x.cumprod(dim=0)
@case((3, 4))
def logsumexp_softmax(x): return torch.logsumexp(x, dim=1) + F.log_softmax(x, dim=1).sum(1)
@case((5, 5))
def var_mean(x):
    v, m = torch.var_mean(x, dim=0)
    return v * m

# ---- matmul ----
@case((3, 4), (4, 5), inductor=True)
def matmul_op(x, w): return x @ w
@case((2, 3, 4), (2, 4, 5))
def bmm(a, b): return torch.bmm(a, b) + torch.matmul(a, b)
@case((3, 4), (5, 4), (5,))
def linear_fn(x, w, b): return F.linear(x, w, b)
@case((4, 4), (4, 4))
def mm_chain(a, b): return a.mm(b).mm(a.t()) + torch.einsum("ij,jk->ik", a, b)
@case((3,), (3,))
def dot_outer(a, b): return torch.dot(a, b) + torch.outer(a, b).sum()

# ---- indexing, slicing ----
@case((5, 6))
def basic_slicing(x): return x[1:4, ::2] + x[0:3, 1:4]
@case((4, 5, 5))
def ellipsis_none(x): return x[..., 0] + x[:, None, 0, :].sum(1)
@case((5, 5))
def negative_index(x): return x[-1] + x[:, -2]
@case((6, 4))
def setitem_const(x):
    y = x.clone()
    y[0] = 0.0
    y[:, 1] = y[:, 2] * 2
    return y
@case((8,))
def index_tensor(x):
    idx = torch.tensor([0, 2, 4])
    return x[idx] * 2
@case((4, 4))
def masked_fill(x): return x.masked_fill(x < 0, 0.0)
@case((3, 4))
def gather_scatter(x):
    idx = torch.zeros(3, 2, dtype=torch.long)
    return torch.gather(x, 1, idx)
@case((5, 3))
def narrow_select(x): return x.narrow(0, 1, 3) + x.select(0, 0)

# ---- views, reshapes ----
@case((2, 3, 4))
def view_reshape(x): return x.view(6, 4) + x.reshape(-1, 4)
@case((2, 3, 4))
def permute_transpose(x): return x.permute(2, 0, 1).contiguous().sum(0) + x.transpose(1, 2).sum(1).t().t()
@case((4, 1, 3))
def squeeze_unsqueeze(x): return x.squeeze(1).unsqueeze(0).squeeze()
@case((2, 3))
def flatten_expand(x): return x.flatten() + x.unsqueeze(0).expand(4, 2, 3).sum(0).flatten()
@case((2, 3, 4))
def shape_arithmetic(x):
    b, c, d = x.shape
    return x.reshape(b * c, d) / d
@case((6, 4))
def size_method(x): return x.view(x.size(0) // 2, -1, x.size(1)).mean(1)
@case((3, 4))
def repeat_tile(x): return x.repeat(2, 1) + torch.tile(x, (2, 1))
@case((4, 6))
def chunk_split(x):
    a, b = x.chunk(2, dim=1)
    c, d = torch.split(x, 3, dim=1)
    return a + b + c.sum() + d
@case((2, 3))
def T_attribute(x): return x.T @ x + x.mT.sum()
@case((3, 3))
def flip_roll(x): return torch.flip(x, [0]) + torch.roll(x, 1, 0)

# ---- cat / stack ----
@case((2, 3), (2, 3), inductor=True)
def cat_stack(x, y): return torch.cat([x, y], dim=0).sum(0) + torch.stack((x, y)).mean(0).sum(0)
@case((3,), (3,), (3,))
def cat_many(a, b, c): return torch.cat([a, b, c, a * 2])
@case((2, 2))
def hstack_vstack(x): return torch.hstack([x, x]).sum() + torch.vstack([x, x]).sum()

# ---- factories ----
@case((3, 4))
def zeros_ones_like(x): return x + torch.zeros_like(x) + torch.ones(3, 4) * 2
@case((5,))
def arange_linspace(x): return x + torch.arange(5) + torch.linspace(0, 1, 5)
@case((2, 3))
def full_eye(x): return x @ torch.eye(3) + torch.full((2, 3), 0.5)
@case((4,))
def new_tensor_methods(x): return x + x.new_zeros(4) + x.new_ones(4)
@case((2, 2))
def empty_like_fill(x):
    y = torch.empty_like(x)
    y.fill_(3.0)
    return x * y

# ---- nn.functional ----
@case((2, 3, 8, 8), (4, 3, 3, 3), inductor=True)
def conv2d_fn(x, w): return F.conv2d(x, w, padding=1)
@case((2, 4, 8, 8))
def pooling(x): return F.max_pool2d(x, 2) + F.avg_pool2d(x, 2)
@case((4, 10))
def softmax_family(x): return F.softmax(x, dim=-1) + F.log_softmax(x, -1).exp()
@case((4, 8))
def layer_norm_fn(x): return F.layer_norm(x, (8,))
@case((3, 5), (3, 5))
def losses(x, y): return F.mse_loss(x, y) + F.l1_loss(x, y) + F.smooth_l1_loss(x, y)
@case((4, 6))
def normalize_pad(x): return F.pad(F.normalize(x, dim=1), (1, 1))
@case((2, 3, 4, 4))
def interpolate(x): return F.interpolate(x, scale_factor=2, mode="nearest").sum((2, 3))
@case((3, 7))
def dropout_eval(x): return F.dropout(x, p=0.5, training=False)
@case((4, 5))
def cross_entropy(x):
    target = torch.tensor([0, 1, 2, 3])
    return F.cross_entropy(x, target)

# ---- keyword arguments, defaults ----
@case((3, 4))
def kwargs_call(x): return torch.sum(x, dim=1, keepdim=True) + torch.mean(input=x, dim=0)
def _scaled(x, scale=2.0, *, shift=1.0): return x * scale + shift
@case((4,))
def defaults_and_kwonly(x): return _scaled(x) + _scaled(x, 3.0, shift=-1.0) + _scaled(x, shift=0.5)
def _star(*xs, **kw): return sum(xs) * kw.get("k", 1)
@case((4,), (4,))
def star_args(x, y): return _star(x, y, k=3) + _star(*[x, y])
@case((3,), extra=lambda s: [2])
def int_argument(x, n): return x * n + n
@case((3,), extra=lambda s: ["relu"])
def string_argument(x, act): return F.relu(x) if act == "relu" else torch.tanh(x)
@case((3,), extra=lambda s: [None])
def none_argument(x, bias): return x if bias is None else x + bias
@case((3,), extra=lambda s: [True])
def bool_argument(x, flag): return x * 2 if flag else x

# ---- helpers 1-3 levels deep, closures ----
def _h1(x): return x.sin() * 2
def _h2(x): return _h1(x) + _h1(x * 2)
def _h3(x): return _h2(x).relu() + _h1(x)
@case((4, 4))
def helpers_three_deep(x): return _h3(x) - _h2(x)
@case((5,))
def local_closure(x):
    scale = x.shape[0]
    def inner(y):
        return y * scale
    return inner(x) + inner(x + 1)
def _make_adder(k):
    def add(t): return t + k
    return add
_add3 = _make_adder(3.0)
@case((4,))
def global_closure(x): return _add3(x) * 2
@case((3, 3))
def lambda_use(x):
    f = lambda t: t * t + 1  # noqa: E731
    return f(x) + f(x.T)
_WEIGHT = torch.randn(4, 4)
@case((2, 4))
def global_tensor(x): return x @ _WEIGHT
@case((3,))
def nested_function_closure_counter(x):
    acc = []
    def push(v):
        acc.append(v * 2)
    push(x)
    push(x + 1)
    return acc[0] + acc[1]

# ---- loops over ranges, lists ----
@case((4,))
def range_loop(x):
    for i in range(4):
        x = x * 0.5 + i
    return x
@case((3,), (3,), (3,))
def list_loop(a, b, c):
    total = torch.zeros(3)
    for t in [a, b, c]:
        total = total + t
    return total
@case((4, 3))
def enumerate_zip(x):
    out = []
    for i, (row, w) in enumerate(zip(x, [1.0, 2.0, 3.0, 4.0])):
        out.append(row * w + i)
    return torch.stack(out)
@case((2, 3))
def while_loop_const(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x
@case((5,))
def list_comprehension(x): return sum([x * i for i in range(3)])
@case((3,))
def dict_building(x):
    d = {"a": x, "b": x * 2}
    d["c"] = d["a"] + d["b"]
    return d["c"] + sum(d.values())
@case((2,), (2,))
def tuple_unpack(a, b):
    p, q = a + b, a - b
    first, *rest = [p, q, a]
    return first + rest[0] + rest[1]
@case((4,))
def list_of_tensors_arg_loop(x):
    xs = [x, x * 2, x * 3]
    return torch.stack(xs).sum(0)

# ---- control flow on constants / shapes / dtypes ----
@case((4, 6))
def branch_on_shape(x):
    if x.shape[1] > 5:
        return x[:, :5]
    return x
@case((3,))
def branch_on_dtype(x):
    if x.dtype == torch.float32:
        return x * 2
    return x
@case((3, 3))
def branch_on_ndim(x): return x.sum() if x.ndim == 2 else x
@case((4,))
def branch_on_device(x): return x + 1 if x.device.type == "cpu" else x
@case((3,))
def isinstance_check(x): return x * 2 if isinstance(x, torch.Tensor) else x
@case((3,))
def requires_grad_branch(x): return x + 1 if not x.requires_grad else x
@case((2, 2))
def len_of_tensor(x): return x * len(x)
@case((3,))
def grad_mode_branch(x):
    if torch.is_grad_enabled():
        return x + 1
    return x - 1
@case((3,))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x
@case((4,))
def fstring_const(x):
    name = f"layer_{x.shape[0]}"
    return x * len(name)

# ---- returning structures ----
@case((3,))
def return_tuple_and_const(x): return x + 1, 5, "s"
@case((3,))
def return_dict(x): return {"out": x * 2, "aux": [x.sum(), 3]}
@case((3,))
def return_input(x): return x
@case((2,), (2,))
def return_nested(a, b): return [(a, b), {"k": (a + b,)}]

# ---- data-dependent and unsupported constructs (graph breaks) ----
@case((4,))
def data_dependent_if(x):
    if x.sum() > 0:
        return x * 2
    return x
@case((3,))
def item_call(x): return x * x.sum().item()
@case((3,))
def tolist_call(x): return [v * 2 for v in x.tolist()]
@case((3,))
def bool_of_tensor(x): return x + 1 if bool(x.mean() > 0) else x - 1
@case((3,))
def print_call(x):
    print("value")
    return x + 1
@case((3,))
def nonzero_data_dependent(x): return x[x > 0].sum() + x.nonzero().shape[0]
@case((4,))
def int_of_tensor(x): return x * int(x.max())

# ---- modules ----
class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.drop(self.attn(self.norm(x)))
        return x + self.mlp(self.norm(x))


class _Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Block() for _ in range(3)])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x.mean(dim=1))


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


class _Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.proj = nn.Linear(6, 3)

    def forward(self, x):
        idx = (x.abs() * 5).long().clamp(0, 19)
        return self.proj(self.emb(idx)).sum(1)


class _TrainingFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        if self.training:
            return self.lin(x) * 2
        return self.lin(x)


class _BufferModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0, 3.0, 4.0]))
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * self.scale + self.w


class _HelperMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = "gelu"

    def activate(self, x):
        return F.gelu(x) if self.act == "gelu" else F.relu(x)

    def forward(self, x):
        return self.activate(self.lin(x)) + self.lin.weight.sum()


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(6, 6) for _ in range(3)])

    def forward(self, x, residual=True):
        y = self.layers(x)
        return x + y if residual else y


class _RNNCellLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(4, 4)
        self.hh = nn.Linear(4, 4)

    def forward(self, xs):
        h = torch.zeros(xs.shape[1], 4)
        for t in range(xs.shape[0]):
            h = torch.tanh(self.ih(xs[t]) + self.hh(h))
        return h


class _BreakingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y
        return -y


module_case(lambda: _MLP().eval(), (5, 8), inductor=True)
module_case(lambda: _Block().eval(), (2, 4, 8))
module_case(lambda: _Tower().eval(), (2, 5, 8), inductor=True)
module_case(lambda: _ConvNet().eval(), (2, 3, 8, 8))
module_case(lambda: _Embed().eval(), (3, 4))
module_case(lambda: _TrainingFlag().eval(), (2, 5))
module_case(lambda: _TrainingFlag().train(), (2, 5))
module_case(lambda: _BufferModule(), (3,))
module_case(lambda: _HelperMethod().eval(), (2, 4))
module_case(lambda: _Residual().eval(), (3, 6))
module_case(lambda: _RNNCellLike().eval(), (5, 2, 4))
module_case(lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval(), (3, 4), inductor=True)
module_case(lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)).eval(), (1, 2, 9, 9))
module_case(lambda: nn.LayerNorm(7), (3, 7))
module_case(lambda: nn.Sequential(nn.Linear(5, 5), nn.Tanh(), nn.Dropout(0.2), nn.Linear(5, 1), nn.Sigmoid()).eval(), (4, 5))
module_case(lambda: _BreakingModule().eval(), (2, 3))


# ---- real model code: ResNet blocks (optional downsample, getattr by name), a dataclass config and
# @property, nn.MultiheadAttention, an LSTMCell loop, super().forward with *args, einsum/unbind,
# isinstance over a Sequential, a GPT-style decoder (ModuleList of ModuleDicts, causal mask) ----
import dataclasses  # noqa: E402


@dataclasses.dataclass
class _Cfg:
    d: int = 16
    heads: int = 2
    dropout: float = 0.0
    use_bias: bool = True

class _BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        identity = x
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return F.relu(out + identity)

class _ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.layer1 = _BasicBlock(8, 8); self.layer2 = _BasicBlock(8, 16, 2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1)); self.fc = nn.Linear(16, 10)
    def forward(self, x):
        x = self.stem(x)
        for i in (1, 2):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(torch.flatten(self.pool(x), 1))

class _CfgAttn(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d, bias=cfg.use_bias)
        self.proj = nn.Linear(cfg.d, cfg.d)
    @property
    def head_dim(self):
        return self.cfg.d // self.cfg.heads
    def forward(self, x, mask=None):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, T, self.cfg.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.cfg.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))

class _MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = nn.LayerNorm(16)
    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=False)
        return self.norm(x + y)

class _LSTMLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(8, 12); self.out = nn.Linear(12, 3)
    def forward(self, xs):
        h = xs.new_zeros(xs.size(1), 12); c = torch.zeros_like(h)
        outs = []
        for t in range(xs.size(0)):
            h, c = self.cell(xs[t], (h, c))
            outs.append(self.out(h))
        return torch.stack(outs)

class _Base(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(8, 8)
    def forward(self, x):
        return self.lin(x)

class _Derived(_Base):
    def forward(self, x, *args, scale=2.0, **kwargs):
        return super().forward(x) * scale + sum(a.sum() for a in args)

class _Einsum(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.randn(4, 8, 8)); self.register_buffer("b", torch.zeros(8))
    def forward(self, x):
        y = torch.einsum("bi,hij->bhj", x, self.w) + self.b
        parts = y.unbind(1)
        return torch.cat([p.softmax(-1) for p in parts], dim=-1).clamp(min=0.01).log()

class _InitLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))
    def forward(self, x):
        for m in self.layers:
            if isinstance(m, nn.Linear):
                x = m(x)
            else:
                x = m(x) * 0.5
        return F.log_softmax(x, dim=-1)

class _CausalAttn(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.h, self.d = h, d
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.o(y)

class _GPT(nn.Module):
    def __init__(self, vocab=50, d=32, n=2, maxlen=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d); self.pos = nn.Embedding(maxlen, d)
        self.blocks = nn.ModuleList([nn.ModuleDict({"ln1": nn.LayerNorm(d), "attn": _CausalAttn(d), "ln2": nn.LayerNorm(d), "mlp": nn.Sequential(nn.Linear(d, 4*d), nn.GELU(), nn.Linear(4*d, d))}) for _ in range(n)])
        self.head = nn.Linear(d, vocab)
    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = x + b["attn"](b["ln1"](x))
            x = x + b["mlp"](b["ln2"](x))
        return self.head(x)


class _GPTOnFloats(nn.Module):
    """_GPT fed by the corpus' float inputs: token ids derived from them."""

    def __init__(self):
        super().__init__()
        self.gpt = _GPT()

    def forward(self, x):
        return self.gpt((x.abs() * 10).long() % 50)


module_case(lambda: _ResNetish().eval(), (2, 3, 16, 16), inductor=True)
module_case(lambda: _ResNetish().train(), (2, 3, 16, 16))
module_case(lambda: _CfgAttn(_Cfg()).eval(), (2, 5, 16))
module_case(lambda: _MHA().eval(), (2, 5, 16))
module_case(lambda: _LSTMLoop(), (4, 3, 8))
module_case(lambda: _Derived(), (2, 8), (3,))
module_case(lambda: _Einsum(), (2, 8))
module_case(lambda: _InitLoop(), (2, 8))
module_case(lambda: _GPTOnFloats().eval(), (2, 7), inductor=True)


class _NamedChildren(nn.Module):
    """named_children()/parameters()/modules() and next(self.parameters()) as people write them."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        x = x.to(next(self.parameters()).dtype)
        for name, m in self.named_children():
            x = m(x) if name != "l2" else torch.relu(m(x))
        reg = sum(p.pow(2).sum() for p in self.parameters())
        n_linear = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        return x * n_linear, reg


module_case(lambda: _NamedChildren(), (2, 4))


# ---- Hugging Face-style code: assert on dim, optional mask with finfo(dtype).min, ModuleList
# slices, hidden-state tuples built with +, dict outputs, math.prod of a shape; torchvision-style
# jit.is_scripting()/isinstance checks, interpolate, type_as; star-unpacking and **kwargs ----
class _HFStyle(nn.Module):
    def __init__(self, d=16, n=3, p=0.1):
        super().__init__()
        self.emb = nn.Embedding(20, d); self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)]); self.p = p
        self.norm = nn.LayerNorm(d)
    def forward(self, input_ids, attention_mask=None, output_hidden_states=False, **kwargs):
        assert input_ids.dim() == 2, "expected (batch, seq)"
        if input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(0)
        h = self.emb(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        ext = (1.0 - attention_mask[:, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        hidden = () if output_hidden_states else None
        for i, layer in enumerate(self.layers[:-1]):
            h = F.dropout(F.gelu(layer(h)), p=self.p, training=self.training)
            if output_hidden_states:
                hidden = hidden + (h,)
        h = self.layers[-1](h) + ext.transpose(1, 2)
        scores = torch.where(attention_mask[..., None].bool(), h, torch.zeros_like(h))
        return {"last": self.norm(scores), "hidden": hidden, "n": math.prod(scores.shape[1:])}

class _Vision(nn.Module):
    def __init__(self):
        super().__init__(); self.c = nn.Conv2d(3, 4, 3, padding=1)
    def forward(self, x):
        if not torch.jit.is_scripting() and isinstance(x, (list, tuple)):
            x = torch.stack(list(x))
        y = self.c(x.float())
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        return y.type_as(x).flatten(2).mean(-1)

class _Unpack(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(4, 4)
    def forward(self, x, *rest, **kw):
        first, *others = x.unbind(0)
        out = self.l(first)
        for o in others: out = out + o
        return out.to(device=x.device, dtype=torch.float64), len(rest) + len(kw.get("tag", ""))



class _HFOnFloats(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = _HFStyle().eval()

    def forward(self, x):
        ids = (x.abs() * 7).long() % 20
        mask = (x > -1.5).long()
        return self.m(ids, mask, output_hidden_states=True)


module_case(lambda: _HFOnFloats().eval(), (2, 5))
module_case(lambda: _Vision(), (2, 3, 6, 6), inductor=True)
module_case(lambda: _Unpack(), (3, 4))


# ---- more idioms: star-unpacked shapes, buffers, full_like/new_zeros/new_tensor, boolean-mask
# indexing (a data-dependent break, as in TorchDynamo); dict comprehensions over ModuleDict.items();
# optional arguments, split with sizes, softmax(dtype=); an embedding + GRUCell loop; no_grad stats ----
class _Idioms(nn.Module):  # common small idioms
    def __init__(self):
        super().__init__(); self.l = nn.Linear(6, 6); self.register_buffer("scale", torch.tensor(2.0))
        self.act = nn.ReLU()
    def forward(self, x):
        b, *rest = x.shape
        x = x.reshape(b, -1)
        x = self.act(self.l(x)) * self.scale
        x = x.clamp(-1, 1).masked_fill(x > 0.9, 0.0)
        y = torch.full_like(x, 0.5) + x.new_zeros(x.shape) + x.new_tensor([1.0] * 6)
        idx = torch.arange(x.size(1))
        z = y[:, idx % 2 == 0]
        return torch.cat([z, z.flip(-1)], dim=-1).view(b, *rest)

class _Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.GELU()) for _ in range(2)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})
    def forward(self, x, task="cls"):
        h = self.blocks(x)
        outs = {k: head(h) for k, head in self.heads.items()}
        return outs[task], len(sorted(outs.keys())), max(o.shape[-1] for o in outs.values())

class _OptionalArg(nn.Module):
    def forward(self, x, y=None):
        if y is None:
            y = x
        out = x @ y.transpose(-1, -2) / math.sqrt(x.size(-1))
        out = out.softmax(dim=-1, dtype=torch.float32)
        a, b = torch.split(out, [1, out.size(-1) - 1], dim=-1)
        return torch.stack((a.squeeze(-1), b.sum(-1)), dim=0).mean(dim=(1,)), x.ndim, x.numel()

class _GRUTokens(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(10, 4, padding_idx=0); self.gru = nn.GRUCell(4, 4)
    def forward(self, tokens):
        h = torch.zeros(tokens.size(0), 4, dtype=torch.float32)
        for t in range(tokens.size(1)):
            e = self.emb(tokens[:, t])
            h = self.gru(e, h)
        return F.normalize(h, dim=-1), torch.norm(h, p=2, dim=1, keepdim=True)

class _NoGradStats(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.randn(3, 3))
    def forward(self, x):
        with torch.no_grad():
            stats = x.detach().abs().max()
        out = F.linear(x, self.w)
        out = out + torch.tanh(stats)
        return out.chunk(3, dim=-1)[0].contiguous(), out.argmax(-1)


class _GRUOnFloats(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = _GRUTokens()

    def forward(self, x):
        return self.m((x.abs() * 5).long() % 10)


module_case(lambda: _Idioms(), (2, 2, 3))
module_case(lambda: _Heads(), (2, 4))
module_case(lambda: _OptionalArg(), (2, 3, 4))
module_case(lambda: _GRUOnFloats(), (2, 5))
module_case(lambda: _NoGradStats(), (4, 3))


# ---- more dtypes, requires_grad, broadcasting with scalars (exercise type promotion) ----
def int_case(*shapes, high=10):
    def deco(fn):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            return [torch.randint(-high, high, s, generator=g) for s in shapes]
        CASES.append((fn.__name__, fn, make, False))
        return fn
    return deco


def grad_case(*shapes):
    def deco(fn):
        def make(seed):
            g = torch.Generator().manual_seed(seed)
            return [torch.randn(*s, generator=g).requires_grad_() for s in shapes]
        CASES.append((fn.__name__, fn, make, False))
        return fn
    return deco


@int_case((4,))
def int_promotion(x): return x + 1, x * 1.5, x / 2, x // 3, torch.sin(x), x > 0, x.abs()
@int_case((3, 3), (3,))
def int_broadcast(a, b): return a * b - b, torch.maximum(a, b)
@int_case((5,))
def int_to_float_ops(x): return torch.sqrt(x.abs().float()) + x.double().exp()
@int_case((4,))
def bool_masks(x): return (x > 0) & (x < 5), (x == 3) | (x == -3), ~(x > 0)
@int_case((6,))
def int_sum_mean(x): return x.sum(), x.float().mean(), x.max()
@grad_case((3, 4))
def grad_elementwise(x): return torch.sin(x) * 2 + x.relu()
@grad_case((3, 4), (4, 2))
def grad_matmul(x, w): return torch.tanh(x @ w).sum(0)
@grad_case((5,))
def grad_detach_mix(x): return x * 2 + x.detach()
@grad_case((2, 3))
def grad_compare(x): return (x > 0).float() * x
@case((3, 4), dtype=torch.float64)
def float64_mix(x): return x * torch.ones(3, 4) + 1
@case((3, 4), dtype=torch.float16)
def half_ops(x): return (x * 2).float().sum(1)
@case((2, 5), dtype=torch.bfloat16)
def bfloat16_ops(x): return (x + 1).to(torch.float32)
@case((4,), (1,))
def broadcast_scalar_tensor(x, s): return x * s + s / 2
@case((3, 1), (1, 4))
def outer_broadcast(a, b): return a + b, a * b - 1
@case((2, 3))
def rsub_rdiv(x): return 1 - x, 2 / (x.abs() + 1), 3 ** x.clamp(-1, 1)
@case((4,))
def where_scalars(x): return torch.where(x > 0, x, 0.0)
@case((3, 3))
def noncontiguous_input_ops(x):
    t = x.t()
    return torch.sin(t) + t * 2, (t + 1).is_contiguous()
@case((2, 4))
def stride_query(x): return x * x.stride(0) + x.t().contiguous().stride(1)
@case((4, 4))
def triu_tril_diag(x): return torch.triu(x) + torch.tril(x, -1) + torch.diag(torch.diagonal(x)).sum()
@case((6,))
def sort_topk(x):
    v, i = torch.sort(x)
    t, j = torch.topk(x, 2)
    return v + i.float(), t.sum() + j.float().sum()
@case((3, 4))
def any_all_counts(x): return (x > 0).any(), (x > -10).all(), (x > 0).sum()
@case((5,))
def cumulative_and_diff(x): return torch.cummax(x, 0)[0] + torch.diff(x, prepend=x[:1])
@case((2, 3, 4))
def einsum_batch(x): return torch.einsum("bij,bkj->bik", x, x)
@case((4, 4))
def linalg_ops(x): return torch.linalg.norm(x), (x @ x.T + torch.eye(4)).diagonal().sum()
@case((3,))
def tensor_constructor_from_list(x): return x + torch.tensor([1.0, 2.0, 3.0])
@case((2, 3))
def method_chain(x): return x.abs().sqrt().log1p().neg().exp().clamp_min(0.1).mean(dim=1)
@case((4, 3))
def unbind_stack(x): return torch.stack([r * i for i, r in enumerate(x.unbind(0))])
@case((3, 4))
def tensor_iteration(x): return sum(row.sum() for row in x)
@case((2, 2))
def nested_helpers_with_kwargs(x):
    def norm(t, *, eps=1e-5, dim=-1):
        return t / (t.norm(dim=dim, keepdim=True) + eps)
    return norm(x) + norm(x, eps=1e-3, dim=0)
@case((3,))
def conditional_expression(x): return x * (2 if x.shape[0] == 3 else 3)
@case((4,))
def string_ops_const(x):
    key = "relu".upper().lower()
    return F.relu(x) if key in ("relu", "gelu") else x
@case((3,))
def tuple_concat_shape(x): return x.view(*(x.shape + (1,))).sum(-1)
@case((2, 3))
def dict_kwargs_call(x):
    kw = {"dim": 1, "keepdim": True}
    return x.sum(**kw) + torch.mean(x, **kw)
@case((5,))
def global_function_call(x): return _h1(x) + torch.nn.functional.softplus(x)


# ---- functional idioms: functools.partial/reduce with operator.add, map/filter/any/all over
# Python values, zip(*pairs) and dict(zip(...)), nonlocal counters, a @torch.no_grad() helper,
# reversed(range()), math helpers, torch.return_types fields (topk(...).values) ----
import functools  # noqa: E402
import operator  # noqa: E402

_SCALES = (1.0, 0.5)

@torch.no_grad()
def _stats(t):
    return t.mean(), t.std()

@case((4,))
def functional_partial(x):
    act = functools.partial(F.leaky_relu, negative_slope=0.2)
    return act(x) + functools.reduce(operator.add, [x, x * 2, x * 3])

@case((4, 3))
def functional_map(x):
    parts = list(map(lambda t: t * 2, x.unbind(0)))
    keep = [p for i, p in enumerate(parts, start=1) if i % 2]
    return torch.stack(keep), any(s > 0.7 for s in _SCALES), all(isinstance(p, torch.Tensor) for p in parts)

@case((4, 2))
def functional_zip(x):
    pairs = [(x[i], x[-i - 1]) for i in range(x.size(0) // 2)]
    a, b = zip(*pairs)
    d = dict(zip(["a", "b"], [sum(a), sum(b)]))
    return d["a"] - d["b"], len("-".join(["x", str(x.dim())]))

@case((3,))
def functional_nonlocal(x):
    count = 0
    def bump(t):
        nonlocal count
        count += 1
        return t + count
    y = bump(bump(x))
    return y * count

@case((5,))
def functional_stats(x):
    m, s = _stats(x)
    return (x - m) / (s + 1e-5)

@case((2, 2))
def functional_reversed(x):
    out = x
    for i in reversed(range(3)):
        out = out * (i + 1) + x.T.T
    return out, math.isclose(1.0, 1.0 + 1e-12), round(2.567, 1), divmod(7, 2)

@case((2, 3))
def functional_chain(x):
    return x.unsqueeze(0).expand(3, -1, -1).permute(1, 0, 2).reshape(-1).topk(3).values

