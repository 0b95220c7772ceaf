"""Generators made in the compiled code, written the way libraries write them: a generator's body
runs only as its items are taken, interleaved with the code that takes them (a log appended to by
the generator and read by the loop), `yield from` with a sub-generator's return value, generators
taken partly (next, any/all, a loop left early, islice), passed through zip/enumerate/map/chain, and
module forwards iterating their layers through a generator. Appended to python_cases.CASES; each
runs against eager and torch._dynamo.explain."""
import itertools

import torch
import torch.nn as nn

from python_cases import case, module_case


def _tagged(xs, log, tag):
    for x in xs:
        log.append(tag)
        yield x


@case((3,))
def generator_body_interleaves_with_loop(x):
    log = []
    out = []
    for y in _tagged([x, x + 1], log, "g"):
        out.append(y * len(log))
    return out, log


def _sub(x):
    yield x
    yield x + 1
    return x * 3


def _outer(x):
    r = yield from _sub(x)
    yield r
    yield from [x - 1, x - 2]


@case((3,))
def yield_from_gives_the_sub_generators_return_value(x):
    return list(_outer(x))


@case((3,))
def generator_expression_taken_partly_then_twice(x):
    g = (t * 2 for t in (x, x + 1, x + 2))
    first = next(g)
    return first, list(g), list(g), next(g, None)


def _counter(x, log):
    i = 0
    while True:
        log.append(i)
        yield x * i
        i += 1


@case((3,))
def endless_generator_left_early(x):
    log = []
    out = []
    for y in _counter(x, log):
        if len(log) > 3:
            break
        out.append(y)
    return out, log


@case((3,))
def zip_of_generators_interleaves(x):
    log = []
    pairs = [a * len(log) + b for a, b in zip(_tagged([x, x], log, "a"), _tagged([x, x, x], log, "b"))]
    return pairs, log


@case((3,))
def enumerate_generator_sees_state_as_taken(x):
    log = []
    return [t * len(log) + i for i, t in enumerate(_tagged([x, x, x], log, "e"), start=1)], log


@case((3,))
def any_all_stop_taking_items(x):
    log = []
    hit = any(v > 1 for v in _tagged([1, 2, 3], log, "q"))
    log2 = []
    every = all(v < 2 for v in _tagged([1, 2, 3], log2, "w"))
    return x + 1, hit, every, log, log2


@case((3,))
def chain_of_generators_is_lazy(x):
    log = []
    out = [t * len(log) for t in itertools.chain(_tagged([x], log, "a"), _tagged([x, x], log, "b"))]
    return out, log


@case((3,))
def map_over_generator_reads_state(x):
    log = []
    return list(map(lambda t: t * len(log), _tagged([x, x + 1], log, "m"))), log


@case((3,))
def islice_of_endless_generator(x):
    log = []
    return list(itertools.islice(_counter(x, log), 3)), log


@case((3,))
def sum_and_max_of_generator_expressions(x):
    return sum(t * 2 for t in (x, x + 1)) + max(len(s) for s in ["ab", "c"])


def _windows(xs, n):
    for i in range(len(xs) - n + 1):
        yield xs[i:i + n]


@case((6,))
def sliding_windows_generator(x):
    return [w.sum() for w in _windows(x, 3)]


@case((3,))
def generator_raises_inside_loop_is_caught_by_caller(x):
    try:
        for y in _sub(x):
            raise ValueError("stop")
    except ValueError:
        return x + 1
    return x


class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def _named_layers(self):
        for i, layer in enumerate(self.layers):
            yield f"layer{i}", layer

    def forward(self, x):
        hidden = []
        for name, layer in self._named_layers():
            x = torch.relu(layer(x))
            hidden.append(name)
        return x, hidden


module_case(_Stack, (2, 4))
