"""Plain-Python cases for test_python_cases.py from detection, config and reversible-network code:
iterator objects of Python classes (a config list whose __iter__ returns an iterator class, an
object that is its own iterator, __iter__ written as a generator), len() of a box list whose
__len__ is a tensor's size, torch.as_tensor of tensors, torch.autograd.Function.apply given lists
of layers or lists forward appends to while no input requires grad, and caches keyed by tuples
(seq_len, device, dtype), list subclasses called through a Python __call__ (a processor list), and
builtins (enumerate, zip, map, any, in, islice, chain) taking iterator objects only as far as eager
does. Appended to python_cases.CASES like python_cases_more's."""
import itertools
from collections.abc import Iterator

import torch
import torch.nn as nn

from python_cases import DIFFERS, case, module_case


# ---- iterator objects of Python classes: __iter__ inlined, __next__ taken one item at a time ----
class _Node:
    def __init__(self, value):
        self.value = value

    def resolve(self):
        return self.value


class _NodeListIter(Iterator):  # (Iterator gives it __iter__, returning itself)
    def __init__(self, owner, deref):
        self.deref = deref
        self.inner = iter(owner.__dict__["nodes"])
        self.taken = 0

    def __next__(self):
        node = next(self.inner)  # its StopIteration ends the loop
        self.taken += 1
        return node.resolve() if self.deref else node


class NodeList:  # a config container in the style of omegaconf's ListConfig
    def __init__(self, *values):
        self.nodes = [_Node(v) for v in values]

    def __iter__(self):
        return _NodeListIter(self, True)

    def __eq__(self, other):
        return type(other) is NodeList and [n.value for n in other.nodes] == [n.value for n in self.nodes]


@case((3,), extra=lambda seed: (NodeList(2, 3, 0.5),))
def sum_over_a_config_list_passed_in(x, cfg):
    for scale in cfg:
        x = x * scale
    return x, [v * 2 for v in cfg]


@case((3,))
def config_list_made_in_the_frame(x):
    cfg = NodeList(1, 2, 3)
    return sum(cfg) * x, list(cfg), max(cfg)


class Countdown:  # its own iterator: __iter__ returns self
    def __init__(self, n):
        self.n = n
        self.steps = 0

    def __iter__(self):
        return self

    def __next__(self):
        self.steps += 1
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n

    def __eq__(self, other):
        return type(other) is Countdown and vars(other) == vars(self)


@case((3,), extra=lambda seed: (Countdown(3),))
def loop_body_changes_what_next_sees(x, c):
    # __next__ runs between the bodies, as in eager: the extra item the body adds is taken
    out = []
    for i in c:
        out.append(x * i)
        if i == 1 and c.steps < 4:
            c.n += 1
    return out, c.steps


@case((3,), extra=lambda seed: (Countdown(2),))
def next_with_and_without_a_default(x, c):
    a = next(c)
    b = next(c, -1)
    d = next(c, -1)
    return x + a + b + d, c.steps


@case((3,), extra=lambda seed: (Countdown(3),))
def iter_of_a_self_iterator_is_itself(x, c):
    it = iter(c)
    first = next(it)
    return x * first, [v for v in it], it is c


@case((3,))
def self_iterator_made_and_drained_in_the_frame(x):
    c = Countdown(4)
    return [x * v for v in c], list(Countdown(2)), sum(Countdown(3)), c


class Tokens:  # __iter__ written as a generator
    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        yield from self.items

    def __len__(self):
        return len(self.items)

    def __eq__(self, other):
        return type(other) is Tokens and other.items == self.items


@case((3,), extra=lambda seed: (Tokens([3, 1, 2]),))
def generator_iter_under_builtins(x, toks):
    for v in toks:
        x = x + v
    return x, tuple(toks), sorted(toks, reverse=True), dict(zip(toks, "abc")), len(toks)


class _RowPairs:
    def __init__(self, t):
        self.t = t
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i + 1 >= self.t.shape[0]:
            raise StopIteration()
        pair = (self.t[self.i], self.t[self.i + 1])
        self.i += 2
        return pair


