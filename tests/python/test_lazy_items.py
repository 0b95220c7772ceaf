"""Items of lists, tuples and dicts from the frame that are numbers, strings or None stay values not
read yet (TorchDynamo's lazy items) while they only move: unpacked into locals, stored in a cell,
handed to an inlined function, returned, carried across a graph break. Such an item adds a guard
only when an instruction reads it, so a call that changes only an item the path taken never reads
hits the cache. Each case against eager (values, mutated arguments, exceptions) and torch.compile's
compile counts on the same calls; guards are read from dynview's records."""
import pytest
import torch

import dynview
from test_engine_behaviour import counting_dynamo
from test_lazy_arguments import run_both as run_with_kwargs
from test_lazy_sequences import _reset, run_with_records, same  # noqa: F401  (_reset: the engines reset around each test, autouse)


def run_both(fn, calls):
    """Each call (a function giving fresh arguments) through eager, torch.compile and dynview: values
    and mutated arguments equal eager's. Returns (dynview's graphs, torch.compile's graphs, the guard
    texts of dynview's compiles by qualname)."""
    records, n_td = run_with_records(fn, calls)
    guards = {}
    for r in records:
        guards.setdefault(r["qualname"], []).extend(r["guards"])
    return len([r for r in records if r["graph"] is not None]), n_td, guards


# Longformer's and LED's encoders: the inputs are padded to a multiple of the attention window by a
# helper that warns (a graph break in both engines); the caller unpacks its tuple, breaks again on
# a data-dependent flag, and only then reads padding_len to cut the padding off.
WINDOW = 8


def pad_to_window_size(input_ids, attention_mask):
    seq_len = input_ids.shape[1]
    padding_len = (WINDOW - seq_len % WINDOW) % WINDOW
    torch._dynamo.graph_break()  # logger.warning_once(...)
    if padding_len > 0:
        input_ids = torch.nn.functional.pad(input_ids, (0, padding_len), value=0)
        attention_mask = torch.nn.functional.pad(attention_mask, (0, padding_len), value=0)
    return padding_len, input_ids, attention_mask


def encoder(input_ids, attention_mask, output_hidden_states):
    padding_len, input_ids, attention_mask = pad_to_window_size(input_ids, attention_mask)
    hidden = input_ids.float() * 2
    is_global_attn = (attention_mask > 1).flatten().any().item()
    encoder_states = (hidden,) if output_hidden_states else None
    if is_global_attn:
        hidden = hidden + 1
    if padding_len > 0:
        hidden = hidden[:, :-padding_len]
        if output_hidden_states:
            encoder_states = tuple(state[:, :-padding_len] for state in encoder_states)
    return hidden, encoder_states


def encoder_no_closure(input_ids, attention_mask):
    padding_len, input_ids, attention_mask = pad_to_window_size(input_ids, attention_mask)
    hidden = input_ids.float() * 2
    is_global_attn = (attention_mask > 1).flatten().any().item()
    if is_global_attn:
        hidden = hidden + 1
    if padding_len > 0:
        hidden = hidden[:, :-padding_len]
    return hidden


def padded_calls(*extra):
    def make(n):
        return lambda: (torch.arange(2 * n).reshape(2, n), torch.ones(2, n, dtype=torch.long), *extra)
    return [make(n) for n in (5, 6, 7, 5)]


def test_a_padding_length_unpacked_and_read_after_the_next_break_is_guarded_only_there():
    # As LED's encoder: padding_len is a cell (a generator expression reads it), so it crosses the
    # .item() break as a cell and the frame that unpacks it never reads it.
    dv, td, guards = run_both(encoder, padded_calls(True))
    assert dv == td
    unpacking = [q for q in guards if q.startswith("__resume") and any("L['___stack0']" in g for g in guards[q])]
    assert unpacking
    for q in unpacking:
        assert not any("L['___stack0'][0]" in g for g in guards[q]), guards[q]


