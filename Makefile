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
# The slowest comparisons (marker shared_by_versions) are shared out among the versions that run, one
# share each (DV_SHARE: $(PYTHON) takes the first, .ci/other_pythons.sh share).
# The other versions' venvs and dynview._C are built before $(PYTHON)'s suite runs: its tests that
# record a trace on another version by subprocess and read it here (test_trace_versions.py) then
# run instead of skipping.
PYTEST := -m pytest -q -p no:cacheprovider -p no:benchmark -n $(JOBS) --dist loadfile
OTHERS_ON = [ "$${DV_OTHER_PYTHONS:-1}" != 0 ] || [ "$${REQUIRE_ALL:-0}" = 1 ]
test: build
	@t=$$(date +%s); ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) && echo "== ctest: $$(($$(date +%s) - t)) s"
	@if $(OTHERS_ON); then t=$$(date +%s); BUILD=$(BUILD) JOBS=$(JOBS) PYTHON=$(PYTHON) bash .ci/other_pythons.sh build \
	    && echo "== other versions' venvs and dynview._C: $$(($$(date +%s) - t)) s"; fi
	@t=$$(date +%s); share=$$(if $(OTHERS_ON); then BUILD=$(BUILD) PYTHON=$(PYTHON) bash .ci/other_pythons.sh share; fi) && \
	    DV_SHARE=$$share $(PYTHON) $(PYTEST) tests/python && echo "== Python $$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'): pytest $$(($$(date +%s) - t)) s"
	@if $(OTHERS_ON); then \
	    BUILD=$(BUILD) JOBS=$(JOBS) PYTHON=$(PYTHON) bash .ci/other_pythons.sh; \
	else echo "make test: the suite ran on CPython $$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') (DV_OTHER_PYTHONS=0: not on the others)"; fi

# C++ tests, then the engine, under AddressSanitizer + UndefinedBehaviorSanitizer, on $(PYTHON):
# python3 (3.11), or PYTHON=python3.12 / python3.13 for that version's engine, run in the venv
# `make test` uses for it (.venv-X.Y, created on first use). core_tests (no Python) is built once in
# build-asan; dynview._C is built per version (build-asan-py, build-asan-py-3.12, -3.13) with
# ASan + UBSan and the checked interpreter (every step's stack effect against the opcode table),
# linking build-asan's core and recorder, into a package copy (the normal module stays), and the
# engine suites run on it: engine cases, Python cases, resume functions, graph breaks, dynamic
# shapes, float inputs and side effects (attribute mutation, dict guards). The rest of tests/python (bytecode
# corpus, viewer, trace reader, CLI, Hugging Face models) is left out: it exercises core/, which
# core_tests covers, or is too slow under ASan. Leaks are checked in core_tests only (CPython and
# torch keep their own allocations to exit). PYTHONMALLOC=malloc: Python objects are allocated by
# malloc, so that ASan sees a use of an object after its last reference went (a refcount error).
SAN_V     := $(subst python,,$(OTHER_PY))
SAN_PY    := build-asan-py$(if $(SAN_V),-$(SAN_V))
SAN_TESTS := $(addprefix tests/python/,test_engine_cases.py test_python_cases.py test_resume_functions.py \
             test_graph_breaks.py test_dynamic_shapes.py test_attribute_mutation.py test_dict_guards.py \
             test_weakrefs.py test_outside_cells.py test_state_and_profilers.py test_compile_api.py \
             test_world_reads.py test_float_inputs.py)
sanitize:
	@$(MAKE) --no-print-directory deps PYTHON=$(if $(SAN_V),python3,$(PYTHON))
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_SANITIZE=ON -DDV_BUILD_PYTHON=OFF > build-asan.configure.log 2>&1 \
	    || (cat build-asan.configure.log; exit 1)
	cmake --build build-asan -j$(JOBS) --target core_tests
	@t=$$(date +%s); ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ./build-asan/core_tests \
	    && echo "== sanitize: core_tests $$(($$(date +%s) - t)) s"
	@py=$(if $(SAN_V),$$(BUILD=$(BUILD) JOBS=$(JOBS) PYTHON=python3 bash .ci/other_pythons.sh venv $(SAN_V)),$$(command -v $(PYTHON))) || exit 1; \
	rm -rf $(SAN_PY)/pkg && mkdir -p $(SAN_PY)/pkg/dynview && cp python/dynview/*.py $(SAN_PY)/pkg/dynview/ && \
	cmake -S . -B $(SAN_PY) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_SANITIZE=ON -DDV_BUILD_TESTS=OFF \
	    -DDV_PREBUILT_LIBS_DIR=$(CURDIR)/build-asan -DDV_PY_PACKAGE_DIR=$(CURDIR)/$(SAN_PY)/pkg/dynview \
	    -DPython3_EXECUTABLE=$$py > $(SAN_PY).configure.log 2>&1 || { cat $(SAN_PY).configure.log; exit 1; }; \
	cmake --build $(SAN_PY) -j$(JOBS) --target _C || exit 1; \
	t=$$(date +%s); \
	LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PYTHONMALLOC=malloc \
	    PYTHONPATH=$(CURDIR)/$(SAN_PY)/pkg:$(CURDIR)/tests/python DYNVIEW_BIN=$(CURDIR)/$(BUILD)/dynview \
	    $$py -m pytest -q -p no:cacheprovider -p no:benchmark -n $(JOBS) --dist loadfile $(SAN_TESTS) -k "not inductor and not viewer" \
	    && echo "== sanitize: engine suites on CPython $$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])') $$(($$(date +%s) - t)) s"

# The recorder's lock-free engine -> flusher stream under ThreadSanitizer.
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDV_TSAN=ON -DDV_BUILD_PYTHON=OFF
	cmake --build build-tsan -j$(JOBS) --target core_tests
	TSAN_OPTIONS=halt_on_error=1 ./build-tsan/core_tests "[recorder]"

bench: build
	@for b in tests/benchmarks/*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf $(BUILD) build-asan build-asan-py* $(BUILD)-3.12 $(BUILD)-3.13 $(BUILD)*.configure.log python/dynview/_C*.so