@case((6, 2))
def tensor_rows_taken_in_pairs(x):
    return [a @ b for a, b in _RowPairs(x)], [(i, a.sum() - b.sum()) for i, (a, b) in enumerate(_RowPairs(x))]


class _Broken:
    def __iter__(self):
        return self

    def __next__(self):
        raise ValueError("source exhausted badly")


@case((3,))
def iterator_raising_another_error(x):
    try:
        for v in _Broken():
            x = x + v
    except ValueError as e:
        return x * 2, str(e)
    return x


@case((3,), extra=lambda seed: (Countdown(3),))
def self_iterator_alive_across_a_break(x, c):
    a = next(c)
    y = x * a
    torch._dynamo.graph_break()
    b = next(c)
    return y + b, c.n


# ---- detection-style boxes: len() through a Python __len__, torch.as_tensor of tensors ----
class BoxList:
    def __init__(self, boxes):
        dev = boxes.device if isinstance(boxes, torch.Tensor) else torch.device("cpu")
        boxes = torch.as_tensor(boxes, dtype=torch.float32, device=dev)
        if boxes.numel() == 0:
            boxes = boxes.reshape(-1, 4)
        self.boxes = boxes

    def __len__(self):
        return self.boxes.shape[0]

    def widths(self):
        return self.boxes[:, 2] - self.boxes[:, 0]

    def __eq__(self, other):
        return type(other) is BoxList and torch.equal(other.boxes, self.boxes)


def _box_lists(seed):
    return ([BoxList(torch.arange(0, 8 + 4 * seed).reshape(-1, 4)), BoxList(torch.arange(4, 8).reshape(1, 4).float())],)


@case(extra=_box_lists)
def boxes_with_their_image_index(box_lists):
    # len(b) is its tensor's size; repeat_interleave by a tensor of counts breaks (its size depends on
    # the counts), as in TorchDynamo
    boxes = torch.cat([b.boxes for b in box_lists], dim=0)
    counts = torch.as_tensor([len(b) for b in box_lists], device=boxes.device)
    image = torch.repeat_interleave(torch.arange(len(box_lists), dtype=boxes.dtype), counts)
    return torch.cat([image[:, None], boxes], dim=1)


@case((5, 4))
def boxes_made_from_a_tensor_in_the_frame(t):
    b = BoxList(t * 10)
    wide = BoxList(t.double())
    return b.widths(), len(b), wide.boxes.dtype, torch.as_tensor(t) is t, torch.as_tensor(t, dtype=torch.float64)


# ---- autograd.Function.apply given lists and modules while no input requires grad: forward inlined ----
class _Reversible(torch.autograd.Function):
    # half the channels through each layer, the other half kept, as reversible residual networks do
    @staticmethod
    def forward(ctx, h, layers, seen, keep_seen):
        kept, moving = torch.chunk(h, 2, dim=-1)
        outs = ()
        for layer in layers:
            if keep_seen is True:
                seen.append(kept)
            moving = layer(moving)
            outs = outs + (moving,)
        ctx.save_for_backward(moving.detach(), kept.detach())
        ctx.layers = layers
        ctx.outs = outs
        return torch.cat([moving, kept], dim=-1)

    @staticmethod
    def backward(ctx, grad):
        _, g = torch.chunk(grad, 2, dim=-1)
        return g, None, None, None


class ReversibleStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.Linear(4, 4)]  # a plain list, not a ModuleList
        self.norm = nn.LayerNorm(8)

    def forward(self, h, keep_seen=True):
        seen = []
        h = _Reversible.apply(torch.cat([h, h], dim=-1)[..., :8], self.layers, seen, keep_seen)
        return self.norm(h), seen, h.requires_grad


module_case(lambda: ReversibleStack().eval(), (2, 3, 4))


class _ScaleAll(torch.autograd.Function):  # forward without ctx: setup_context keeps what backward needs
    @staticmethod
    def forward(x, factors, log):
        log.append(len(factors))
        for k in factors:
            x = x * k
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.factors = inputs[1]

    @staticmethod
    def backward(ctx, g):
        for k in ctx.factors:
            g = g * k
        return g, None, None


