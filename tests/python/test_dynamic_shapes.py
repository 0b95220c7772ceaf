"""Dynamic shapes: dynview.compile(dynamic=None/True/False) recompiles exactly when torch.compile does
(automatic dynamic shapes: a size or int that changes becomes symbolic at the recompile, sizes 0 and
1 stay specialised, a rank change makes every size symbolic), outputs equal eager, and the shape
guards (2 <= L['x'].size()[0], relations the graph relied on) are checked in C++ on the hit path."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import dynview

R = torch.randn


pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)


def scale_sum(x, k):
    return torch.sin(x) * k + x.sum(dim=-1, keepdim=True)


def flatten_rows(x, k):
    return x.view(x.size(0), -1) * k


def branch_on_size(x, k):
    if x.size(0) > 4:
        return x.reshape(x.shape[0], -1) * 2
    return x + k


def uses_len_and_zeros(x, k):
    pad = torch.zeros(len(x), 2, dtype=x.dtype)
    return torch.cat([x, pad], dim=1) + k


def pair(x, k):
    y = x[:, :2]
    return (y * 2).sum(0), x.shape[0] * k


def int_in_range(x, k):
    for i in range(k):
        x = x + i
    return x


def slice_by_int(x, k):
    return x[:k] * 2


def broadcast(x, k):
    return x + x.mean(dim=0) * k


def matmul_chain(x, k):
    w = torch.ones(x.shape[-1], 3)
    return F.relu(x @ w).softmax(-1) * k


def returns_size(x, k):
    return x.size(0) + k, x.new_ones(x.size(0))


def reshape_fours(x, k):
    return x.reshape(-1, 4) * k


def floordiv_slice(x, k):
    return x[: k // 3 + 1] + (k % 5)


def builtins_over_sizes(x, k):
    # isinstance/type read only the type; int, float, abs, max, min and torch.tensor are graph nodes
    # (sym_int, sym_float, abs, sym_max, sym_min, torch._refs.tensor): none of them specialises the
    # size, as under TorchDynamo
    n = x.shape[0]
    m = max(n, 2) + min(n, 100, k + 50) + abs(n) + int(n)
    q = n.to(x.device) if isinstance(n, torch.Tensor) else n
    return x.new_zeros(m) + float(n) * k + torch.tensor(n), q, type(n) is int


def range_of_a_size(x, k):
    # range() specialises the size in both engines (a recompile per size); the range is a value
    r = range(x.shape[0])
    return x * len(r) + r[-1] * k


def alibi_scores(x, k):
    # bloom's attention: an ALiBi bias built for the key length is baddbmm's input; its meta kernel
    # expands the bias to sizes of symbols, which only its Python registration can (TorchDynamo runs
    # every op with the Python dispatcher on)
    b, n = x.shape
    slopes = torch.pow(torch.full((), 0.5), torch.arange(1, 3, dtype=torch.int32))
    alibi = (slopes[:, None, None] * torch.arange(n)).repeat(b, 1, 1).to(x.dtype)
    q = x.repeat_interleave(2, dim=0).unsqueeze(-1)
    return alibi.baddbmm(q, q.transpose(1, 2), beta=1.0, alpha=k)


def any_all_of_sizes(x, k):
    # torch's associative_scan checks its inputs so (mamba): any()/all() over comparisons of sizes are
    # guards, not a break
    if any(t.shape[0] == 0 for t in (x, x[1:])):
        return x
    if all([x.shape[0] > 1, x.ndim == 2]):
        return x * k
    return -x


def numel_of_a_shape(x, k):
    # torch.Size.numel() of a symbolic shape: a symbolic int (associative_scan: `result.shape.numel() > 0`)
    n = x.shape.numel()
    return x.reshape(n) * k if n > 0 else x


def min_of_a_resolution(x, k):
    # swin: min() and max() of a tuple of sizes are symbolic (torch.sym_min / sym_max), not a break
    resolution = (x.shape[0], x.shape[1])
    if min(resolution) <= 2:
        return x * k
    return x[: max(resolution) - 2] * k + min([x.shape[1], 7])


def capped_and_padded(x, k):
    # a window capped by a constant, a padding to the longest of sizes and an int: min/max over
    # symbolic numbers (of a list, an iterator, unpacked) are torch.sym_min / sym_max in the graph
    n = min(x.shape[0], 6)
    m = max([x.shape[0] + 1, x.shape[1], k])
    return F.pad(x[:n], (0, m - x.shape[1])) * min(*[x.shape[1], 3]) + max(iter((x.shape[0], 2)))


def sizes_rebuilt(x, k):
    # torch.Size built of symbolic sizes: a target shape for a view, one compared with a tensor's
    s = torch.Size([x.shape[0] * 2, x.shape[1]])
    target = torch.Size([x.shape[0], -1])
    return x.reshape(target) * k, isinstance(s, torch.Size), s == x.repeat(2, 1).shape, x.new_zeros(s) + k


def numpy_size_of_an_array(x, k):
    # NumPy code over a tensor's array (torch._numpy in the graph): ndarray.size of a symbolic shape
    a = x.numpy()
    return torch.from_numpy(a * a.size + a.shape[0]) + k


def rounded_up_and_interpolated(x, k):
    # mobilevit: a size rounded up to a multiple of the patch with math.ceil (a symbolic int), the
    # input interpolated to it when it changed (upsample's decomposition makes torch.arange of it)
    h = int(math.ceil(x.shape[0] / 2) * 2)
    w = int(math.ceil(x.shape[1] / 2) * 2)
    y = x[None, None]
    if h != x.shape[0] or w != x.shape[1]:
        y = F.interpolate(y, size=(h, w), mode="bilinear", align_corners=False)
    return y.reshape(h // 2, 2, w // 2, 2).sum((1, 3)) * k


def interpolated_to_a_size(x, k):
    # dinov2's interpolate_pos_encoding: interpolated to sizes computed from the input's
    y = F.interpolate(x[None, None], size=(x.shape[0] + 1, x.shape[1] * 2), mode="bicubic", align_corners=False)
    return y * k


def square_patch_grid(x, k):
    # DiT's unpatchify: height = width = int(num_patches ** 0.5), a symbolic int whose guards the C++
    # evaluator computes as CPython does
    h = w = int(x.shape[0] ** 0.5)
    return x[: h * w].reshape(h, w, -1).sum(1) * k


def rounded_rows(x, k):
    # vision models' `round(height * scale)`: round() of a symbolic float is a symbolic int (RoundToInt),
    # halves rounded to even as Python rounds them (2.5 -> 2, 3.5 -> 4)
    h = round(x.shape[0] / 2)
    if h > 2:
        return x[:h] * k
    return x[:h] - k


def whole_chunks(x, k):
    # math.trunc of a division of sizes (TruncToInt): the rows in whole chunks of three
    n = math.trunc(x.shape[0] / 3)
    if n > 0:
        return x[: n * 3].reshape(n, 3, -1).sum(1) * k
    return x * k


def offsets_from_a_center(x, k):
    # round() and math.trunc of negative quotients (sizes below the center), halves among them
    # (-0.5 rounds to 0, -1.5 to -2): the guards compute them exactly, as Python does
    a = round((x.shape[0] - 10) / 4)
    b = math.trunc((x.shape[0] - 10) / 4)
    if a + b > -1:
        return x * (a - b) + k
    return x - (a + b) * k


def checked_shapes(x, k):
    # fsmt's and prophetnet's attention: `assert list(attn_weights.size()) == [bsz * heads, tgt_len,
    # src_len]` and a shape compared with a constant tuple. Symbolic sizes compare item by item, each
    # a guard, as tuple and list equality takes bool() of each item; a tuple never equals a list.
    bsz, n = x.shape
    assert list(x.size()) == [bsz, n], "shape"
    if x.shape == (4, 4) or tuple(x.shape[:1]) == (6,):
        return x * k
    if x.shape == [bsz, n]:
        return x
    return x + k


def shapes_across_a_break(x, k):
    # jetmoe's attention around a break: input_shape and hidden_shape reach the resume function as
    # a torch.Size and a tuple argument; their changed items become symbolic there (not the whole
    # shape guarded by value, a recompile per length)
    input_shape = x.shape[:-1]
    hidden_shape = (*input_shape, -1, 2)
    y = x * k
    torch._dynamo.graph_break()
    return y.view(hidden_shape).sum(-1).view(input_shape + (-1,))


class _Schedule(torch.nn.Module):
    # a diffusers-style noise schedule: per-timestep tables in buffers, read at an int timestep
    def __init__(self, steps=40):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, steps)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0))
        self.register_buffer("sigmas", ((1 - self.alphas_cumprod) / self.alphas_cumprod).sqrt())


SCHEDULE = _Schedule()


def row_at(x, k):
    # x[k] with k an int argument: a select of a symbolic index once k changed (Tensor.__getitem__
    # would take k's __index__ and compile once per value)
    return x[k] * 2 + x[-k - 1]


def scheduler_step(x, k):
    # DDIM's step: the schedule read at t and at the previous step, which does not exist at t = 0
    t = k * 3
    alpha_prod_t = SCHEDULE.alphas_cumprod[t]
    alpha_prod_prev = SCHEDULE.alphas_cumprod[t - 3] if t > 0 else SCHEDULE.alphas_cumprod[0]
    pred = (x - (1 - alpha_prod_t).sqrt() * x.tanh()) / alpha_prod_t.sqrt()
    return alpha_prod_prev.sqrt() * pred + SCHEDULE.sigmas[t] * x


def rows_around(x, k):
    # a row and its neighbours by index arithmetic, and the row's first item
    rows = [x[k], x[k + 1] if k + 1 < x.shape[0] else x[k]]
    return torch.stack(rows) * x[k][0]


def reshaped_to(x, shape):
    return x.reshape(shape) * 2


@pytest.mark.parametrize("make", [tuple, torch.Size], ids=["tuple", "torch.Size"])
def test_a_shape_argument_becomes_symbolic_item_by_item(make):
    calls = [(R(2, n * 4), make((2, n, 4))) for n in (2, 3, 4, 5, 2)]
    assert dynview_counts(reshaped_to, calls) == dynamo_counts(reshaped_to, calls)


SYMBOLIC_IDIOMS = [alibi_scores, square_patch_grid, rounded_rows, whole_chunks, checked_shapes, any_all_of_sizes, numel_of_a_shape, min_of_a_resolution, rounded_up_and_interpolated,
                   interpolated_to_a_size, capped_and_padded, sizes_rebuilt,
                   numpy_size_of_an_array]

FUNCTIONS = [scale_sum, flatten_rows, branch_on_size, uses_len_and_zeros, pair, int_in_range, slice_by_int,
             broadcast, matmul_chain, returns_size, reshape_fours, floordiv_slice, builtins_over_sizes, range_of_a_size,
             shapes_across_a_break, row_at, scheduler_step, rows_around, *SYMBOLIC_IDIOMS]

SEQUENCES = {
    "batch": [(R(3, 4), 2), (R(5, 4), 2), (R(7, 4), 2), (R(1, 4), 2), (R(6, 4), 2), (R(7, 6), 2), (R(9, 6), 2)],
    "ints": [(R(3, 4), 2), (R(3, 4), 3), (R(3, 4), 1), (R(3, 4), 0), (R(3, 4), 3)],
    "both": [(R(3, 4), 2), (R(5, 4), 3), (R(8, 4), 4), (R(8, 5), 1)],
    # timesteps of a sampling loop over one latent, down to 0 (last: a frame whose trace at 0 has no
    # tensor operation runs eagerly from then on under torch.compile, where dynview keeps compiling)
    "steps": [(R(8, 4), 7), (R(8, 4), 6), (R(8, 4), 5), (R(8, 4), 1), (R(8, 4), 3), (R(8, 4), 0)],
    "rank": [(R(3, 4), 2), (R(3, 4, 5), 2), (R(3, 4, 6), 2), (R(4, 5, 6), 2)],
    # sizes whose product with 6 is (or is not) divisible by 4, and ints crossing multiples of 3
    "divisible": [(R(2, 6), 7), (R(4, 6), 11), (R(6, 6), 13), (R(10, 6), 30), (R(8, 6), 2), (R(12, 6), 5)],
}


def dynamo_counts(fn, calls, **kw):
    torch._dynamo.reset()
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward
    c = torch.compile(fn, backend=backend, **kw)
    out = []
    for x, k in calls:
        c(x, k)
        out.append(n[0])
    torch._dynamo.reset()
    return out


def dynview_counts(fn, calls, backend="eager", **kw):
    c = dynview.compile(fn, backend=backend, **kw)
    counts, total = [], 0
    for x, k in calls:
        try:
            want = fn(x, k)
        except Exception as e:  # noqa: BLE001 - the compiled call must raise the same
            with pytest.raises(type(e)):
                c(x, k)
        else:
            torch.testing.assert_close(c(x, k), want)
        total += len([r for r in dynview._C.take_records() if r["graph"] is not None])
        counts.append(total)
    return counts


def applicable(fn, calls):
    try:
        for x, k in calls:
            fn(x, k)
    except Exception:  # noqa: BLE001
        return False
    return True


CASES = [(f, s) for f, s in itertools.product(FUNCTIONS, SEQUENCES) if applicable(f, SEQUENCES[s])]


@pytest.mark.parametrize("fn,seq", CASES, ids=[f"{f.__name__}-{s}" for f, s in CASES])
def test_recompiles_when_torch_compile_does(fn, seq):
    calls = SEQUENCES[seq]
    assert dynview_counts(fn, calls) == dynamo_counts(fn, calls)


@pytest.mark.parametrize("fn", SYMBOLIC_IDIOMS, ids=lambda f: f.__name__)
def test_model_idioms_over_symbolic_sizes_do_not_break(fn):
    calls = SEQUENCES["both"]
    assert dynview_counts(fn, calls) == dynamo_counts(fn, calls)
    dynview.reset()
    c = dynview.compile(fn, backend="eager", dynamic=True)
    counts = []
    for x, k in calls:
        torch.testing.assert_close(c(x, k), fn(x, k))
        records = dynview._C.take_records()
        assert [r["break_message"] for r in records if r["break_id"]] == []
        counts.append(len(records) + (counts[-1] if counts else 0))
    assert counts == dynamo_counts(fn, calls, dynamic=True)


def test_round_and_trunc_of_negative_quotients_equal_eager():
    # torch.compile 2.13 gets sizes 8 and 9 wrong here: its guards let them reuse the graph of the
    # other branch (x - (a + b) * k, where eager takes x * (a - b) + k: round(-0.5) + trunc(-0.5) is 0).
    # So the reference is Python: after the first (static) call, one dynamic graph per branch taken.
    calls = [(R(n, 2), 2) for n in range(2, 19)]
    branches = [round((n - 10) / 4) + math.trunc((n - 10) / 4) > -1 for n in range(2, 19)]
    want = [1] + [1 + len(set(branches[1:i + 1])) for i in range(1, len(branches))]
    assert want[-1] == 3  # both branches taken after the first call
    assert dynview_counts(offsets_from_a_center, calls) == want


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("fn", [scale_sum, flatten_rows, branch_on_size, matmul_chain], ids=lambda f: f.__name__)
def test_dynamic_true_and_false(fn, dynamic):
    calls = SEQUENCES["both"]
    assert dynview_counts(fn, calls, dynamic=dynamic) == dynamo_counts(fn, calls, dynamic=dynamic)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [scale_sum, flatten_rows, branch_on_size, uses_len_and_zeros, matmul_chain],
                         ids=lambda f: f.__name__)
def test_backends_compile_symbolic_graphs(fn, backend):
    calls = SEQUENCES["batch"][:3] + SEQUENCES["batch"][5:]
    counts = dynview_counts(fn, calls, backend=backend)
    # the third distinct batch size and the second distinct width reuse the symbolic graph
    assert counts[2] == counts[1] and counts[-1] == counts[-2], counts


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [row_at, scheduler_step], ids=lambda f: f.__name__)
def test_backends_compile_a_select_of_a_symbolic_index(fn, backend):
    # one graph for every timestep after the second, through AOT autograd and inductor (outputs
    # checked against eager by dynview_counts)
    calls = SEQUENCES["steps"][:4]
    assert dynview_counts(fn, calls, backend=backend) == dynamo_counts(fn, calls) == [1, 2, 2, 2]


TABLE = torch.linspace(0.9, 0.1, 10)


def table_at(x, t):
    return x * TABLE[t]


def test_a_table_read_at_a_0d_tensor_index_runs_eagerly_where_aot_cannot_compile_it():
    # TABLE[t] with t a 0-d int tensor: AOTAutograd reads t as an index, a guard on a data-dependent
    # symbol in a dynamic compile. It was raised to the caller (GuardOnDataDependentSymNode); it is a
    # backend fallback, with a warning, as the static compile's DataDependentOutputException is.
    c = dynview.compile(table_at, backend="aot_eager", dynamic=True)
    x = R(3)
    with pytest.warns(UserWarning, match="runs eagerly: backend aot_eager failed with GuardOnDataDependentSymNode"):
        torch.testing.assert_close(c(x, torch.tensor(2)), table_at(x, torch.tensor(2)))
    for t in (5, 7):  # the frame runs as it is from then on
        torch.testing.assert_close(c(x, torch.tensor(t)), table_at(x, torch.tensor(t)))


def test_symbolic_graph_has_size_nodes_and_no_baked_sizes():
    c = dynview.compile(flatten_rows, backend="eager")
    c(R(3, 4, 2), 2)
    c(R(5, 4, 2), 2)
    recs = [r for r in dynview._C.take_records() if r["graph"] is not None]
    code = recs[-1]["graph"].code
    assert "size(0)" in code and "view(size, -1)" in code.replace(" ", "").replace("view(size,-1)", "view(size, -1)"), code
    assert "5" not in code, code
    guards = dynview._C.cache_entries(flatten_rows.__code__)[0]["guards"]
    assert "2 <= L['x'].size()[0]" in guards
    assert any("size=[None, 4, 2]" in g for g in guards)


def test_mod_and_floordiv_guards_fail_when_eager_would_raise():
    """Guards with Mod/FloorDiv run in C++: a size that breaks divisibility must miss the symbolic
    entry, recompile, and raise the same error as eager."""
    calls = SEQUENCES["divisible"] + [(R(3, 6), 2)]
    counts = dynview_counts(reshape_fours, calls)
    assert counts[2] == counts[1], counts
    guards = [g for e in dynview._C.cache_entries(reshape_fours.__code__) for g in e["guards"]]
    assert any("Mod(" in g for g in guards), guards
    # The bad size compiled an entry split before the reshape (its trace could not go on); a later
    # divisible size still finds a symbolic entry of the frame: no new compile of the frame itself.
    entries = len(dynview._C.cache_entries(reshape_fours.__code__))
    c = dynview.compile(reshape_fours, backend="eager")
    x = R(14, 6)
    torch.testing.assert_close(c(x, 2), reshape_fours(x, 2))
    assert len(dynview._C.cache_entries(reshape_fours.__code__)) == entries


def test_shape_guard_failure_names_the_guard():
    c = dynview.compile(branch_on_size, backend="eager")
    c(R(3, 4), 1)
    c(R(6, 4), 1)   # symbolic dim 0, branch taken on s0 > 4
    c(R(2, 4), 1)   # fails the s0 > 4 guard: recompiles
    recs = dynview._C.take_records()
    assert "L['x'].size()[0] > 4" in recs[-1]["reason"] or "5 <= L['x'].size()[0]" in recs[-1]["reason"], recs[-1]["reason"]


def test_mlp_module_batch_sizes_share_one_graph():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    c = dynview.compile(mlp, backend="aot_eager")
    for b in (2, 3, 5, 8, 13, 21):
        x = R(b, 8)
        torch.testing.assert_close(c(x), mlp(x))
    recs = [r for r in dynview._C.take_records() if r["graph"] is not None]
    assert len(recs) == 2  # static first, then symbolic batch
    entries = dynview._C.cache_entries(type(mlp).forward.__code__)
    assert sum(e["hits"] for e in entries) == 4
    # parameters stay static
    assert any("size=[16, 8]" in g for g in entries[0]["guards"])


def test_dynamic_entries_hit_with_no_python_and_repeat_counts():
    c = dynview.compile(scale_sum, backend="eager")
    for b in (3, 5, 6, 7, 8, 9):
        c(R(b, 4), 2)
    entries = dynview._C.cache_entries(scale_sum.__code__)
    assert [e["hits"] for e in entries] == [4, 0]


def test_shape_guards_are_attributed_to_the_step_that_made_them(tmp_path):
    path = tmp_path / "dyn.dyn"
    c = dynview.compile(branch_on_size, backend="eager")
    with dynview.record(str(path)):
        c(R(3, 4), 1)
        c(R(6, 4), 1)
    t = dynview.load_trace(str(path))
    comp = t.compiles[-1]
    shape = {g["text"]: g for g in comp.guards if g["kind"] == "SHAPE_ENV"}
    first = branch_on_size.__code__.co_firstlineno
    # The branch `if x.size(0) > 4` guards s0 > 4 at the step that evaluated the comparison (line 2).
    g = shape["L['x'].size()[0] > 4"]
    assert g["line"] == first + 1
    assert comp.first_step <= g["step"] < comp.first_step + comp.steps
    assert t.steps[g["step"]].line == g["line"] and t.steps[g["step"]].compile == comp.index
    # The 0/1 lower bound belongs to the step that first read x (its TENSOR_MATCH guard's step).
    lower = next(g for txt, g in shape.items() if txt.endswith("<= L['x'].size()[0]"))
    tm = next(g for g in comp.guards if g["kind"] == "TENSOR_MATCH")
    assert lower["step"] == tm["step"] and lower["line"] == tm["line"]


# ---- real models: a GPT-style decoder (ModuleList of ModuleDicts, causal mask built from T) and a
# conv net, over changing sequence lengths, batch sizes and image sizes -----------------------------

import torch.nn as nn  # noqa: E402


from engine_cases import _GPT as GPT  # noqa: E402  (the corpus' GPT-style decoder)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1); self.bn = nn.BatchNorm2d(8); self.c2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8, 10)
    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def _model_counts(m, inputs, backend):
    torch._dynamo.reset()
    n = [0]

    def be(gm, ex):
        n[0] += 1
        return gm.forward
    c = torch.compile(m, backend=be)
    want = []
    for x in inputs:
        c(x)
        want.append(n[0])
    torch._dynamo.reset()
    dynview.reset()
    dynview._C.take_records()
    d = dynview.compile(m, backend=backend)
    got, total = [], 0
    for x in inputs:
        torch.testing.assert_close(d(x), m(x))
        total += len([r for r in dynview._C.take_records() if r["graph"] is not None])
        got.append(total)
    return got, want


MODELS = {
    "gpt-seq": (GPT, [(2, t) for t in (5, 7, 9, 12, 3)]),
    "gpt-batch": (GPT, [(b, 8) for b in (1, 2, 3, 4)]),
    "conv-hw": (Conv, [(2, 3, s, s) for s in (16, 20, 24, 32)]),
    "conv-batch": (Conv, [(b, 3, 16, 16) for b in (2, 3, 5)]),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", list(MODELS))
def test_real_models_recompile_like_torch_compile(case, backend):
    torch.manual_seed(0)
    cls, shapes = MODELS[case]
    m = cls().eval()
    inputs = [torch.randint(0, 50, s) if cls is GPT else torch.randn(*s) for s in shapes]
    with torch.no_grad():
        got, want = _model_counts(m, inputs, backend)
    assert got == want
    assert got[-1] == 2  # one static graph, then one symbolic graph for everything after


def shape_out(x):
    s = x.shape
    return x * 2, s, s[1:], isinstance(s, torch.Size), "%s" % (s,)


def test_symbolic_shape_leaving_the_graph_is_a_torch_size():
    # once a dim is dynamic, x.shape (and its slices) reach the caller as torch.Size, not tuple
    cf = dynview.compile(shape_out, backend="eager", dynamic=True)
    for n in (3, 5, 7):
        x = R(n, 2)
        got, want = cf(x), shape_out(x)
        assert type(got[1]) is torch.Size and type(got[2]) is torch.Size
        assert got[1:] == want[1:]
        torch.testing.assert_close(got[0], want[0])


def match_on_a_size(x):
    n = x.shape[0]
    match n:  # MATCH_CLASS on the symbolic size: eager holds an int
        case int() if n > 3:
            k = 1
        case _:
            k = 2
    return x * k, isinstance(n, int), type(n).__name__, isinstance(n, float)


def test_a_symbolic_size_is_an_int_to_type_isinstance_and_match():
    c = dynview.compile(match_on_a_size, dynamic=True)
    records = []
    for n in (3, 4, 5, 6):
        x = R(n)
        got, want = c(x), match_on_a_size(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] == (True, "int", False)
        records += dynview._C.take_records()
    assert [r["break_id"] for r in records if r["break_id"]] == []
    ours = dynview.explain(match_on_a_size)(R(4))
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(match_on_a_size)(R(4))
    torch._dynamo.reset()
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)


class _KVLayer:
    """A KV cache layer as transformers' DynamicLayer / sliding-window layer holds it: tensors and a
    running length as attributes of an object the compiled function is given."""
    def __init__(self):
        self.keys = torch.zeros(0, 4)
        self.length = 0


def _decode_step(q, layer):
    layer.keys = torch.cat([layer.keys, q], dim=0)
    layer.length += q.shape[0]
    scores = (q @ layer.keys.T).softmax(-1)
    return scores @ layer.keys, layer.length


def _decode_counts(compile_fn):
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward
    torch.manual_seed(0)
    layer, twin = _KVLayer(), _KVLayer()
    step = compile_fn(_decode_step, backend=backend)
    counts = []
    for size in (5, 1, 1, 1, 1, 1):
        q = R(size, 4)
        got, want = step(q, layer), _decode_step(q, twin)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(layer.keys, twin.keys)
        assert layer.length == twin.length
        counts.append(n[0])
    return counts


def test_tensors_and_ints_below_the_arguments_become_dynamic_as_under_torch_compile():
    # A decode loop: the cache's keys grow by one row and its length by one per call. TorchDynamo's
    # automatic dynamic shapes compare every tensor and int source (not only the arguments): after
    # the first change a cache attribute is symbolic, so the loop compiles a fixed number of times
    # instead of once per step (and, past recompile_limit, runs eagerly).
    torch._dynamo.reset()
    want = _decode_counts(torch.compile)
    torch._dynamo.reset()
    got = _decode_counts(dynview.compile)
    assert got == want
    assert got[-1] == got[-3]  # the later steps hit one symbolic entry


# ---- a 0-d int tensor passed in and given to an operator as a size (longformer's
# max_num_global_attn_indices, computed before its nonzero break and passed to the next frame):
# TorchDynamo's fake of such an input answers item() with a backed symbol, so the operator makes a
# symbolic size and the graph takes the tensor; dynview does the same (it broke there before) ----
def zeros_of_n_rows(x, n):  # LongformerSelfAttention._concat_with_global_key_attn_probs, trimmed
    only_global = x.new_zeros(x.shape[0], n, x.shape[2])
    only_global[:, :2] = x[:, :2]
    return only_global * 2


def narrow_to_n(x, n):  # ._compute_attn_output_with_global_indices: attn_probs.narrow(-1, 0, n)
    return x.narrow(1, 0, n).transpose(1, 2).clone()


def sizes_of_n(x, n):
    mask = torch.arange(n) < 2
    pad = F.pad(x, (0, n))
    return mask, pad, x.repeat(n, 1, 1), torch.full((n, 2), 0.5), x[None].expand(n, -1, -1, -1) + 1


def branch_on_n_rows(x, n):
    z = x.new_zeros(n, x.shape[-1])
    if z.shape[0] > 3:  # a guard on L['n'].item()
        return z + x.sum()
    return z - 1


def n_plus_one_rows(x, n):  # a tensor computed in the graph: no fake value to read, a break as TorchDynamo's
    return x.new_zeros(n + 1, 2) + 1


ITEM_SIZES = [zeros_of_n_rows, narrow_to_n, sizes_of_n, branch_on_n_rows, n_plus_one_rows]
ITEM_CALLS = [(R(2, 8, 4), torch.tensor(3)), (R(2, 8, 4), torch.tensor(3)), (R(2, 8, 4), torch.tensor(2)),
              (R(2, 8, 4), torch.tensor(5)), (R(2, 8, 4), torch.tensor(4, dtype=torch.int32))]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [zeros_of_n_rows, narrow_to_n, branch_on_n_rows], ids=lambda f: f.__name__)
def test_a_0d_int_tensor_size_through_backends(fn, backend):
    # the backend traces the symbolic size (outputs equal eager's), and the guards read the tensor's
    # value on the hit path: a graph for as many of the calls as torch.compile's
    assert dynview_counts(fn, ITEM_CALLS, backend=backend) == dynamo_counts(fn, ITEM_CALLS)


# ---- a 0-d float64 tensor passed in and read as a number (a fill value, a scale), and torch.full
# of a floating 0-d tensor computed in the trace. TorchDynamo's fake of a float64 0-d input answers
# item() with a backed SymFloat (item_memo), and it writes torch.full(size, t) as
# torch.empty(size).fill_(t); dynview does both (it broke at each before) ----
def filled_with_s(x, s):
    return torch.full((2, x.shape[-1]), s) + x.sum()


def new_full_of_s(x, s):
    return x.new_full((3,), s) * 2, x * s


def fill_of_a_mean(x, s):  # a timestep or a mean, computed in the graph
    return torch.full((x.shape[0],), x.mean()) * s, torch.full((2,), x.amax(), dtype=torch.float64)


def fill_of_an_int_count(x, s):  # full of an int tensor is int64 (empty's default is float32): a break
    return torch.full((2,), (x > 0).sum()) + 1, x * s


FLOAT_ITEM = [filled_with_s, new_full_of_s, fill_of_a_mean]
FLOAT_ITEM_CALLS = [(R(2, 8, 4), torch.tensor(2.5, dtype=torch.float64)), (R(2, 8, 4), torch.tensor(3.5, dtype=torch.float64)),
                    (R(2, 8, 4), torch.tensor(1.25, dtype=torch.float64)), (R(2, 8, 4), torch.tensor(0.5))]


@pytest.mark.parametrize("dynamic", [None, False])
@pytest.mark.parametrize("fn,calls", [(f, ITEM_CALLS) for f in ITEM_SIZES] + [(f, FLOAT_ITEM_CALLS) for f in FLOAT_ITEM],
                         ids=lambda v: v.__name__ if callable(v) else "")
def test_a_0d_tensor_input_read_as_a_number(fn, calls, dynamic):
    # (an int one as a size, a float64 one as a fill value or a scale)
    assert dynview_counts(fn, calls, dynamic=dynamic) == dynamo_counts(fn, calls, dynamic=dynamic)
    dynview.reset()
    c = dynview.compile(fn, backend="eager", dynamic=dynamic)
    c(*calls[0])
    breaks = [r["break_message"] for r in dynview._C.take_records() if r["break_id"]]
    assert bool(breaks) == (fn is n_plus_one_rows), breaks


def test_full_of_an_int_tensor_keeps_its_dtype():
    # torch.compile's decomposition gives float32 here, eager int64; dynview breaks and gives eager's
    c = dynview.compile(fill_of_an_int_count, backend="eager")
    for x, s in FLOAT_ITEM_CALLS:
        got, want = c(x, s), fill_of_an_int_count(x, s)
        assert got[0].dtype == want[0].dtype == torch.int64
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_0d_float64_tensor_through_backends(backend):
    for fn in (filled_with_s, fill_of_a_mean):
        assert dynview_counts(fn, FLOAT_ITEM_CALLS, backend=backend) == dynamo_counts(fn, FLOAT_ITEM_CALLS)


def pooler(h, w):
    # BERT's pooler: the first token's hidden state, h[:, 0] of (batch, seq, hidden)
    return torch.tanh(h[:, 0] @ w)


def pool_first_token(first, w):
    # a function given that slice (after a graph break, or a head called with it): its size is the
    # same for every sequence length, its stride (seq * hidden) is not
    return torch.tanh(first @ w)


def first_token(seq_len):
    return R(2, seq_len, 8)[:, 0]


def test_a_stride_that_changes_becomes_symbolic_at_the_recompile():
    # automatic dynamic strides: a tensor whose sizes stay the same and whose stride changes is
    # compiled once more, its stride symbolic, rather than once per stride (PyTorch's
    # test_changing_stride); a stride of 0 or 1 is specialised (a recompile), as torch.compile's
    w = R(8, 8)
    strided = [(first_token(t), w) for t in (3, 5, 7, 9)] + [(R(1, 8).expand(2, 8), w), (first_token(11), w)]
    want = dynamo_counts(pool_first_token, strided)
    assert want == [1, 2, 2, 2, 3, 3]
    assert dynview_counts(pool_first_token, strided) == want
    dynview.reset()
    assert dynview_counts(pool_first_token, strided, backend="aot_eager") == want
    entry = dynview._C.cache_entries(pool_first_token.__code__)
    guards = [g for e in entry for g in e["guards"]]
    assert "check_tensor(L['first'], Float, cpu, size=[2, 8], stride=[None, 1])" in guards, guards
    assert "2 <= L['first'].stride()[0]" in guards, guards


def reshaped_if_contiguous(x, k):
    if x.is_contiguous():
        return x.view(-1) * k
    return x.reshape(-1) - k


def columns(n, k=2):
    return R(4, 8 * n)[:, :8], k


def test_contiguity_read_of_a_symbolic_stride_is_guarded():
    # a (4, 8) tensor that is contiguous (stride 8) on some calls and a column slice of a wider one on
    # others: the symbolic stride's guards keep the contiguous calls off the graph that took the other branch
    calls = [columns(1), columns(2), columns(3), columns(1), columns(4)]
    want = dynamo_counts(reshaped_if_contiguous, calls)
    assert dynview_counts(reshaped_if_contiguous, calls) == want == [1, 2, 2, 2, 2]
    pooled = [(R(2, t, 8), R(8, 8)) for t in (3, 5, 7)]
    assert dynview_counts(pooler, pooled) == dynamo_counts(pooler, pooled) == [1, 2, 2]
