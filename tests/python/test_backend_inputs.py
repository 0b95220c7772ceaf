"""What a backend is handed, as TorchDynamo hands it: the graph's real inputs inside a TracingContext
whose fake mode has a ShapeEnv and a fake of each input with its real sizes, so AOTAutograd traces
what it traces under torch.compile and gives up (the frame runs eagerly) where it gives up there. Each case runs under
torch.compile and dynview with one recording backend over "aot_eager", and compares what the backend
was asked to compile and how each compile ended, the outputs and the gradients with eager's."""
import copy

import pytest
import torch

import dynview
from torch._dynamo.backends.registry import lookup_backend


class Recording:
    """aot_eager, noting each compile: True, or the name of the exception it raised."""

    def __init__(self):
        self.outcomes = []
        self.example_types = []

    def __call__(self, gm, example_inputs):
        self.example_types.append([type(t).__name__ for t in example_inputs])
        try:
            compiled = lookup_backend("aot_eager")(gm, example_inputs)
        except Exception as e:
            self.outcomes.append(type(e).__name__)
            raise
        self.outcomes.append(True)
        return compiled


@pytest.fixture(autouse=True)
def _reset():
    torch._dynamo.reset()
    dynview.reset()
    dynview._C.take_records()
    yield
    torch._dynamo.reset()
    dynview.reset()


def _grads(params):
    return [None if p.grad is None else p.grad.clone() for p in params]


def _train_step(fn, args, params):
    for p in params:
        p.grad = None
    out = fn(*args)
    loss = sum(t.float().sum() for t in (out if isinstance(out, tuple) else (out,)))
    loss.backward()
    return out, _grads(params)


def _compare(make, args_of, fullgraph=False):
    """make() -> (fn, params): the same training step under eager, torch.compile and dynview with
    one recording backend each. Returns the two recorders after checking outputs and gradients."""
    fn, params = make()
    want, want_grads = _train_step(fn, args_of(), params)
    rec_td, rec_dv = Recording(), Recording()
    outs = {}
    for name, rec, compile_ in (("td", rec_td, torch.compile), ("dv", rec_dv, dynview.compile)):
        fn, params = make()
        compiled = compile_(fn, backend=rec, fullgraph=fullgraph)
        with _quiet():  # (the fallbacks' warnings)
            got, got_grads = _train_step(compiled, args_of(), params)
        torch.testing.assert_close(got, want)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w)
        outs[name] = got
    return rec_td, rec_dv


class _quiet:
    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


# ---- data-dependent sizes: a boolean-mask assignment (t5gemma2) --------------------------------

class _ScaledEmbedding(torch.nn.Embedding):
    # transformers' T5Gemma2TextScaledWordEmbedding: one learned row broadcast to the positions of a
    # token; AOTAutograd's fake tensors cannot size it (DynamicOutputShapeException under torch.compile)
    def __init__(self):
        super().__init__(16, 4, padding_idx=0)
        self.embed_scale = torch.nn.Buffer(torch.tensor(2.0), persistent=False)
        self.eoi_token_index = 9
        self.eoi_embedding = torch.nn.Parameter(torch.randn(4))

    def forward(self, input_ids):
        input_embeddings = super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)
        input_embeddings[input_ids == self.eoi_token_index] = self.eoi_embedding.to(input_embeddings.dtype)
        return input_embeddings


def _seeded(cls):
    torch.manual_seed(0)
    return cls()


def test_a_broadcast_mask_assignment_runs_the_frame_eagerly_as_under_torch_compile():
    def make():
        torch.manual_seed(0)
        m = _ScaledEmbedding()
        return m, list(m.parameters())

    rec_td, rec_dv = _compare(make, lambda: (torch.tensor([[1, 9, 3, 9], [9, 2, 2, 5]]),))
    assert "DynamicOutputShapeException" in rec_td.outcomes and True not in rec_td.outcomes
    assert set(rec_dv.outcomes) == set(rec_td.outcomes)
    records = dynview._C.take_records()
    assert [r["break_id"] for r in records if r["qualname"] == "_ScaledEmbedding.forward"] == ["DV0027"]
    assert all(r["graph"] is None for r in records)