@case((3,))
def function_with_setup_context_given_a_list_it_appends_to(x):
    log = []
    y = _ScaleAll.apply(x, [2.0, 3.0], log)
    with torch.no_grad():
        z = _ScaleAll.apply(x * 2, [1.5], log)
    return y, z, log, y.requires_grad


class _PassThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, opts):
        flags = ctx.needs_input_grad
        return x, x * opts["k"], flags

    @staticmethod
    def backward(ctx, a, b, c):
        return a + b, None


@case((3,))
def function_returning_its_input_gives_a_view(x):
    # Function.apply returns an input that forward gives back as a view of it, not the input itself
    same, scaled, flags = _PassThrough.apply(x, {"k": 3})
    return same, scaled, same is x, flags


# ---- caches keyed by tuples of constants (length, device, dtype), read and filled in the frame ----
def _mask(n, device):
    return torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), diagonal=1)


def _filled_cache(seed):
    return ({(4, torch.device("cpu"), torch.float32): _mask(4, "cpu"), (2, torch.device("cpu"), torch.float32): _mask(2, "cpu")},)


@case((2, 4, 4), extra=_filled_cache)
def causal_mask_from_a_cache_passed_in(scores, cache):
    key = (scores.shape[-1], scores.device, scores.dtype)
    return scores.masked_fill(cache[key], float("-inf")).softmax(-1), key in cache, len(cache)


@case((2, 3, 3), extra=lambda seed: ({},))
def causal_mask_cache_filled_on_a_miss(scores, cache):
    key = (scores.shape[-1], scores.device)
    if key not in cache:
        cache[key] = _mask(scores.shape[-1], scores.device)
    return scores.masked_fill(cache[key], 0.0), sorted(k[0] for k in cache)


class MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self._masks = {(3, torch.device("cpu")): _mask(3, "cpu"), ("pad", 3): torch.zeros(3, dtype=torch.bool)}

    def forward(self, x):
        n = x.shape[1]
        s = self.proj(x) @ x.transpose(1, 2)
        s = s.masked_fill(self._masks[(n, x.device)] | self._masks[("pad", n)], -1e4)
        return s.softmax(-1) @ x


module_case(MaskedAttention, (2, 3, 4))


# ---- list subclasses passed in: iterated as lists, called through a Python __call__ ----
class Pipeline(list):
    def __call__(self, x, scale=1.0):
        for stage in self:
            x = stage(x) * scale
        return x


_PIPE = Pipeline([torch.tanh, torch.nn.functional.relu, torch.sigmoid])


def _pipeline(seed):  # the same object each call, as a generation loop passes its processor list
    return (_PIPE,)


@case((3,), extra=_pipeline)
def pipeline_called_and_iterated(x, pipe):
    return pipe(x, scale=2.0), len(pipe), [type(s).__name__ for s in pipe], pipe[0](x)


# ---- builtins over iterator objects take them lazily, as eager: each __next__ between the bodies ----
@case((3,), extra=lambda seed: (Countdown(3),))
def enumerate_over_an_iterator_the_body_changes(x, c):
    out = []
    for i, v in enumerate(c, start=1):
        out.append(x * v + i)
        if i == 1:
            c.n += 1  # seen by the next __next__
    return out, c.steps


@case((3,), extra=lambda seed: (Countdown(3),))
def zip_over_an_iterator_the_body_changes(x, c):
    out = []
    for v, w in zip(c, [10, 20, 30, 40, 50]):
        out.append(x * v + w)
        if w == 10:
            c.n += 1
    return out, c.steps, list(zip(Countdown(3), [1]))


@case((3,), extra=lambda seed: (Countdown(4),))
def map_and_filter_over_an_iterator(x, c):
    doubled = map(lambda v: v * 2, c)
    first = next(doubled)
    c.n += 1
    return x * first, list(filter(lambda v: v > 2, doubled)), c.steps


@case((3,), extra=lambda seed: (Countdown(4),))
def membership_stops_at_the_first_equal_item(x, c):
    # 'in' over an object without __contains__ iterates it; what it did not take is left
    found = 2 in c
    return x + found, c.steps, sum(c), 7 in Countdown(3)


