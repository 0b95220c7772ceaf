"""The stdlib code-object corpus shared by the bytecode tests and benchmark.

Every .py file of the running interpreter's standard library (Lib/, without site-packages) is
compiled with the interpreter's own compiler, exactly as import would (same flags, optimize=-1),
and its code objects are collected by walking co_consts recursively. Compiling instead of
importing reaches module-level code objects too (import discards them) and runs nothing.
"""
import os
import sysconfig
import warnings


TEST_DIRS = ("test", "tests", "idle_test")


def is_test_file(path):
    """A file of the stdlib's own test suites (Lib/test/, .../tests/, idlelib/idle_test/)."""
    rel = os.path.relpath(path, sysconfig.get_paths()["stdlib"])
    return any(part in TEST_DIRS for part in rel.split(os.sep)[:-1])


def stdlib_files(include_tests=True):
    root = sysconfig.get_paths()["stdlib"]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in ("site-packages", "__pycache__")
                             and (include_tests or d not in TEST_DIRS))
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def walk(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c)


def module_codes(include_tests=True):
    """Top-level (module) code objects of the stdlib, one per file that compiles."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in stdlib_files(include_tests):
            try:
                with open(path, "rb") as f:
                    src = f.read()
                out.append(compile(src, path, "exec", dont_inherit=True))
            except (SyntaxError, ValueError, UnicodeDecodeError):
                continue  # lib2to3/test data files written in other Python versions
    return out


def all_codes(include_tests=True):
    return [c for m in module_codes(include_tests) for c in walk(m)]
