# memsnap: the two set-up commands of the README are `make demo` and `make test`.
# Both install what is missing (scripts/setup, apt-get) and build incrementally.

BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=
# ccache when present, decided when CMake configures (scripts/setup installs
# it: a fresh machine has it only after `setup` ran). The CLI's build and the
# wheel's (scripts/python_wheel) compile the core with the same flags and the
# same compiler, $(CXX), exported: the wheel's compile of the core is then
# ccache hits (its generated include folder differs, which ccache's
# preprocessor mode does not see), and `make test` compiles the core once
# for both.
LAUNCHER     = $$(command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CXX
EXAMPLE     ?= examples/training_steps.pickle.gz
EXAMPLE_B   ?= examples/training_steps_larger_batch.pickle.gz
DEMO_HTML   ?= $(BUILD)/demo_overlay.html

.PHONY: all setup build demo check test test-release test-fast test-asan test-python docs wheel dist \
        test-dist fuzz bench format lint clean

all: build

setup:
	@scripts/setup

$(BUILD)/build.ninja:
	@scripts/setup build
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON $(LAUNCHER) $(CMAKE_FLAGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The headline job on the bundled pair (the same training run with a 1.5x
# larger batch): why does B peak higher than A, and both on one timeline.
# It builds the memsnap binary alone, not the tests.
demo: $(BUILD)/build.ninja
	cmake --build $(BUILD) --target memsnap -j $(JOBS)
	$(BUILD)/memsnap compare $(EXAMPLE) $(EXAMPLE_B) --top 8
	$(BUILD)/memsnap plot $(EXAMPLE) $(EXAMPLE_B) --labels "batch 1x" "batch 1.5x" -o $(DEMO_HTML)
	@echo "make demo: the overlay of both runs is $(DEMO_HTML) (one offline HTML file: open it in a browser)"

# Tests carry CTest labels (tests/CMakeLists.txt; docs/development.md, "Tests"): unit, cli,
# golden, fixtures, browser, cluster, slow, install, bench, gpu.
#
# The fast tier, for development: unit tests, the drivers on generated and
# bundled inputs, the golden outputs; not the real fixtures, the browser, the
# Slurm cluster or what is labelled slow. Another tier, say the fixtures:
# make check CHECK_LABELS=fixtures CHECK_EXCLUDE=
CHECK_LABELS  ?= ^(unit|cli|golden)$$
CHECK_EXCLUDE ?= ^(slow|fixtures)$$
check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L '$(CHECK_LABELS)' \
	  $(if $(CHECK_EXCLUDE),-LE '$(CHECK_EXCLUDE)')

# Everything: unit tests, differential tests against CPython's pickle, refusal
# corpus, golden outputs, real fixtures, browser, cluster, fuzz corpus; then
# the same under ASan and UBSan, less the golden outputs, the reference
# comparisons on the real fixtures (label `reference`, tests/CMakeLists.txt),
# the page in Chromium and the Slurm cluster (labels `browser`, `cluster`: the
# binary they run writes the same page and summaries as the cli tests that do
# run under ASan; they cost about 150 s of the CI machine's budget there) and
# the benchmark harness's smoke test (label `bench`: it times the commands the
# cli tests run; 57 s under ASan here).
test: test-release docs test-python test-asan

# The documentation site (mkdocs + Material, pinned in docs/requirements.txt,
# in a venv of its own), built --strict: a broken link or anchor fails it.
# docs/reports.md and docs/json-schema.md are written from the report table
# and the schemas; their tests (report_docs, json_schema) fail while they differ.
docs:
	scripts/docs_site "$(PYTHON)" "$(BUILD)/docs-venv" "$(BUILD)/site"

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The former name of the release half.
test-fast: test-release

# -O1 -g1 (line tables, enough for ASan's stack traces): half the compile time
# of -O2 -g (598 s of CPU against 1,195 s for a clean build on 2 cores) for
# 6% more test time (300 s against 283 s). Compiled by clang (ASAN_CXX),
# whose sanitizer instrumentation compiles in about half GCC 12's time
# (src/cli/plot.cc: 9.9 s against 18.1 s; the UBSan half costs GCC the
# most), and which gives the suite a second compiler's warnings. An
# existing $(ASAN_BUILD) keeps the compiler it was configured with.
ASAN_CXX    ?= clang++
$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
	  -DCMAKE_CXX_COMPILER=$(ASAN_CXX) "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	  -DMEMSNAP_SANITIZE=ON -DMEMSNAP_INSTALL=OFF $(LAUNCHER) $(CMAKE_FLAGS)

test-asan: setup $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE '^(golden|reference|browser|cluster|bench)$$'

# The Python package (pyproject.toml): `pip wheel .` with build isolation, as
# `pip install .` builds it (scikit-build-core and nanobind come from PyPI,
# pinned in pyproject.toml), then `auditwheel repair`: the C++ libraries go
# inside the wheel and the tag says which glibc it needs. The wheel lands in
# $(WHEELHOUSE). $(WHEEL_BUILD) keeps CMake's build between runs.
PYTHON      ?= python3
PY_TOOLS    ?= $(BUILD)/py-tools
PY_TEST     ?= $(BUILD)/py-test
WHEEL_BUILD ?= $(BUILD)/wheel-build
WHEELHOUSE  ?= $(BUILD)/wheelhouse
wheel: setup
	scripts/python_wheel "$(PYTHON)" "$(PY_TOOLS)" "$(WHEEL_BUILD)" "$(WHEELHOUSE)"

# The Python tests run against the installed wheel, in a fresh venv (never
# the build tree): python/tests, the API against the CLI's --json, and the
# example notebook executed.
test-python: wheel build
	scripts/python_test "$(PYTHON)" "$(PY_TEST)" "$(WHEELHOUSE)" "$(BUILD)/memsnap"

# What a user installs without a compiler (docs/install.md, docs/release.md):
# the static executable dist/memsnap-linux-x86_64 and the wheels, each
# built in a folder of its own under $(DIST_BUILD).
DIST        ?= dist
DIST_BUILD  ?= build-dist
dist: setup
	JOBS=$(JOBS) scripts/dist "$(DIST)" "$(DIST_BUILD)" all

# The tests of what dist wrote (label dist): the executable in an empty root,
# each wheel in a fresh venv with the machine's compilers, headers and C++
# libraries hidden. They skip where $(DIST) lacks what they test.
test-dist: build
	cd $(BUILD) && ctest --output-on-failure -L '^dist$$'

# Coverage-guided fuzzing with libFuzzer (clang): fuzz_pickle_vm (the VM and
# the decoder) and fuzz_snapshot (whatever decodes, through every analysis and
# renderer). New inputs go to $(FUZZ_BUILD)/new-<target> (read with
# fuzz/corpus, which stays as committed); a crash is written to the current
# folder: minimize it and commit it to fuzz/corpus as regression_<what>.
# FUZZ_SECONDS=60 per target by default.
FUZZ_SECONDS ?= 60
fuzz: setup
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
	  -DMEMSNAP_INSTALL=OFF -DCMAKE_CXX_COMPILER=clang++ -DMEMSNAP_FUZZ=ON $(LAUNCHER)
	cmake --build $(FUZZ_BUILD) --target fuzz_pickle_vm fuzz_snapshot -j $(JOBS)
	mkdir -p $(FUZZ_BUILD)/new-fuzz_pickle_vm $(FUZZ_BUILD)/new-fuzz_snapshot
	$(FUZZ_BUILD)/fuzz_pickle_vm -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	  $(FUZZ_BUILD)/new-fuzz_pickle_vm fuzz/corpus
	$(FUZZ_BUILD)/fuzz_snapshot -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 \
	  $(FUZZ_BUILD)/new-fuzz_snapshot fuzz/corpus

# Speed and memory against `python3 -c "pickle.load(...)"` on generated files.
# Then the Python package (load + parse, to_pandas) against the CLI and pickle.load.
bench: build wheel
	python3 bench/run_bench.py --memsnap $(BUILD)/memsnap
	python3 bench/python_bench.py --memsnap $(BUILD)/memsnap --wheelhouse $(WHEELHOUSE)

format:
	clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'include/*.h' 'tests/*.cc' 'tests/*.h' 'fuzz/*.cc')

lint: build
	clang-tidy -p $(BUILD) --quiet $$(git ls-files 'src/*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
