# Makefile — front door. `make demo` and `make test` install dependencies, configure and build.
#   make demo       installs only what the demo needs, builds build/sheaf alone (unity batches: about half
#                   the CPU time of a clean build), runs the demo training job
#   make test       bootstrap + build + every test (ctest; python.wheel tests the wheel in fresh venvs
#                   with NumPy 2 and Debian's 1.24, scripts/test_wheel.sh) + 90 s of fuzzing
#   make test-asan  the same test suite built with AddressSanitizer + UBSan in build-asan/ (layers in unity
#                   batches, as `make demo` builds them; `make build` compiles one object per file)
#   make fuzz       every libFuzzer target (tests/fuzz/fuzz_*.cpp) for FUZZ_SECONDS in total (default 90;
#                   eval gets a third); FUZZ_TARGETS="npy idx" picks targets
#   make fuzz-long  the same for an hour (FUZZ_SECONDS=3600), e.g. before a release
#   make bench      installs the peers (PyTorch, JAX, IREE), runs bench/run.py → bench/results.md
#   make docs       regenerates docs/reference.md from the builtin table (a test fails when it is stale)
#   make install    installs bin/sheaf, lib/sheaf/libsheaf_mpi.so, share/sheaf/lib/*.shf, share/doc/sheaf and the
#                   Python module in lib/python3.X/site-packages (dist-packages for Debian's Python) (PREFIX=/usr/local)
#   pip install .   the `sheaf` command and `import sheaf` into a Python environment (pyproject.toml, docs/python.md)
#   make bench-obs  builds build-noobs/ (-DSHEAF_OBSERVABILITY=OFF), runs bench/obs_overhead.py → bench/obs_results.md
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 90
CMAKE_FLAGS ?= -G Ninja -DSHEAF_WERROR=ON
# ccache keys on paths relative to the repository: build/ and the wheels' build-wheel-*/ share objects,
# and so do clones in other folders.
export CCACHE_BASEDIR ?= $(CURDIR)

.PHONY: all bootstrap build test test-asan fuzz fuzz-long demo bench bench-obs docs install clean

all: build

bootstrap:
	@bash scripts/bootstrap.sh

build: bootstrap
	cmake -S . -B build $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release -DSHEAF_UNITY_BUILD=OFF -DSHEAF_TESTS=ON
	cmake --build build -j $(JOBS)

test: build
	ctest --test-dir build --output-on-failure -j $(JOBS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/run_fuzz.sh

test-asan: bootstrap
	cmake -S . -B build-asan $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug -DSHEAF_SANITIZE=ON -DSHEAF_UNITY_BUILD=ON
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j $(JOBS)

fuzz: bootstrap
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/run_fuzz.sh

fuzz-long: bootstrap
	FUZZ_SECONDS=3600 bash scripts/run_fuzz.sh

docs: build
	./build/sheaf reference -o docs/reference.md

install: build
	cmake --install build --prefix $(PREFIX) --strip
	@ls -l $(DESTDIR)$(PREFIX)/bin/sheaf | awk '{print "installed " $$9 " (" $$5 " bytes, stripped)"}'

demo:
	@bash scripts/bootstrap.sh demo
	cmake -S . -B build $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release -DSHEAF_UNITY_BUILD=ON -DSHEAF_TESTS=OFF
	cmake --build build -j $(JOBS) --target sheaf
	./build/sheaf examples/mlp/train.shf

bench: build
	bash scripts/bench_deps.sh
	python3 bench/run.py --sheaf build/sheaf --out bench/results.md

# The cost of the observability hook: build/sheaf (compiled in) against build-noobs/sheaf (compiled out).
bench-obs: build
	cmake -S . -B build-noobs $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release -DSHEAF_OBSERVABILITY=OFF
	cmake --build build-noobs --target sheaf -j $(JOBS)
	python3 bench/obs_overhead.py --on build/sheaf --off build-noobs/sheaf --out bench/obs_results.md

clean:
	rm -rf build build-asan build-fuzz build-noobs build-wheel-*
