"""Objects the transformed code of a split frame refers to (never instantiated by users)."""
import torch


class GradModeExit:
    """Stands for a `with torch.no_grad()/enable_grad()/set_grad_enabled(b)` block's __exit__ when a
    frame is split inside the block: the resume function keeps it on its stack where the block's
    exit and exception handler call it, and it restores the grad mode the block saw on entry."""
    __slots__ = ("mode",)

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, *exc_info):
        torch._C._set_grad_enabled(self.mode)
        return None

    def __repr__(self):
        return f"<restore grad mode {self.mode}>"


RESTORE_GRAD = (GradModeExit(False), GradModeExit(True))
