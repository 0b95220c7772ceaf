# dynview: the README's two set-up commands are `make demo` and `make test`.
PYTHON ?= python3
BUILD  ?= build
JOBS   ?= $(shell nproc)
export PYTHONPATH := $(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))
export DYNVIEW_BIN := $(CURDIR)/$(BUILD)/dynview

.PHONY: deps build demo test test-cpp test-python sanitize tsan bench clean

deps:
	@PYTHON=$(PYTHON) bash .ci/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	    -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) > $(BUILD).configure.log 2>&1 \
	    || (cat $(BUILD).configure.log; exit 1)
	@cmake --build $(BUILD) -j$(JOBS)

# PYTHON=python3.12 (or 3.13): the viewer and C++ side built with python3, the demo run on that
# version in the venv `make test` uses for it (created on first use).
OTHER_PY := $(filter python3.12 python3.13,$(notdir $(PYTHON)))
ifneq ($(OTHER_PY),)
demo:
	@$(MAKE) --no-print-directory build PYTHON=python3
	@BUILD=$(BUILD) JOBS=$(JOBS) PYTHON=python3 bash .ci/other_pythons.sh demo $(subst python,,$(OTHER_PY))
else
demo: build
	$(PYTHON) assets/examples/demo.py
endif

# The whole suite on $(PYTHON) (3.11), then the Python suite on every other supported CPython found
# (3.12, 3.13: each in a venv it creates, .venv-X.Y, with its own dynview._C); says which ran.
# REQUIRE_ALL=1 (.ci/run) fails if one of 3.11, 3.12, 3.13 is missing; DV_OTHER_PYTHONS=0 runs only
# $(PYTHON)'s. Each pytest run uses every core (pytest-xdist, one test file per worker at a time).
PYTEST := -m pytest -q -p no:cacheprovider -p no:benchmark -n $(JOBS) --dist loadfile
test: build
	@t=$$(date +%s); ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) && echo "== ctest: $$(($$(date +%s) - t)) s"
	@t=$$(date +%s); $(PYTHON) $(PYTEST) tests/python && echo "== Python $$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'): pytest $$(($$(date +%s) - t)) s"
	@if [ "$${DV_OTHER_PYTHONS:-1}" != 0 ] || [ "$${REQUIRE_ALL:-0}" = 1 ]; then \
	    BUILD=$(BUILD) JOBS=$(JOBS) PYTHON=$(PYTHON) bash .ci/other_pythons.sh; \
	else echo "make test: the suite ran on CPython $$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') (DV_OTHER_PYTHONS=0: not on the others)"; fi

# C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer (core has no Python dependency).
sanitize: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_SANITIZE=ON -DDV_BUILD_PYTHON=OFF
	cmake --build build-asan -j$(JOBS) --target core_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ./build-asan/core_tests
	@# The engine: dynview._C built with ASan + UBSan and the checked interpreter (every step's stack
	@# effect against the opcode table) into a package copy, and the engine suites run on it.
	rm -rf build-asan-py/pkg && mkdir -p build-asan-py/pkg/dynview && cp python/dynview/*.py build-asan-py/pkg/dynview/
	cmake -S . -B build-asan-py -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_SANITIZE=ON -DDV_BUILD_TESTS=OFF \
	    -DDV_PY_PACKAGE_DIR=$(CURDIR)/build-asan-py/pkg/dynview -DPython3_EXECUTABLE=$$(command -v $(PYTHON))
	cmake --build build-asan-py -j$(JOBS) --target _C
	LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    PYTHONPATH=$(CURDIR)/build-asan-py/pkg DYNVIEW_BIN=$(CURDIR)/$(BUILD)/dynview \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/python/test_graph_breaks.py tests/python/test_resume_functions.py \
	    tests/python/test_engine_cases.py tests/python/test_attribute_mutation.py -k "not inductor and not viewer"

# The recorder's lock-free engine -> flusher stream under ThreadSanitizer.
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_TSAN=ON -DDV_BUILD_PYTHON=OFF
	cmake --build build-tsan -j$(JOBS) --target core_tests
	TSAN_OPTIONS=halt_on_error=1 ./build-tsan/core_tests "[recorder]"

bench: build
	@for b in tests/benchmarks/*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf $(BUILD) build-asan $(BUILD)-3.12 $(BUILD)-3.13 $(BUILD)*.configure.log python/dynview/_C*.so
