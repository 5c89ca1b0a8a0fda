# lingen: build, test, run. See README.md.
CC      ?= cc
OPT     ?= -O3 -march=native -fno-trapping-math
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -Isrc -fopenmp
LDLIBS  += -lopenblas -lcjson -lpng -lz -lm -lpthread -fopenmp
PYTHON  ?= /usr/bin/python3
# CUDA=1: also the GPU backend (src/cuda/, --device cuda), in its own build folder.
CUDA    ?= 0
# MPI=1: sample and eval split over the ranks of an MPI job (src/shard.c), built with mpicc.
MPI     ?= 0
BUILD   ?= $(if $(filter 1,$(CUDA)),build-cuda,build)$(if $(filter 1,$(MPI)),-mpi)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/lingen
MANDIR  ?= $(PREFIX)/share/man/man1
export LINGEN_DATA ?= $(if $(wildcard ../shared/data/mnist),$(abspath ../shared/data),$(abspath data))
# Tests: OpenMP threads that wait by sleeping, not spinning. On a machine busier than its cores a
# spinning thread holds a core its partner needs: a tiny sample took 0.3 s passive, 190 s spinning.
TEST_ENV := OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive}

SRC     := $(wildcard src/*.c)
OBJ     := $(SRC:src/%.c=$(BUILD)/%.o)
LIBOBJ  := $(filter-out $(BUILD)/main.o,$(OBJ))
TESTS   := $(patsubst tests/%.c,$(BUILD)/%,$(wildcard tests/test_*.c))

ifeq ($(MPI),1)
MPICC     ?= mpicc
ifeq ($(shell command -v $(MPICC)),)
$(error MPI=1 needs $(MPICC): install Open MPI (Debian: libopenmpi-dev openmpi-bin))
endif
CC        := $(MPICC)
CFLAGS    += -DLINGEN_MPI
endif

ifeq ($(CUDA),1)
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
# sm_90 (H100, H200) machine code, and PTX that newer GPUs compile when loading it
NVFLAGS   ?= -O3 -std=c++17 -gencode arch=compute_90,code=[sm_90,compute_90] -Xcompiler -Wall,-Wextra
CFLAGS    += -DLINGEN_CUDA
OBJ       += $(BUILD)/backend_cuda.o
LIBOBJ    += $(BUILD)/backend_cuda.o
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
endif

.PHONY: all deps data check-data run test test-c test-py test-cli test-slow asan bench bench-products ship fixtures clean mutate install uninstall FORCE
all: lingen

# ./lingen is the last build's, CPU or CUDA=1, with MPI=1 or not: a marker of its kind makes a
# switch relink it
LINGEN_KIND := .lingen-$(if $(filter 1,$(CUDA)),cuda,cpu)$(if $(filter 1,$(MPI)),-mpi)
lingen: $(OBJ) $(LINGEN_KIND)
	$(CC) $(CFLAGS) -o $@ $(OBJ) $(LDLIBS)

$(LINGEN_KIND):
	rm -f .lingen-cpu* .lingen-cuda* && touch $@

# lingen built inside $(BUILD), for builds with other flags (make valgrind)
$(BUILD)/lingen: $(OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard src/*.h) src/cuda/lingen_cuda.h | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/backend_cuda.o: src/cuda/backend_cuda.cu src/cuda/lingen_cuda.h $(wildcard src/*.h) | $(BUILD)
	$(NVCC) $(NVFLAGS) -DLINGEN_CUDA -Isrc -c -o $@ $<

# The GPU tests and benchmark (plain C, no cmocka: they also run from a packed folder).
$(BUILD)/test_cuda $(BUILD)/bench_cuda: $(BUILD)/%: tests/cuda/%.c $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

# A sampling step's products alone, timed (make bench-products; plain C, packed for other machines).
$(BUILD)/bench_products: tests/bench_products.c $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/test_%: tests/test_%.c tests/testutil.h $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(LIBOBJ) $(LDLIBS) -lcmocka

$(BUILD):
	mkdir -p $(BUILD)

# The installed data directory is compiled into modelpath.o (the last place --model NAME looks):
# the stamp holds it, so that another PREFIX rebuilds that object.
$(BUILD)/datadir.stamp: FORCE | $(BUILD)
	@echo '$(DATADIR)' | cmp -s - $@ || echo '$(DATADIR)' > $@
$(BUILD)/modelpath.o: $(BUILD)/datadir.stamp
$(BUILD)/modelpath.o: CFLAGS += -DLINGEN_SHAREDIR='"$(DATADIR)"'

# The binary, the models, the compare plot script and the man page; DESTDIR stages the tree.
install: lingen
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR)/scripts $(DESTDIR)$(MANDIR)
	install -m 755 lingen $(DESTDIR)$(BINDIR)/lingen
	install -m 644 models/*.bin $(DESTDIR)$(DATADIR)/models/
	install -m 644 scripts/plot_compare.py $(DESTDIR)$(DATADIR)/scripts/
	install -m 644 docs/lingen.1 $(DESTDIR)$(MANDIR)/lingen.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/lingen $(DESTDIR)$(MANDIR)/lingen.1 $(DESTDIR)$(DATADIR)/scripts/plot_compare.py
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/models/,$(notdir $(wildcard models/*.bin)))
	-rmdir $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR)/scripts $(DESTDIR)$(DATADIR) 2>/dev/null

# The Debian packages (installed only if missing).
deps:
	@bash scripts/install-deps.sh test

# The main job: sample 16 digits with the shipped MNIST model.
run:
	@bash scripts/install-deps.sh run
	$(MAKE) lingen
	./lingen sample -n 16 -o samples.png

# Every part runs even when one fails; the last line counts the test cases of all of them:
# "N passed, N failed" (tests/run_parts.sh says how).
test: deps check-data
	@MAKE="$(MAKE)" bash tests/run_parts.sh test-c test-py test-cli asan

# The datasets the tests read, in $(LINGEN_DATA): if any file is missing, one line that says which
# and how to get them (LINGEN_DATA=DIR for a copy, or make data).
check-data:
	@bash data/fetch.sh --check all "$(LINGEN_DATA)"

# Fetch them into $(LINGEN_DATA) (data/ unless set), checked by checksum: data/fetch.sh downloads,
# or copies from a local mirror with FROM=DIR.
data:
	@bash data/fetch.sh $(if $(FROM),--from "$(FROM)") all "$(LINGEN_DATA)"

# Each binary runs even after one failed; "!! NAME exited N" marks a failed one.
MATMUL_TESTS := $(BUILD)/test_matmul_portable $(BUILD)/test_matmul_avx2 $(BUILD)/test_matmul_amx
test-c: $(TESTS) $(MATMUL_TESTS)
	@fail=0; for t in $(TESTS) $(MATMUL_TESTS); do \
	  echo "== $$t"; $(TEST_ENV) ./$$t || { echo "!! $$t exited $$?"; fail=1; }; done; exit $$fail

# The matmul tests again on the other micro-kernels than this machine's: the portable C one
# (machines without AVX2), the AVX2 one where the build picked AVX-512, and AMX's tiles as C
# (matmul_amx.c, LINGEN_AMX_EMULATE) where the processor has none.
MATMUL_SRC := tests/test_matmul.c src/matmul.c src/matmul_amx.c src/matmul_q8.c src/threads.c src/util.c
MATMUL_LINK = $(CC) $(CFLAGS) -Itests -o $@ $(MATMUL_SRC) -lcmocka -lm -lpthread -fopenmp
$(BUILD)/test_matmul_portable: $(MATMUL_SRC) src/matmul.h src/matmul_amx.h | $(BUILD)
	$(MATMUL_LINK) -U__AVX2__ -U__AVX512F__
$(BUILD)/test_matmul_avx2: $(MATMUL_SRC) src/matmul.h src/matmul_amx.h | $(BUILD)
	$(MATMUL_LINK) -U__AVX512F__
$(BUILD)/test_matmul_amx: $(MATMUL_SRC) src/matmul.h src/matmul_amx.h | $(BUILD)
	$(MATMUL_LINK) -DLINGEN_AMX_EMULATE

test-py: $(BUILD)/test_transformer
	cd tests && $(TEST_ENV) $(PYTHON) -m unittest -v test_reference.py test_train.py test_ddp.py

# Checks too slow for every make test: the CIFAR-10 training smoke test (a tiny model trained,
# exported, and its float64 reference stepped through 3072 positions in Python).
test-slow: $(BUILD)/test_transformer
	cd tests && $(TEST_ENV) LINGEN_SLOW_TESTS=1 $(PYTHON) -m unittest -v test_reference.TrainSmoke.test_cifar10

# every tests/test_cli*.sh, one topic each
test-cli: lingen
	@fail=0; for t in tests/test_cli*.sh; do echo "== $$t"; $(TEST_ENV) bash $$t || { echo "!! $$t exited $$?"; fail=1; }; done; \
	  exit $$fail

# One-line semantic changes to src/, each built and run against test-c and test-cli in a copy
# of the tree: which of them no test notices (tests/mutate.sh; not part of make test).
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
# built into build-ship/lingen; scripts/dev/pack_remote.sh packs it with its shared libraries.
SHIP_ARCH ?= x86-64-v4
ship:
	$(MAKE) BUILD=build-ship OPT="-O3 -march=$(SHIP_ARCH) -mtune=sapphirerapids -fno-trapping-math" build-ship/lingen build-ship/bench_products

# The whole C test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-c

# Regenerate the golden fixtures from the PyTorch reference.
fixtures:
	$(PYTHON) scripts/make_fixtures.py tests/fixtures
	$(PYTHON) tests/gen_dmol_ref.py

clean:
	rm -rf build build-asan build-fuzz build-valgrind build-ship build-cuda build-mpi build-cuda-mpi lingen .lingen-cpu* .lingen-cuda*

# ---------------------------------------------------------------- CUDA (needs nvcc; a GPU to run)
# test-cuda: the GPU against the CPU (head outputs, bits/dim, the sampler's PMF, memcheck).
# bench-cuda: GPU sampling speed beside the PyTorch step in one CUDA graph (scripts/bench_cuda.sh).
.PHONY: cuda test-cuda bench-cuda
cuda:
	$(MAKE) CUDA=1 lingen build-cuda/test_cuda build-cuda/bench_cuda
test-cuda: cuda
	bash tests/cuda/run_tests.sh . build-cuda && bash tests/cuda/memcheck.sh . build-cuda
bench-cuda: cuda
	bash scripts/bench_cuda.sh . build-cuda

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
FUZZ_OBJ     := $(patsubst %,build-fuzz/%.o,util output safetensors model matmul matmul_amx matmul_q8 threads dataset image args)
# A small input that makes a parser allocate hundreds of MB, or run for seconds, is a bug.
FUZZ_LIMITS  := -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256
# Per target: largest input, and options (args prints usage and errors: keep them quiet).
FUZZ_OPT_model   := -max_len=16384 -dict=fuzz/model.dict
FUZZ_OPT_dataset := -max_len=16384
FUZZ_OPT_png     := -max_len=8192 -dict=fuzz/png.dict
FUZZ_OPT_args    := -max_len=512 -close_fd_mask=3

.PHONY: fuzz fuzz-build fuzz-regress valgrind
.SECONDARY: $(FUZZ_OBJ)   # keep the objects between builds
build-fuzz/%.o: src/%.c $(wildcard src/*.h) | build-fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

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
