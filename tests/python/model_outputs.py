"""The tensors of a model's output, in order, for comparing a compiled model's output with eager's:
tensors themselves, the fields of transformers' and diffusers' output classes (to_tuple), dict values,
list and tuple items, and the parameters of a distribution output (diffusers' AutoencoderKL gives a
DiagonalGaussianDistribution, whose `sample` is a method)."""
import torch


def tensors(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if hasattr(o, "to_tuple"):
        o = o.to_tuple()
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (list, tuple)):
        return [t for v in o for t in tensors(v)]
    if hasattr(o, "sample") and hasattr(o, "parameters"):
        return tensors(o.parameters)
    return []


def assert_equal_to_eager_on_two_inputs(compiled, model, inputs):
    """compiled(**inputs(seed)) gives the tensors model(**inputs(seed)) gives, for seeds 0 and 1."""
    for seed in (0, 1):
        got, want = tensors(compiled(**inputs(seed))), tensors(model(**inputs(seed)))
        assert len(got) == len(want) > 0
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)
