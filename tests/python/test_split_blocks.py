"""Graph breaks inside `with` blocks: the frame is split there (as TorchDynamo splits it), and what
eager does at the block's edges still happens -- the block's __exit__ runs once, with the exception
when the breaking call raises (and a manager that suppresses it suppresses it), and the grad,
inference and autocast modes after the call are eager's. Each function runs in eager, under
torch.compile and under dynview; graphs and breaks are compared with torch._dynamo.explain."""
import contextlib

import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


@pytest.fixture(autouse=True)
def modes_put_back():
    """A mode one test leaves set (the bug these tests catch) is put back, so that it fails alone."""
    yield
    torch.set_grad_enabled(True)
    torch.set_autocast_enabled("cpu", False)
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    while n < 0:
        n = torch.autocast_increment_nesting()
    while n > 0:
        n = torch.autocast_decrement_nesting()

LOG = []


class Track:
    def __enter__(self):
        LOG.append("enter")
        return self

    def __exit__(self, *exc):
        LOG.append(("exit", exc[0].__name__ if exc[0] else None))
        return False


class Suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        LOG.append(("exit", exc[0].__name__ if exc[0] else None))
        return exc[0] is ValueError


@contextlib.contextmanager
def tracked():
    LOG.append("gen enter")
    try:
        yield
    finally:
        LOG.append("gen exit")


@torch._dynamo.disable
def fails(t):
    LOG.append("fails")
    raise ValueError("from the breaking call")


@torch._dynamo.disable
def passes(t):
    LOG.append("passes")
    return t.sum()


def no_grad_block(x, brk):
    y = x + 1
    with torch.no_grad():
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def set_grad_enabled_block(x, brk):
    y = x + 1
    with torch.set_grad_enabled(False):
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def inference_mode_block(x, brk):
    y = x + 1
    with torch.inference_mode():
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def inference_mode_false_block(x, brk):
    y = x + 1
    with torch.inference_mode(False):
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def autocast_block(x, brk):
    y = x + 1
    with torch.autocast("cpu"):
        y = y @ y.T
        brk(y)
        y = y @ y
    return y + 10


def user_block(x, brk):
    y = x + 1
    with Track():
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def suppressing_block(x, brk):
    y = x + 1
    with Suppress():
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def generator_block(x, brk):
    y = x + 1
    with tracked():
        y = y * 2
        brk(y)
        y = y + 3
    return y + 10


def inference_mode_branch(x, brk):
    # a branch on a tensor inside the block: the jump is the break (a 2x2 tensor's truth raises)
    y = x + 1
    with torch.inference_mode():
        y = y * 2
        if brk(y):
            y = y + 3
        else:
            y = y - 3
    return y + 10


def no_grad_branch(x, brk):
    y = x + 1
    with torch.no_grad():
        y = y * 2
        if brk(y):
            y = y + 3
    return y + 10


BLOCKS = [no_grad_block, set_grad_enabled_block, inference_mode_block, inference_mode_false_block, autocast_block,
          user_block, suppressing_block, generator_block]
BRANCHES = [inference_mode_branch, no_grad_branch]


def modes():
    torch.autocast_increment_nesting()
    nesting = torch.autocast_decrement_nesting()  # (autocast's depth: its cache is cleared at 0)
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu"), nesting


def run(fn, brk, calls=2):
    """What the calls give, as comparable values: each result (values, requires_grad, is_inference) or
    exception (type, message), the modes after it, and the log of block edges and breaking calls."""
    seen = []
    for _ in range(calls):
        LOG.clear()
        x = torch.arange(4.0).reshape(2, 2).requires_grad_()
        try:
            r = fn(x, brk)
            seen.append(("value", r.detach().tolist(), r.requires_grad, r.is_inference(), r.dtype))
        except Exception as e:  # noqa: BLE001 -- the exception is what is compared
            seen.append(("raised", type(e).__name__, str(e)))
        seen.append((modes(), list(LOG)))
    return seen


def compiled(engine, fn):
    torch._dynamo.reset()
    return dynview.compile(fn, backend="eager") if engine == "dynview" else torch.compile(fn, backend="eager")


