"""Strings formatted from traced values: f-strings and str.format of tensors and of symbolic sizes.

As TorchDynamo (its StringFormatVariable), the text of a tensor or of a dynamic torch.Size is made
after the graph, so the format neither breaks nor specialises the compile; an f-string of a dynamic
int specialises it (TorchDynamo's LazySymNodeFormatString); str() and repr() of a dynamic size break.
Each function runs eagerly, under torch.compile and under dynview on a sequence of inputs whose first
dimension changes (the second call makes it dynamic): the strings equal eager's, and the graphs
compiled and breaks met equal TorchDynamo's on the same calls. Where TorchDynamo's text is wrong (a
value changed after the format), dynview's equals eager's."""
import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def shape_message(x):
    msg = f"input of shape {x.shape}, {x.dim()} dims"
    return x.relu(), msg


def sizes_by_format(x):
    b, n = x.shape
    return x.sum(-1), "{}x{}".format(b, n)


def sizes_by_keyword(x):
    return x * 2, "batch={batch} features={features}".format(batch=x.size(0), features=x.size(1))


def size_by_format_positional(x):
    return x + 1, "{1}/{0}".format(x.shape[0], x.shape[1])


def shape_by_format(x):
    return x - 1, "shape: {}".format(x.shape)


def literal_braces(x):
    return x.neg(), f"{{batch}} {x.shape[1:]} {{}}"


def nested_fstrings(x):
    inner = f"{x.shape}"
    return x * 3, f"<{inner}>"


def list_of_sizes(x):
    dims = [x.shape[0], x.shape[1]]
    return x.abs(), f"dims={dims}"


def unpacked_sizes(x):
    return x.t(), "{}x{}".format(*x.shape)


def unbound_str_format(x):
    return x.cos(), str.format("rows: {}", x.shape[0])


def int_size_fstring(x):  # specialises (TorchDynamo: a compile per size)
    n = x.shape[0]
    return x * 2, f"{n} rows"


def padded_int_fstring(x):
    return x * 2, f"[{x.shape[0]:>5}]"


def str_of_size(x):  # a break, as torch.compile's
    return x * 2, str(x.shape[0])


def repr_of_size(x):
    return x + 2, repr(x.size())


def str_join_of_sizes(x):
    return x.exp(), "x".join(map(str, x.shape))


def bool_of_size(x):
    return x * 2, bool(x.shape[0])


def tensor_fstring(x):
    loss = (x * x).mean()
    return loss, f"loss={loss:.4f} max={x.max()}"


def tensor_format(x):
    y = x.softmax(-1)
    return y, "probs: {}".format(y[0])


CASES = [shape_message, sizes_by_format, sizes_by_keyword, size_by_format_positional, shape_by_format, literal_braces,
         nested_fstrings, list_of_sizes, unpacked_sizes, unbound_str_format, int_size_fstring, padded_int_fstring, str_of_size, repr_of_size,
         str_join_of_sizes, bool_of_size, tensor_fstring, tensor_format]
SIZES = (2, 3, 4, 5)


def inputs():
    return [torch.arange(float(b * 3)).reshape(b, 3) / 7 for b in SIZES]


def torch_compile_counts(fn):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    graphs = [0]

    def backend(gm, example_inputs):
        graphs[0] += 1
        return gm.forward
    compiled = torch.compile(fn, backend=backend)
    outs = [compiled(x) for x in inputs()]
    return outs, graphs[0], sum(counters["graph_break"].values())


def dynview_counts(fn):
    dynview._C.take_records()
    compiled = dynview.compile(fn, backend="eager")
    outs = [compiled(x) for x in inputs()]
    records = dynview._C.take_records()
    return outs, sum(r["graph"] is not None for r in records), [r["break_id"] for r in records if r["has_break"]]


def same(got, want):
    torch.testing.assert_close(got[0], want[0])
    assert type(got[1]) is type(want[1]) and got[1] == want[1]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_formats_equal_eager_with_torch_dynamos_graphs_and_breaks(fn):
    want = [fn(x) for x in inputs()]
    td_outs, td_graphs, td_breaks = torch_compile_counts(fn)
    dv_outs, dv_graphs, dv_breaks = dynview_counts(fn)
    for got, td, w in zip(dv_outs, td_outs, want):
        same(got, w)
        same(td, w)
    assert (dv_graphs, len(dv_breaks)) == (td_graphs, td_breaks), (dv_breaks, fn.__name__)


