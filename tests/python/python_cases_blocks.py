"""Plain-Python cases for test_python_cases.py on graph breaks inside `with` blocks nested in one
another, the way training and evaluation code nests them: no_grad around autocast, enable_grad
inside no_grad (a teacher/student step), a user context manager or @contextmanager around a grad-mode
block, `with a, b:`, a break that returns or jumps inside both blocks, two breaks, a break as the
first statement of the block. TorchDynamo resumes after the break with every block set up again,
and runs the whole frame eagerly when a try block is around them. Appended to python_cases.CASES like
python_cases_more's."""
import contextlib

import torch
import torch.nn as nn

from python_cases import DIFFERS, case, module_case
from python_cases_library import _trainable  # a weight that requires grad


@case((3,), extra=_trainable)
def break_in_enable_grad_inside_no_grad(x, w):
    y = x * w
    with torch.no_grad():
        with torch.enable_grad():
            z = y.sin()
            torch._dynamo.graph_break()
            z = z * w
        u = z + w
    return z, u, z.requires_grad, u.requires_grad, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def break_in_three_nested_grad_blocks(x, w):
    with torch.no_grad():
        with torch.enable_grad():
            with torch.no_grad():
                a = x * w
                torch._dynamo.graph_break()
                a = a + w
            b = a * w
        c = b + 1
    return a.requires_grad, b.requires_grad, c.requires_grad, c


@case((4, 4))
def break_in_autocast_inside_no_grad(x):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x.T
            torch._dynamo.graph_break()
            y = y @ x
    return y, y.dtype


@case((3,), extra=_trainable)
def break_in_grad_blocks_of_one_with_statement(x, w):
    with torch.no_grad(), torch.enable_grad():
        y = x * w
        torch._dynamo.graph_break()
        y = y + 1
    return y, y.requires_grad


@case((3,), extra=_trainable)
def break_then_return_inside_nested_blocks(x, w):
    with torch.enable_grad():
        with torch.no_grad():
            y = x * w
            torch._dynamo.graph_break()
            return y + 1, torch.is_grad_enabled()


@case((3,), extra=_trainable)
def data_dependent_branch_inside_nested_blocks(x, w):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * w
            if y.sum() > 0:
                y = y + 1
            else:
                y = y - 1
    return y, y.requires_grad


@case((3,), extra=_trainable)
def two_breaks_inside_nested_blocks(x, w):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * w
            torch._dynamo.graph_break()
            y = y * 3
            torch._dynamo.graph_break()
            y = y.sin()
        z = y + 1
    return y, z, z.requires_grad


@case((3,), extra=_trainable)
def break_in_no_grad_inside_inference_mode(x, w):
    with torch.inference_mode():
        with torch.no_grad():
            y = x * w
            torch._dynamo.graph_break()
            y = y + 1
    return y, y.is_inference()


@case((3,), extra=_trainable)
def break_in_set_grad_enabled_blocks(x, w):
    with torch.set_grad_enabled(False):
        with torch.set_grad_enabled(True):
            y = x * w
            torch._dynamo.graph_break()
            y = y + 1
    return y, y.requires_grad


@case((3,))
def break_in_no_grad_inside_nullcontext(x):
    with contextlib.nullcontext():
        with torch.no_grad():
            y = x.cos()
            torch._dynamo.graph_break()
            y = y * 2
    return y


@case((3,), extra=_trainable)
def break_as_the_first_statement_of_no_grad(x, w):
    with torch.no_grad():
        torch._dynamo.graph_break()
        y = x * w
    return y, y.requires_grad


@case((3,), extra=_trainable)
def break_as_the_first_statement_of_nested_blocks(x, w):
    with torch.no_grad():
        with torch.enable_grad():
            torch._dynamo.graph_break()
            y = x * w
    return y, y.requires_grad


@contextlib.contextmanager
def _section(log, name):
    log.append("enter " + name)
    try:
        yield
    finally:
        log.append("exit " + name)


@case((3,))
def break_in_no_grad_inside_a_contextmanager_section(x):
    log = []
    with _section(log, "eval"):
        with torch.no_grad():
            y = x * 2
            torch._dynamo.graph_break()
            y = y + 1
    return y, log