def _scatter_features():
    # the multimodal merge as llava-style models write it: the image features assigned to the
    # positions of the image token, one row per position
    torch.manual_seed(0)
    proj = torch.nn.Linear(6, 4)

    def merge(inputs_embeds, input_ids, pixel_features):
        image_features = proj(pixel_features)
        inputs_embeds = inputs_embeds.clone()
        inputs_embeds[input_ids == 7] = image_features.to(inputs_embeds.dtype)
        return inputs_embeds * 2

    return merge, list(proj.parameters())


def _merge_args():
    torch.manual_seed(1)
    ids = torch.tensor([[1, 7, 7, 3, 0], [7, 2, 7, 4, 1]])
    return torch.randn(2, 5, 4, requires_grad=True), ids, torch.randn(4, 6)


@pytest.mark.parametrize("make,args", [(_scatter_features, _merge_args), (
    lambda: (lambda m: (m, list(m.parameters())))(_seeded(_ScaledEmbedding)),
    lambda: (torch.tensor([[1, 9, 3, 9], [9, 2, 2, 5]]),))], ids=["per_row", "broadcast"])
def test_fullgraph_lets_aot_autograd_size_a_mask_as_under_torch_compile(make, args):
    # fullgraph=True: TorchDynamo's ShapeEnv allows dynamic output shapes (its one_graph): AOTAutograd
    # gives the mask's nonzero an unbacked size, and the step is one graph, gradients and all
    rec_td, rec_dv = _compare(make, args, fullgraph=True)
    assert rec_td.outcomes == [True]
    assert rec_dv.outcomes == rec_td.outcomes
    assert [sorted(t) for t in rec_dv.example_types] == [sorted(t) for t in rec_td.example_types]  # (in their own orders)
    assert [r["graph"] is not None for r in dynview._C.take_records()] == [True]


def test_without_fullgraph_a_mask_assignment_runs_the_frame_eagerly_as_under_torch_compile():
    rec_td, rec_dv = _compare(_scatter_features, _merge_args)
    assert set(rec_td.outcomes) == {"DynamicOutputShapeException"}
    assert set(rec_dv.outcomes) == set(rec_td.outcomes)
    assert [r["break_id"] for r in dynview._C.take_records()] == ["DV0027"]


# ---- the fakes keep what the real inputs share --------------------------------------------------

def test_views_of_one_tensor_stay_aliased_for_aot_autograd():
    def f(a, b):
        a.add_(1)  # b is a row of a: it sees the write
        return b * 2, a.sum()

    for backend in ("aot_eager", "inductor"):
        dynview.reset()
        base = torch.randn(3, 4)
        ref = base.clone()
        want = f(ref, ref[0])
        got = dynview.compile(f, backend=backend)(base, base[0])
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(base, ref)


def test_parameters_reach_the_backend_as_under_torch_compile():
    def make():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
        return m, list(m.parameters())

    torch.manual_seed(3)
    x = torch.randn(5, 4)
    rec_td, rec_dv = _compare(make, lambda: (x,))
    assert rec_dv.outcomes == rec_td.outcomes == [True]
    assert sorted(rec_dv.example_types[0]) == sorted(rec_td.example_types[0])  # Parameters and the input


def test_the_eager_backend_gets_no_fakes():
    # dynview's own "eager" backend does not trace: no fake copies on a first call
    real = dynview._engine._lookup_backend("eager")

    def f(x):
        return x.sin() + 1

    x = torch.randn(3)
    assert getattr(real, "_dynview_ignores_inputs", False)
    torch.testing.assert_close(dynview.compile(f, backend="eager")(x), f(x))
    rec = Recording()
    torch.testing.assert_close(dynview.compile(f, backend=rec)(x), f(x))
    assert rec.example_types == [["Tensor"]]