def test_a_dynamic_size_is_formatted_without_recompiling():
    # the second call compiles for any size; the f-string of the torch.Size follows each call's size
    _, graphs, breaks = dynview_counts(shape_message)
    assert (graphs, breaks) == (2, [])
    assert len(dynview._C.cache_entries(shape_message.__code__)) == 2


def test_str_of_a_dynamic_size_breaks_with_a_reason():
    _, _, breaks = dynview_counts(str_of_size)
    assert breaks == ["DV0007"]
    rec = dynview.explain(str_of_size)(torch.ones(2, 3))
    assert rec.graph_count == 1  # static on a first call: no break


# Values that change after the format: eager's text is the value when formatted (TorchDynamo's lazy
# text shows the later value for the first two).

def mutated_after_format(x):
    y = x * 2
    s = f"{y}"
    y.add_(1)
    return y, s


def input_mutated_after_format(x):
    s = "before: {}".format(x)
    x.mul_(10)
    return x.sum(), s


def list_grown_after_format(x):
    sizes = [x.shape[0]]
    s = "{}".format(sizes)
    sizes.append(x.shape[1])
    return x + len(sizes), s


@pytest.mark.parametrize("fn", [mutated_after_format, input_mutated_after_format, list_grown_after_format],
                         ids=lambda f: f.__name__)
def test_a_value_changed_after_its_format_is_formatted_as_it_was(fn):
    want = [fn(x) for x in inputs()]
    got, graphs, breaks = dynview_counts(fn)
    for g, w in zip(got, want):
        same(g, w)
    assert breaks == [] and graphs == 2


class Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.frozen = torch.nn.Parameter(torch.full((3,), 2.0), requires_grad=False)
        self.last = ""

    def forward(self, x):
        self.last = f"scaled {x.shape}"
        return x * self.weight


def test_a_format_stored_on_a_module_is_written_back():
    m = Scaler()
    compiled = dynview.compile(m, backend="eager")
    for x in inputs():
        compiled(x)
        assert m.last == f"scaled {x.shape}"


def grad_tensor_text(x, w):
    return f"{x * w}"  # names its grad_fn: only eager knows it


def parameter_text(m, x):
    return x + 1, f"{m.frozen}"  # "Parameter containing: ..."


def test_text_only_eager_can_make_breaks_and_equals_eager():
    x, w = torch.ones(2, 3), torch.ones(3, requires_grad=True)
    got = dynview.compile(grad_tensor_text, backend="eager")(x, w)
    assert got == grad_tensor_text(x, w) and "grad_fn=<MulBackward0>" in got
    assert [r["break_id"] for r in dynview._C.take_records() if r["has_break"]] == ["DV0023"]
    m = Scaler()
    got = dynview.compile(parameter_text, backend="eager")(m, x)
    assert got[1] == parameter_text(m, x)[1] and got[1].startswith("Parameter containing")


def format_spec_refused(x):
    return f"{x * 2:.3f}"  # TypeError in eager: a 2-d tensor has no float format


def missing_argument(x):
    return "{} and {}".format(x.shape)


@pytest.mark.parametrize("fn", [format_spec_refused, missing_argument], ids=lambda f: f.__name__)
def test_a_format_eager_refuses_raises_the_same_error(fn):
    x = torch.ones(2, 3)
    with pytest.raises(Exception) as want:
        fn(x)
    with pytest.raises(type(want.value)) as got:
        dynview.compile(fn, backend="eager")(x)
    assert str(got.value) == str(want.value)


def formatted_across_a_break(x):
    s = f"shape {x.shape} sum {x.sum()}"
    torch._dynamo.graph_break()
    return x + 1, s


def test_a_format_crossing_a_break_is_rebuilt_after_the_first_graph():
    for x in inputs()[:2]:
        torch.testing.assert_close(dynview.compile(formatted_across_a_break, backend="eager")(x)[0], x + 1)
        assert dynview.compile(formatted_across_a_break, backend="eager")(x)[1] == formatted_across_a_break(x)[1]


def raise_with_shape(x):
    if x.dim() != 3:
        raise ValueError(f"expected a 3-d input, got shape {x.shape}")
    return x


def test_an_exception_message_formatted_from_a_shape_is_eagers():
    with pytest.raises(ValueError) as want:
        raise_with_shape(torch.ones(2, 3))
    with pytest.raises(ValueError) as got:
        dynview.compile(raise_with_shape, backend="eager")(torch.ones(2, 3))
    assert str(got.value) == str(want.value)
