"""weakref.ref in compiled code, as torch.compile traces it (WeakRefVariable): a reference made in the
frame and called gives its object; a reference passed in or held by a module is followed to its
referent, which is guarded, so a referent that died (None) or another one compiles again. Results
against eager, graph and compile counts against torch.compile on the same calls."""
import gc
import weakref

import pytest
import torch
import torch.nn as nn
from torch._dynamo.testing import CompileCounter

import dynview
from test_compile_api import both

pytestmark = pytest.mark.usefixtures("fresh_engine")


def scale_through_a_new_reference(x, y):
    ref = weakref.ref(x)
    return ref() * y, ref


def test_a_reference_made_in_the_frame_gives_its_object_and_leaves_as_a_reference():
    x, y = torch.randn(4), torch.randn(4)
    out, ref = dynview.compile(scale_through_a_new_reference, backend="eager", fullgraph=True)(x, y)
    torch.testing.assert_close(out, x * y)
    assert type(ref) is weakref.ReferenceType and ref() is x


def pick_by_referent(ref, weight, y):
    if ref is not None and ref() is not weight:
        return torch.sin(y)
    return torch.cos(y)


def referent_across_a_break(ref, weight, y):
    y = torch.sin(y)
    referent = ref()
    torch._dynamo.graph_break()
    if referent is not weight:
        return torch.sin(y)
    return torch.cos(y)


@pytest.mark.parametrize("fn", [pick_by_referent, referent_across_a_break])
def test_a_reference_passed_in_is_followed_and_its_referent_guarded(fn):
    weight, other, y = torch.randn(4), torch.randn(4), torch.randn(4)
    ref = weakref.ref(weight)

    def run(compile_):
        cnt = CompileCounter()
        f = compile_(fn, backend=cnt)
        for w in (weight, other, weight):
            torch.testing.assert_close(f(ref, w, y), fn(ref, w, y))
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs


def add_if_alive(ref, y):
    x = ref()
    if x is not None:
        return torch.sin(y) + x
    return torch.cos(y)


def test_a_referent_that_died_compiles_again():
    def run(compile_):
        w, y = torch.randn(4), torch.randn(4)
        ref = weakref.ref(w)
        cnt = CompileCounter()
        f = compile_(add_if_alive, backend=cnt, fullgraph=True)
        torch.testing.assert_close(f(ref, y), add_if_alive(ref, y))
        torch.testing.assert_close(f(weakref.ref(w), y), add_if_alive(ref, y))  # another reference, same referent
        counts = [cnt.frame_count]
        del w
        gc.collect()
        assert ref() is None
        torch.testing.assert_close(f(ref, y), torch.cos(y))
        counts.append(cnt.frame_count)
        return counts

    theirs, ours = both(run)
    assert ours == theirs == [1, 2]


class TiedHead(nn.Module):
    """An output head tied to an embedding it does not own (not registered as a submodule)."""

    def __init__(self, embedding):
        super().__init__()
        self._embedding = weakref.ref(embedding)
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))

    def forward(self, h):
        return h @ self._embedding().weight.t() + self.bias


def test_a_module_holding_a_reference_to_a_tied_module():
    emb = nn.Embedding(10, 4)
    head = TiedHead(emb)
    h = torch.randn(2, 4)

    def run(compile_):
        cnt = CompileCounter()
        f = compile_(head, backend=cnt, fullgraph=True)
        torch.testing.assert_close(f(h), head(h))
        with torch.no_grad():
            emb.weight.mul_(2)  # the tied weight changed in place: the compiled head reads it
        torch.testing.assert_close(f(h), head(h))
        return cnt.frame_count, cnt.op_count

    theirs, ours = both(run)
    assert ours == theirs