def test_a_number_not_read_yet_crossing_a_break_in_a_local_is_read_there_as_torch_compile_reads_it():
    dv, td, guards = run_both(encoder_no_closure, padded_calls())
    assert dv == td
    assert any("L['___stack0'][0] ==" in g for q in guards if q.startswith("__resume") for g in guards[q])


def cut_later(pair, x):
    n, scale = pair  # n is read only by a function defined below (a cell)
    def trim(t):
        return t[:n] * scale
    torch._dynamo.graph_break()
    return trim(x)


def test_an_item_stored_in_a_cell_is_read_where_the_closure_reads_it():
    x = torch.arange(6.0)
    dv, td, guards = run_both(cut_later, [lambda n=n: ((n, 2.0), x) for n in (2, 3, 2)])
    assert dv == td
    assert not any("L['pair'][0]" in g for g in guards["cut_later"])


def forward_flags(layer_kwargs, x):
    output_attentions = layer_kwargs.get("output_attentions", False)
    use_cache = layer_kwargs["use_cache"]
    return attend(x, output_attentions, use_cache)


def attend(x, output_attentions, use_cache):
    return x.softmax(-1)  # the flags are for other paths


def test_dict_entries_handed_to_an_inlined_layer_that_ignores_them_add_no_guard():
    x = torch.randn(2, 3)
    calls = [lambda a=a, c=c: ({"output_attentions": a, "use_cache": c}, x) for a, c in ((False, True), (True, False), (True, True))]
    dv, td, guards = run_both(forward_flags, calls)
    assert (dv, td) == (1, 1)
    assert not any("['output_attentions'] ==" in g or "['use_cache'] ==" in g for gs in guards.values() for g in gs)


def unpack_then_mutate(sizes, x):
    h, w = sizes
    sizes[0] = 99  # the list changes; h is the value it held
    torch._dynamo.graph_break()
    return x * h + w


def test_an_unread_item_is_the_value_the_list_held_when_it_was_unpacked():
    x = torch.ones(2)
    dv, td, _ = run_both(unpack_then_mutate, [lambda h=h: ([h, 3], x) for h in (1, 2, 4)])
    assert dv == td


def read_after_write(config, x):
    eps = config["eps"]
    config["eps"] = 1.0
    torch._dynamo.graph_break()
    return x + eps + config["eps"]


def test_an_unread_entry_is_the_value_the_dict_held_when_it_was_read():
    x = torch.zeros(2)
    run_both(read_after_write, [lambda e=e: ({"eps": e}, x) for e in (1e-5, 1e-6, 1e-5)])  # values as eager's


def unpack_pair(t, x):
    a, b = t
    return x + 1


def test_unpacking_a_tuple_of_the_wrong_length_raises_as_eager():
    x = torch.ones(2)
    for engine in (counting_dynamo(unpack_pair)[0], dynview.compile(unpack_pair, backend="eager")):
        with pytest.raises(ValueError, match="too many values to unpack"):
            engine((1, 2, 3), x)
    same(dynview.compile(unpack_pair, backend="eager")((1, 2), x), x + 1)


def scaled(triple):
    k, name, x = triple
    if name is None:
        return x * k
    return x - k


@pytest.mark.parametrize("calls", [
    [(2, None), (3, None), (3, "a")],
    [(2.5, "a"), (2.5, "b"), (1, None)],
])
def test_items_read_by_the_code_are_guarded_as_before(calls):
    x = torch.ones(2)
    dv, td, guards = run_both(scaled, [lambda c=c: ((c[0], c[1], x),) for c in calls])
    assert dv == td
    assert any("L['triple'][1]" in g for g in guards["scaled"]) and any("L['triple'][0]" in g for g in guards["scaled"])


def encoder_layers(hidden_states, attention_mask, padding_len=0, output_hidden_states=True):
    # LongformerEncoder.forward: padding_len is an argument and a cell (the generator expression
    # below reads it); the .item() break comes before anything reads it.
    is_global_attn = (attention_mask > 0).flatten().any().item()
    all_hidden_states = (hidden_states,) if output_hidden_states else None
    hidden_states = hidden_states * 2 if is_global_attn else hidden_states
    hidden_states = hidden_states[:, : hidden_states.shape[1] - padding_len]
    if output_hidden_states:
        all_hidden_states = tuple(state[:, : state.shape[1] - padding_len] for state in all_hidden_states)
    return hidden_states, all_hidden_states


