"""Plain-Python cases for test_python_cases.py on objects of list subclasses (a Python class whose
one builtin base is list), made in the trace or passed in: their own methods, list's through
super(), operators, items written back to the caller's object. Appended to python_cases.CASES like
python_cases_more's."""
import torch

from python_cases import case


# ---- list subclasses (made in the trace, and passed in): their methods, list's own, and list's
# methods reached through super() ----
class FeatureList(list):  # a backbone's per-stage features, with helpers over them
    def last(self):
        return self[-1]

    def channels(self):
        return [t.shape[1] for t in self]


@case((2, 3, 8))
def list_subclass_collects_features_and_escapes(x):
    feats = FeatureList()
    for scale in (1.0, 0.5, 0.25):
        x = torch.relu(x * scale)
        feats.append(x)
    return feats, feats.last().sum(), feats.channels(), len(feats), isinstance(feats, list)


class TensorList(list):  # moves with its tensors, as detection code's lists of boxes do
    def to(self, *args, **kwargs):
        return type(self)([t.to(*args, **kwargs) for t in self])

    def __repr__(self):
        return f"TensorList(n={len(self)})"


@case((3,), (3,))
def list_subclass_rebuilt_by_type_self(x, y):
    boxes = TensorList([x, y * 2])
    moved = boxes.to(torch.float64)
    return moved, type(moved).__name__, moved[1].dtype, repr(moved), sum(moved)


class ScaledItems(list):  # item writes and appends go through the class, which calls list's
    def __init__(self, items, factor):
        super().__init__(items)
        self.factor = factor

    def __setitem__(self, i, value):
        super().__setitem__(i, value * self.factor)

    def append(self, value):
        super().append(value * self.factor)


@case((3,), (3,))
def list_subclass_overrides_setitem_and_append_with_super(x, y):
    items = ScaledItems([x], 2.0)
    items.append(y)
    items[0] = x + 1
    del items[1:]
    items.extend([y, x])
    return list(items), items.factor, len(items), bool(items), items.pop(0)


class NamedLayers(list):
    pass


@case((4,))
def list_subclass_operators_sort_and_unpack(x):
    parts = NamedLayers(x.split(1))
    parts.sort(key=lambda t: t.numel())  # by a constant key: stable
    parts.reverse()
    head = parts + [x.sum()]
    parts += [x.mean()]
    a, b, *rest = parts
    return head, type(head).__name__, parts, type(parts).__name__, a + b, len(rest), NamedLayers([1, 2]) == [1, 2], [0] * 2 + NamedLayers([3])


class History(list):  # a recorder kept by the caller
    def __init__(self):
        super().__init__()
        self.calls = 0


def _history(seed):
    h = History()
    h.append(torch.full((3,), float(seed)))
    return [h]


@case((3,), extra=_history)
def list_subclass_passed_in_appended_and_its_attribute_written(x, history):
    history.append(x * 2)
    history.calls += 1
    history[0] = history[0] + x
    return sum(history), len(history), history.calls


@case((3,), extra=lambda seed: [FeatureList([torch.ones(3) * seed, torch.arange(3.0)])])
def list_subclass_passed_in_read_through_its_methods(x, feats):
    return x * feats.last() + feats[0], feats.channels() if x.dim() == 2 else len(feats), feats[-2:]
