# Developer targets, included by the Makefile: GPU tests and benchmarks, CPU benchmarks,
# mutation testing, fuzzing, valgrind, the golden fixtures, a binary for other machines.
.PHONY: mutate bench bench-products ship fixtures

# One-line semantic changes to src/, each built and run in a copy of the tree against the tests
# of its file: which of them no test notices (tests/mutate.sh; not part of make test). The last
# line: "N killed, N survived"; a change that no longer applies to the code stops it (exit 2).
mutate:
	bash tests/mutate.sh

# Speed figures (README.md), each a ratio measured in one run: threads under load, scaling with
# cores, the sgemm ceiling, PyTorch (scripts/bench.sh). LINGEN="cmd" runs that lingen, unbuilt.
bench: $(if $(LINGEN),,lingen)
	PYTHON=$(PYTHON) bash scripts/bench.sh

# Each of a step's products timed alone, at 64 rows (ROWS=, THREADS=, MODEL= to change).
bench-products: $(BUILD)/bench_products
	./$(BUILD)/bench_products $(or $(MODEL),models/mnist.bin) $(or $(ROWS),64) $(or $(THREADS),0)

# A binary for other x86-64 machines with AVX-512 (x86-64-v4: Xeons since Skylake-SP, AMD Zen 4),
# built into build-ship/lingen; tools/pack_remote.sh packs it with its shared libraries.
SHIP_ARCH ?= x86-64-v4
ship:
	$(MAKE) BUILD=build-ship OPT="-O3 -march=$(SHIP_ARCH) -mtune=sapphirerapids -fno-trapping-math" build-ship/lingen build-ship/bench_products

# Regenerate the golden fixtures from the PyTorch reference.
fixtures:
	$(PYTHON) scripts/make_fixtures.py tests/fixtures
	$(PYTHON) tests/gen_dmol_ref.py

# ---------------------------------------------------------------- CUDA (needs nvcc; a GPU to run)
# test-cuda: the GPU against the CPU (head outputs, bits/dim, sample grids byte for byte, the
# sampler's PMF, the start-up canary, memcheck), built as a user builds it: make CUDA=1 with the
# default flags. Another build: make test-cuda CUDA_BUILD=build-cuda-v3 OPT="-O3 -march=x86-64-v3".
# bench-cuda: GPU sampling speed beside the PyTorch step in one CUDA graph (scripts/bench_cuda.sh).
.PHONY: cuda test-cuda bench-cuda
CUDA_BUILD ?= build-cuda
cuda:
	$(MAKE) CUDA=1 BUILD=$(CUDA_BUILD) lingen $(CUDA_BUILD)/lingen $(CUDA_BUILD)/test_cuda $(CUDA_BUILD)/bench_cuda
test-cuda: cuda
	bash tests/cuda/run_tests.sh . $(CUDA_BUILD) && bash tests/cuda/memcheck.sh . $(CUDA_BUILD)
bench-cuda: cuda
	bash scripts/bench_cuda.sh . $(CUDA_BUILD)

# ---------------------------------------------------------------- fuzzing (fuzz/README.md)
# libFuzzer targets for every parser of outside input, built with clang + ASan + UBSan into
# build-fuzz/. `make fuzz` runs each in turn for FUZZ_SECONDS, from the seeds in
# fuzz/corpus/<target> (read only) into build-fuzz/corpus/<target> (what it finds).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ARGS    ?=
FUZZ_TARGETS := model dataset png args
FUZZ_CFLAGS  := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
                -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -Isrc
# Only the parsers and what they need: the fuzzers do not depend on the engine's files.
FUZZ_OBJ     := $(patsubst %,build-fuzz/%.o,util output safetensors model matmul matmul_amx matmul_q8 store plan settings \
                threads adapt dataset image args)
# A small input that makes a parser allocate hundreds of MB, or run for seconds, is a bug.
FUZZ_LIMITS  := -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256
# Per target: largest input, and options (args prints usage and errors: keep them quiet).
FUZZ_OPT_model   := -max_len=16384 -dict=fuzz/model.dict
FUZZ_OPT_dataset := -max_len=16384
FUZZ_OPT_png     := -max_len=8192 -dict=fuzz/png.dict
FUZZ_OPT_args    := -max_len=512 -close_fd_mask=3

.PHONY: fuzz fuzz-build fuzz-regress valgrind
.SECONDARY: $(FUZZ_OBJ)   # keep the objects between builds
build-fuzz/%.o: %.c | build-fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link -c -o $@ $<

build-fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) -lcjson -lpng -lz -lm -lpthread

build-fuzz:
	mkdir -p build-fuzz

fuzz-build: $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)

# One target at a time, at the lowest priority. Longer: make fuzz FUZZ_SECONDS=600;
# one target: make fuzz FUZZ_TARGETS=png; more libFuzzer flags: FUZZ_ARGS=-runs=1000000.
fuzz_run = echo "== fuzz_$(1) for $(FUZZ_SECONDS) s"; \
  mkdir -p build-fuzz/corpus/$(1) build-fuzz/artifacts; \
  nice -n 19 build-fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) $(FUZZ_LIMITS) -print_final_stats=1 \
    -artifact_prefix=build-fuzz/artifacts/$(1)- $(FUZZ_OPT_$(1)) $(FUZZ_ARGS) build-fuzz/corpus/$(1) fuzz/corpus/$(1)
fuzz: fuzz-build
	@set -e; $(foreach t,$(FUZZ_TARGETS),$(call fuzz_run,$(t));)

# The seeds and every saved crash input (fuzz/regressions/<target>-*), each run once.
fuzz-regress: fuzz-build
	@set -e; $(foreach t,$(FUZZ_TARGETS),echo "== fuzz_$(t): seeds and regressions"; \
	  build-fuzz/fuzz_$(t) $(FUZZ_LIMITS) $(wildcard fuzz/corpus/$(t)/* fuzz/regressions/$(t)-*) \
	    > build-fuzz/regress-$(t).log 2>&1 || { tail -30 build-fuzz/regress-$(t).log; exit 1; };)

# ---------------------------------------------------------------- valgrind
# memcheck on a short sample, eval, complete and info: any error or definite/indirect leak fails.
# One thread: OpenBLAS's thread pool only adds noise (its buffers are "possibly lost").
# Its own binary, in build-valgrind/, for a baseline valgrind can run: it does not emulate
# AVX-512, so the -march=native binary dies of SIGILL on a machine that has it.
VALGRIND := OPENBLAS_NUM_THREADS=1 valgrind -q --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect
VALGRIND_OPT := -O2 $(if $(filter x86_64,$(shell uname -m)),-march=x86-64-v2) -fno-trapping-math
VG := build-valgrind/lingen
valgrind:
	$(MAKE) BUILD=build-valgrind OPT="$(VALGRIND_OPT)" $(VG)
	$(VALGRIND) $(VG) sample --model tests/fixtures/tiny-linear-mnist.bin -n 2 --threads 1 -o build-valgrind/valgrind.png
	$(VALGRIND) $(VG) eval bits-per-dim --model tests/fixtures/tiny-linear-mnist.bin --limit 2 --threads 1
	$(VALGRIND) $(VG) complete --model tests/fixtures/tiny-linear-mnist.bin --index 0-1 --samples 2 --threads 1 -o build-valgrind/valgrind.png
	$(VALGRIND) $(VG) info

-include $(FUZZ_OBJ:.o=.d)
