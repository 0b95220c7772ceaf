"""The tensors of a model's output, in order, for comparing a compiled model's output with eager's:
tensors themselves, the fields of transformers' and diffusers' output classes (to_tuple), dict values,
list and tuple items, and the parameters of a distribution output (diffusers' AutoencoderKL gives a
DiagonalGaussianDistribution, whose `sample` is a method); and the comparison of a model's compiles
over calls with inputs of other sizes with torch.compile's."""
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


def assert_compiles_as_torch_compile(model, calls, **tolerance):
    """model(**inputs) for each inputs of `calls` in turn, under torch.compile and under dynview, each
    with a backend that counts its compiles: the outputs equal eager's each time, dynview has compiled
    as often as torch.compile after each call, and no dynview frame breaks."""
    import dynview
    counts = {}
    with torch.no_grad():
        wants = [tensors(model(**inputs)) for inputs in calls]
        for engine, compile_ in (("torch.compile", torch.compile), ("dynview", dynview.compile)):
            torch._dynamo.reset()
            compiles = [0]

            def backend(gm, example_inputs):
                compiles[0] += 1
                return gm.forward
            compiled = compile_(model, backend=backend)
            counts[engine] = []
            for inputs, want in zip(calls, wants):
                got = tensors(compiled(**inputs))
                assert len(got) == len(want) > 0
                for a, b in zip(got, want):
                    torch.testing.assert_close(a, b, **tolerance)
                counts[engine].append(compiles[0])
        torch._dynamo.reset()
    assert counts["dynview"] == counts["torch.compile"]
    assert [(r["qualname"], r["break_message"]) for r in dynview._C.take_records() if r["break_id"]] == []


def assert_one_graph_hit_and_counts_as_torch_dynamo(model, inputs):
    """dynview.compile(model) equals eager on two inputs with no frame breaking, a repeat call is a
    cache hit, and dynview.explain and torch._dynamo.explain both count 1 graph and 0 breaks."""
    import dynview
    compiled = dynview.compile(model, backend="eager")
    with torch.no_grad():
        assert_equal_to_eager_on_two_inputs(compiled, model, inputs)
        records = dynview._C.take_records()
        assert any(r["graph"] is not None for r in records)
        assert [(r["qualname"], r["break_message"]) for r in records if r["break_id"]] == []
        compiled(**inputs(0))
        assert dynview._C.take_records() == [], "a repeat call is a cache hit"
        dynview.reset()
        ours = dynview.explain(model)(**inputs(0))
        theirs = torch._dynamo.explain(model)(**inputs(0))
        torch._dynamo.reset()
    assert (theirs.graph_count, len(theirs.break_reasons)) == (1, 0)
    assert (ours.graph_count, len(ours.break_reasons)) == (1, 0), [str(b) for b in ours.break_reasons]