@pytest.mark.parametrize("fn", BLOCKS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("brk", [fails, passes], ids=lambda f: f.__name__)
def test_a_call_that_breaks_inside_a_block_leaves_it_as_eager_does(fn, brk):
    expected = run(fn, brk)
    assert modes() == (True, False, False, 0)
    assert run(compiled("torch.compile", fn), brk) == expected  # (the oracle agrees with eager)
    assert run(compiled("dynview", fn), brk) == expected
    assert modes() == (True, False, False, 0)


@pytest.mark.parametrize("fn", BRANCHES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("brk", [torch.Tensor.sum, torch.clone], ids=["scalar", "ambiguous"])
def test_a_branch_on_a_tensor_inside_a_block_leaves_it_as_eager_does(fn, brk):
    expected = run(fn, brk)
    assert run(compiled("dynview", fn), brk) == expected
    assert modes() == (True, False, False, 0)


def counts(explain):
    return explain.graph_count, explain.graph_break_count


@pytest.mark.parametrize("fn", [no_grad_block, set_grad_enabled_block, inference_mode_block, inference_mode_false_block,
                                autocast_block, inference_mode_branch, no_grad_branch], ids=lambda f: f.__name__)
def test_a_break_inside_a_block_splits_the_frame_as_torch_dynamo_does(fn):
    brk = torch.Tensor.sum if fn in BRANCHES else passes
    torch._dynamo.reset()
    want = counts(torch._dynamo.explain(fn)(torch.ones(2, 2), brk))
    got = dynview.explain(fn)(torch.ones(2, 2), brk)
    assert counts(got) == want
    assert got.graph_count == 2, got  # split, not run eagerly


def test_a_split_inference_mode_block_has_its_enter_and_exit_in_both_graphs():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append([n.target.__name__ for n in gm.graph.nodes if n.op == "call_function" and "inference" in str(n.target)])
        return gm

    x = torch.ones(3, requires_grad=True)
    r = dynview.compile(inference_mode_block, backend=backend)(x, passes)
    torch.testing.assert_close(r, inference_mode_block(x, passes))
    assert graphs == [["_enter_inference_mode", "_exit_inference_mode"]] * 2
    assert not torch.is_inference_mode_enabled()


def test_an_exception_from_the_breaking_call_keeps_its_traceback_at_the_users_line():
    import traceback
    with pytest.raises(ValueError) as info:
        dynview.compile(no_grad_block, backend="eager")(torch.ones(2), fails)
    lines = [f.line for f in traceback.extract_tb(info.value.__traceback__)]
    assert "brk(y)" in lines and 'raise ValueError("from the breaking call")' in lines



def formatted_inside_inference_mode(x):
    # the break is at the f-string's repr() of a tensor (not a call): the frame resumes at that
    # instruction and runs on eagerly, inside the block the resume function enters again
    y = x + 1
    with torch.inference_mode():
        y = y * 2
        s = f"{y!r}"
        y = y + 3
    return y + len(s)


def test_a_break_at_another_instruction_inside_an_inference_mode_block_leaves_it_once():
    x = torch.arange(4.0).reshape(2, 2)
    want = formatted_inside_inference_mode(x)
    got = dynview.compile(formatted_inside_inference_mode, backend="eager")(x)
    assert modes() == (True, False, False, 0)
    torch.testing.assert_close(got, want)
    assert got.is_inference() == want.is_inference()  # (the block was left before the return, as in eager)
    assert dynview.explain(formatted_inside_inference_mode)(x).graph_count == 1


# ---- torch.nn.attention.sdpa_kernel: the backends enabled inside the block and after it are eager's ----
from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel  # noqa: E402

SEEN_BACKENDS = []


@torch._dynamo.disable
def _note_backends():  # runs eagerly: a break in both
    SEEN_BACKENDS.append(tuple(_cur_sdpa_kernel_backends()))


def _attend(x):
    q = x.view(1, 2, 3, 4)
    return torch.nn.functional.scaled_dot_product_attention(q, q, q).flatten()


def sdpa_block(x):
    with sdpa_kernel([SDPBackend.MATH]):
        y = _attend(x)
    return y + 1


def sdpa_block_with_a_break(x):
    with sdpa_kernel(SDPBackend.MATH):
        y = _attend(x)
        _note_backends()
        y = y * 2
    return y


def sdpa_block_left_by_an_exception(x):
    try:
        with sdpa_kernel(SDPBackend.MATH):
            y = _attend(x)
            raise KeyError("stop")
    except KeyError:
        y = x * 3
    return y


@pytest.mark.parametrize("fn", [sdpa_block, sdpa_block_with_a_break, sdpa_block_left_by_an_exception], ids=lambda f: f.__name__)
def test_sdpa_kernel_blocks_leave_the_backends_as_eager_does(fn):
    x = torch.randn(24)
    before = _cur_sdpa_kernel_backends()
    SEEN_BACKENDS.clear()
    want = fn(x)
    eager_seen = list(SEEN_BACKENDS)
    assert _cur_sdpa_kernel_backends() == before
    for compiled in (dynview.compile(fn, backend="eager"), dynview.compile(fn, backend="eager")):  # the capture, then a hit
        SEEN_BACKENDS.clear()
        torch.testing.assert_close(compiled(x), want)
        assert SEEN_BACKENDS == eager_seen  # the breaking call ran inside the block
        assert _cur_sdpa_kernel_backends() == before


def test_a_break_in_an_sdpa_kernel_block_splits_the_frame():
    # as TorchDynamo splits it (2 graphs, 1 break): the resume function enters the block again
    x = torch.randn(24)
    dynview.reset()
    dynview._C.take_records()
    dynview.compile(sdpa_block_with_a_break, backend="eager")(x)
    records = dynview._C.take_records()
    assert [(r["graph"] is not None, r["has_break"], r["eager_why"]) for r in records] == [(True, True, ""), (True, False, "")], records
    # the second graph is inside the block: it sets the kernel again, and leaves it
    assert records[1]["ops"].count("_sdpa_kernel") == 2, records[1]["ops"]
    dynview.reset()


def test_sdpa_kernel_block_is_a_pair_of_nodes_in_the_graph_as_torch_dynamo_makes_it():
    ops = []

    def backend(gm, example_inputs):
        ops.append([str(getattr(n.target, "__name__", n.target)) for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward

    x = torch.randn(24)
    torch._dynamo.reset()
    torch.compile(sdpa_block, backend=backend)(x)
    torch._dynamo.reset()
    dynview.compile(sdpa_block, backend="eager")(x)
    (record,) = [r for r in dynview._C.take_records() if r["graph"] is not None]
    assert ops[0].count("_sdpa_kernel") == record["ops"].count("_sdpa_kernel") == 2
    assert ops[0].count("_backend_from_string") == record["ops"].count("_backend_from_string")


# ---- torch.autograd.graph.disable_saved_tensors_hooks: the state inside the block (where a break
# runs eagerly) and after it is eager's; a hook pushed inside it raises eager's error ----
_hooks_message = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message
SEEN_MESSAGES = []


@torch._dynamo.disable
def _note_message():  # runs eagerly: a break
    SEEN_MESSAGES.append(_hooks_message())


def hooks_off_with_a_break(x, w):
    with torch.autograd.graph.disable_saved_tensors_hooks("keep them"):
        y = (x * w).sin()
        _note_message()
        y = y * w
    return y.sum()


def hooks_off_nested_with_a_break(x, w):
    with torch.autograd.graph.disable_saved_tensors_hooks("outer"):
        y = x * w
        with torch.autograd.graph.disable_saved_tensors_hooks("inner"):
            y = y.sin()
            _note_message()
        _note_message()
        y = y * w
    return y.sum()


def hooks_pushed_inside_the_block(x, w):
    try:
        with torch.autograd.graph.disable_saved_tensors_hooks("not here"):
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                y = x * w
    except RuntimeError as e:
        return x * 2, str(e)
    return y, ""


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [hooks_off_with_a_break, hooks_off_nested_with_a_break], ids=lambda f: f.__name__)
def test_disable_saved_tensors_hooks_split_as_in_eager(fn, backend):
    x = torch.randn(3)
    w = torch.randn(3, requires_grad=True)
    SEEN_MESSAGES.clear()
    want = fn(x, w)
    (want_grad,) = torch.autograd.grad(want, w)
    eager_seen = list(SEEN_MESSAGES)
    assert _hooks_message() is None and eager_seen and None not in eager_seen
    dynview.reset()
    dynview._C.take_records()
    for compiled in (dynview.compile(fn, backend=backend), dynview.compile(fn, backend=backend)):  # the capture, then a hit
        SEEN_MESSAGES.clear()
        got = compiled(x, w)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got, w)[0], want_grad)
        assert SEEN_MESSAGES == eager_seen  # the breaking calls ran inside the blocks
        assert _hooks_message() is None
    records = dynview._C.take_records()
    assert all(not r["eager_why"] for r in records) and records[0]["ops"][0] == "_saved_tensors_hooks_disable", records
    dynview.reset()


def test_a_hook_pushed_inside_disable_saved_tensors_hooks_raises_eagers_error():
    x, w = torch.randn(3), torch.randn(3)
    want = hooks_pushed_inside_the_block(x, w)
    assert want[1] == "not here"
    got = dynview.compile(hooks_pushed_inside_the_block, backend="eager")(x, w)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] and _hooks_message() is None