def test_an_argument_held_in_a_cell_is_not_guarded_before_it_is_read():
    h, mask = torch.randn(2, 8, 3), torch.ones(2, 8)
    dv, td, guards = run_both(encoder_layers, [lambda p=p: (h, mask, p) for p in (3, 2, 1, 3)])
    assert dv == td
    assert not any("L['padding_len']" in g for g in guards["encoder_layers"])


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, use_cache=False, **kwargs):
        return self.proj(hidden_states)


class DecoderLayer(torch.nn.Module):
    # transformers' decoder layers pass **kwargs through to their attention
    def __init__(self):
        super().__init__()
        self.self_attn = Attention()

    def forward(self, hidden_states, **kwargs):
        residual = hidden_states
        hidden_states = self.self_attn(hidden_states, **kwargs)
        return residual + hidden_states


def test_kwargs_passed_through_to_a_layer_that_ignores_them_guard_only_their_names():
    layer, x = DecoderLayer(), torch.randn(2, 4)
    calls = [lambda a=a, c=c: ((x,), {"output_attentions": a, "use_cache": c, "position": 3 + a})
             for a, c in ((False, True), (True, False), (True, True))]
    dv, td, guards = run_with_kwargs(layer, calls)
    assert (dv, td) == (1, 1)
    assert any("keys()" in g for g in guards)  # the names are guarded
    assert not any("['use_cache']" in g or "['position']" in g for g in guards)


def count_options(options, x):
    n = 0
    for name in options:  # the names only
        if name.startswith("use_"):
            n += 1
    return x * n + len(options)


def test_iterating_a_dict_for_its_keys_does_not_guard_its_values():
    x = torch.ones(2)
    calls = [lambda v=v: ({"use_cache": v, "use_sdpa": not v, "dropout": 0.1 * v}, x) for v in (True, False, True)]
    dv, td, guards = run_both(count_options, calls)
    assert (dv, td) == (1, 1)
    assert not any("['use_cache']" in g or "['dropout']" in g for gs in guards.values() for g in gs)


def scale_by_options(options, x):
    for name, value in options.items():
        if name == "scale":
            x = x * value
    return x


def test_values_read_in_a_loop_over_items_are_guarded_where_they_are_read():
    x = torch.ones(2)
    calls = [lambda s=s, o=o: ({"scale": s, "other": o}, x) for s, o in ((2, "a"), (2, "b"), (3, "b"))]
    dv, td, guards = run_both(scale_by_options, calls)
    assert dv == td
    assert any("['scale'] == 2" in g for gs in guards.values() for g in gs)
    assert not any("['other']" in g for gs in guards.values() for g in gs)


def attend_with_cache(hidden, past_key_values=None, layer_idx=None):
    if past_key_values is not None:
        hidden = past_key_values.update(hidden, layer_idx)
    return hidden.softmax(-1)


def block_with_index(hidden, layer_idx):
    return attend_with_cache(hidden, None, layer_idx) + hidden


def test_an_argument_only_passed_on_to_an_inlined_function_that_ignores_it_adds_no_guard():
    x = torch.randn(2, 3)
    dv, td, guards = run_both(block_with_index, [lambda i=i: (x, i) for i in (0, 1, 2)])
    assert (dv, td) == (1, 1)
    assert not any("L['layer_idx']" in g for gs in guards.values() for g in gs)


def count_sizes(x, *sizes):
    return x * len(sizes)


def test_a_tuple_of_constants_read_only_by_len_guards_its_length():
    x = torch.ones(2)
    dv, td, guards = run_both(count_sizes, [lambda s=s: (x, *s) for s in ((1, 2), (3, 4), ("a", None), (5,))])
    assert (dv, td) == (2, 2)  # the length changed once
    assert not any("L['sizes'] ==" in g or "L['sizes'][0]" in g for gs in guards.values() for g in gs)