@case((3,), extra=_trainable)
def break_in_nested_blocks_inside_try_finally(x, w):
    done = []
    try:
        with torch.no_grad():
            with torch.enable_grad():
                y = x * w
                torch._dynamo.graph_break()
                y = y + 1
    finally:
        done.append(1)
    return y, y.requires_grad, done


class TeacherStudentStep(nn.Module):
    """Distillation: the teacher runs without grad under autocast; the loss is logged in between."""

    def __init__(self):
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 4))
        self.student = nn.Linear(6, 4)
        self.logged = []

    def forward(self, x):
        with torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
                target = self.teacher(x).softmax(-1)
                torch._dynamo.graph_break()
                target = target.detach().clamp_min(1e-6)
        out = self.student(x).log_softmax(-1)
        return nn.functional.kl_div(out, target, reduction="batchmean"), target.requires_grad


module_case(TeacherStudentStep, (5, 6))


class EvalWithInnerGrad(nn.Module):
    """Evaluation without grad, with an input-gradient saliency map computed inside (enable_grad)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 1))

    def forward(self, x):
        with torch.no_grad():
            base = self.net(x)
            with torch.enable_grad():
                xi = x.detach().requires_grad_()
                score = self.net(xi).sum()
                torch._dynamo.graph_break()
                total = score * 2
            shifted = self.net(x + 0.1)
        return base, shifted, total.requires_grad, shifted.requires_grad


module_case(EvalWithInnerGrad, (4, 6))


# ---- context manager objects from outside the compiled code, of Python classes ----
class MaybeAutocastBlock(nn.Module):
    """Holds the context its forward runs in, chosen in __init__ (a no-op unless mixed precision)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.amp_ctx = contextlib.nullcontext()

    def forward(self, x):
        with self.amp_ctx:
            return self.proj(x).relu()


module_case(MaybeAutocastBlock, (3, 4))


class _Section:
    """A reentrant section marker whose __enter__/__exit__ keep a depth on the object."""

    def __init__(self):
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        return False


_SECTION = _Section()


@case((3,))
def global_section_object_entered_around_the_computation(x):
    with _SECTION as s:
        inside = s.depth
        y = x.exp() * inside
    return y, _SECTION.depth


@case((3,))
def break_inside_a_section_object_from_outside(x):
    with _SECTION:
        y = x * 2
        torch._dynamo.graph_break()
        y = y + _SECTION.depth
    return y, _SECTION.depth


DIFFERS["global_section_object_entered_around_the_computation"] = (
    (1, 0), (0, 0),
    "TorchDynamo runs the frame eagerly (0 graphs); dynview inlines the object's __enter__/__exit__ "
    "and replays its attribute writes (1 graph, results and the object's state equal eager's)")
DIFFERS["break_inside_a_section_object_from_outside"] = (
    (2, 1), (0, 0),
    "TorchDynamo runs the frame eagerly (0 graphs); dynview splits it with the block set up again (2 graphs)")


@case((3,))
def gradient_of_a_tensor_made_in_the_trace_is_none(x):
    t = torch.ones(3)
    y = x * t
    return y, t.grad is None, y.grad is None


# ---- torch.autograd.graph.disable_saved_tensors_hooks: a pair of _saved_tensors_hooks_disable /
# _enable nodes around the block, as TorchDynamo captures it (FSDP and checkpointing code wrap the
# steps whose saved tensors must not go through a user's hooks); a break inside splits the frame ----
@case((3,), extra=_trainable)
def saved_tensors_hooks_disabled_around_the_step(x, w):
    with torch.autograd.graph.disable_saved_tensors_hooks("this step keeps its activations"):
        h = (x * w).sin()
        y = h.exp().sum()
    return y, h * 2


@case((2, 3), extra=_trainable)
def break_inside_disabled_saved_tensors_hooks(x, w):
    y = x @ w.unsqueeze(-1)
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks in the rematerialized region"):
        z = y.relu()
        torch._dynamo.graph_break()
        z = z * w.sum()
    return z + 1


class _NoHookBlock(nn.Module):
    """A block that must not have its activations packed (an FSDP-style wrapper), nested inside another."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        with torch.autograd.graph.disable_saved_tensors_hooks("outer"):
            h = self.inner(x)
            with torch.autograd.graph.disable_saved_tensors_hooks("inner"):
                h = torch.tanh(h) * 2
            return h + x


module_case(_NoHookBlock, (2, 4))