@case((3,), extra=lambda seed: (Countdown(4),))
def any_and_all_stop_at_the_deciding_item(x, c):
    a = any(c)  # the first item, 3, decides
    after_any = c.steps
    b = all(c)  # 2, 1, then 0 decides
    return x * a, after_any, b, c.steps, c.n


@case((3,), extra=lambda seed: (Countdown(5),))
def islice_and_chain_take_only_what_they_give(x, c):
    two = list(itertools.islice(c, 2))
    chained = itertools.chain(c, [7, 8])
    first, second = next(chained), next(chained)
    return x + sum(two) + first + second, c.n, c.steps


# ---- list iterators: taken by index as they go, as CPython's; builtins use up what they take ----

@case((3,))
def worklist_grown_while_it_is_walked(x):
    # a breadth-first worklist: the loop appends to the list it walks, and reaches what it appended
    # (a snapshot of the list at the loop's start stopped after the first item)
    queue = [x]
    sums = []
    for item in queue:
        sums.append(item.sum())
        if len(queue) < 4:
            queue.append(item * 2)
    return torch.stack(sums), len(queue)


@case((3,))
def items_removed_while_walking_are_skipped(x):
    pending = [1, 2, 3, 4, 5]
    total = x
    for v in pending:
        if v % 2:
            pending.remove(v)  # the next item shifts into this index and is skipped, as in eager
        total = total + v
    return total, pending


@case((3,), extra=lambda seed: ([1, 2],))
def list_passed_in_extended_inside_its_own_loop(x, sizes):
    for s in sizes:
        if len(sizes) < 4:
            sizes.append(s * 10)
        x = x + s
    return x


@case((3,))
def an_ended_list_iterator_stays_ended(x):
    parts = [x, x + 1]
    it = iter(parts)
    first = next(it)
    parts.append(x + 2)  # not yet ended: it reaches the new item
    rest = list(it)
    parts.append(x + 3)  # ended: it does not
    return first, rest, list(it)


@case((3,))
def builtins_use_up_a_shared_list_iterator(x):
    it = iter([("a", 1), ("b", 2)])
    first = dict(it)
    second = dict(it)  # nothing left
    nums = iter([9, 4, 1, 6])
    next(nums)
    top = max(nums)  # of what is left: 6, not 9
    pairs = iter([("k", 3), ("v", 4)])
    d = {}
    d.update(pairs)
    return x + top, first, second, d, list(nums), list(pairs)


@case((3,))
def islice_leaves_the_rest_of_a_list_iterator(x):
    it = iter([0, 1, 2, 5, 7])
    head = list(itertools.islice(it, 2))
    return x + sum(head), list(it)


@case((3,))
def enumerate_broken_out_of_leaves_the_rest(x):
    it = iter([4, 5, 6, 7])
    for i, v in enumerate(it):
        if i == 1:
            break
    return x + v, list(it)


@case((3,))
def update_from_a_generator_that_reads_the_dict(x):
    # each pair is set before the generator makes the next: len(d) grows as eager's does
    d = {0: 1}
    d.update((len(d), z) for z in range(3))
    return x + len(d), list(d.items())


@case((3,))
def enumerate_with_a_positional_start(x):
    # enumerate(xs, 1): the start is a number, not a second iterable (it broke the graph before)
    y = x * 2
    total = 0
    for i, v in enumerate([1, 2, 3], 1):
        total = total + v * i
    return y + total, list(enumerate("ab", 5))



# ---- x.__class__ of builtin values (peft's get_layer_status asks `attr.__class__.__name__` of each
# of a layer's attributes, bound methods among them) ----
class _Layer:
    def scale(self):
        return 2


@case((3,))
def class_of_builtin_values_by_its_name(x):
    layer = _Layer()
    names = [v.__class__.__name__ for v in (layer.scale, {"a": 1}, {"a": 1}.items(), iter([1]), reversed([1, 2]))]
    fn = lambda: 1  # noqa: E731
    return x * layer.scale(), names, fn.__class__ is type(fn), type(iter([x])).__name__, type(reversed((1, 2))).__name__


DIFFERS["class_of_builtin_values_by_its_name"] = (
    (1, 0), (0, 0), "TorchDynamo 2.13 raises AttributeError inside the trace (a bound method's __class__) and runs it eagerly")
