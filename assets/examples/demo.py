"""dynview demo (for now): disassemble a real PyTorch-style function with dynview's C++ core,
next to CPython's own `dis`, then re-assemble it and run both versions.

The listing is produced twice by dynview: in-process (dynview._C.disassemble) and by the `dynview`
executable from a recorded code object (JSON), which runs without Python -- the way the viewer
will read code objects from a trace.
"""
import dis
import io
import os
import shutil
import subprocess
import sys
import tempfile
import types

import torch

import dynview
from dynview import _C


def mlp_block(x, w1, b1, w2, scale=0.5):
    h = torch.relu(x @ w1 + b1)
    if h.shape[-1] > 4:
        h = h * scale
    out = []
    for i in range(2):
        out.append(h[:, i].sum())
    try:
        y = h @ w2
    except RuntimeError as e:
        raise ValueError(f"bad shapes: {e}") from e
    return y, out


def find_cli():
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("DYNVIEW_BIN"), os.path.join(here, "..", "..", "build", "dynview"),
                 shutil.which("dynview")):
        if cand and os.path.exists(cand):
            return cand
    return None


def main():
    ref = io.StringIO()
    dis.dis(mlp_block, file=ref)
    ours = dynview.disassemble(mlp_block)
    print("=== dynview.disassemble(mlp_block) ===")
    print(ours)
    print(f"identical to dis.dis: {ours == ref.getvalue()}")

    cli = find_cli()
    if cli:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(_C.code_json(mlp_block))
        text = subprocess.run([cli, "disasm", f.name], capture_output=True, text=True, check=True).stdout
        os.unlink(f.name)
        print(f"`dynview disasm` (no Python) identical to dis.dis: {text == ref.getvalue()}")

    code = dynview.reassemble(mlp_block)
    same = all(getattr(code, a) == getattr(mlp_block.__code__, a)
               for a in ("co_code", "co_linetable", "co_exceptiontable", "co_stacksize"))
    print(f"re-assembled code byte-identical: {same}")
    g = types.FunctionType(code, mlp_block.__globals__, "mlp_block", mlp_block.__defaults__)
    torch.manual_seed(0)
    args = (torch.randn(3, 8), torch.randn(8, 6), torch.randn(6), torch.randn(6, 2))
    y0, o0 = mlp_block(*args)
    y1, o1 = g(*args)
    torch.testing.assert_close(y0, y1)
    torch.testing.assert_close(o0, o1)
    print("re-assembled function runs and matches eager: True")
    return 0 if ours == ref.getvalue() and same else 1


if __name__ == "__main__":
    sys.exit(main())
