# lingen: build, test, run. See README.md.
CC      ?= cc
OPT     ?= -O3 -march=native -fno-trapping-math
CFLAGS  ?= $(OPT) -g
# -fopenmp-simd: the vector loops' "omp simd" reductions; the threads are lingen's own (threads.h)
# -fPIC: every object can also go into a shared library (the command runs as fast: docs/speed.md);
# -fno-semantic-interposition lets calls inside such a library be inlined and bound directly.
CFLAGS  += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -Isrc -Iinclude -fopenmp-simd -fPIC -fno-semantic-interposition
LDLIBS  += -lopenblas -lcjson -lpng -lgif -lz -lm -lpthread
PYTHON  ?= /usr/bin/python3
# CUDA=1: also the GPU backend (src/cuda/, --device cuda), in its own build folder.
CUDA    ?= 0
# MPI=1: sample and eval split over the ranks of an MPI job (src/engine/shard.c), built with mpicc.
MPI     ?= 0
BUILD   ?= $(if $(filter 1,$(CUDA)),build-cuda,build)$(if $(filter 1,$(MPI)),-mpi)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/lingen
MANDIR  ?= $(PREFIX)/share/man/man1
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
# The Python module's folder, where Debian's python3 looks: dist-packages of /usr (packages), or
# of /usr/local and the like (one per Python version)
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages)
export LINGEN_DATA ?= $(if $(wildcard ../shared/data/mnist),$(abspath ../shared/data),$(abspath data))

# src/ in layers, a folder each (docs/code.md; tests/test_cli_layers.sh checks the includes); the
# objects side by side in $(BUILD), so no two files may share a name
SRC     := $(wildcard src/*/*.c)
OBJ     := $(patsubst %.c,$(BUILD)/%.o,$(notdir $(SRC)))
$(if $(word $(words $(OBJ)),$(sort $(OBJ))),,$(error two files in src/ share a name))
vpath %.c $(sort $(dir $(SRC)))
LIBOBJ  := $(filter-out $(BUILD)/main.o,$(OBJ))
TESTS   := $(patsubst tests/%.c,$(BUILD)/%,$(wildcard tests/test_*.c))
# liblingen: every layer's objects but the command line's, and but the files and pictures only
# the command line writes; its soname's number and its version from include/lingen.h
LIB_OUT := $(patsubst %,$(BUILD)/%.o,image anim output ceiling paper dataset)
LIB_OBJ  = $(filter-out $(LIB_OUT) $(patsubst src/cli/%.c,$(BUILD)/%.o,$(wildcard src/cli/*.c)),$(LIBOBJ))
LIB_LIBS := -lopenblas -lcjson -lm -lpthread
LIB_ABI := $(shell sed -n 's/^\#define LINGEN_ABI //p' include/lingen.h)
LIB_VERSION := $(shell sed -n 's/^\#define LINGEN_VERSION "\(.*\)"/\1/p' include/lingen.h)

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
NVFLAGS   += -Xcompiler -fPIC
CFLAGS    += -DLINGEN_CUDA
# every src/cuda/*.cu, an object each beside the C ones (so no stem may be a src/*/*.c's too)
CUOBJ     := $(patsubst src/cuda/%.cu,$(BUILD)/%.o,$(wildcard src/cuda/*.cu))
$(if $(filter $(CUOBJ),$(OBJ)),$(error a .cu and a .c both make $(filter $(CUOBJ),$(OBJ))))
OBJ       += $(CUOBJ)
LIBOBJ    += $(CUOBJ)
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
LIB_LIBS  += -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
endif

.PHONY: all deps data check-data run test test-c test-py test-cli test-lib test-lib-asan test-slow asan clean install uninstall lib FORCE
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

# -MMD -MP: each object's header dependencies, written beside it and read back below; the flags'
# stamp rebuilds every object when the compiler or its flags change (a .d file written before a
# source moved names its old path: "making" that path rebuilds the object)
src/%.c: ; @:
$(BUILD)/%.o: %.c $(BUILD)/cflags.stamp | $(BUILD)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# liblingen, shared (exporting lingen.h's functions only: lingen.map) and static (one object
# whose other names are made local, so none clashes with a program's).
lib: $(BUILD)/liblingen.so.$(LIB_ABI) $(BUILD)/liblingen.a
ifeq ($(MPI),1)
$(BUILD)/liblingen.so.$(LIB_ABI) $(BUILD)/liblingen.a:
	@echo "liblingen is built without MPI: make lib without MPI=1" >&2; exit 2
else
$(BUILD)/liblingen.so.$(LIB_ABI): $(LIB_OBJ) src/lib/lingen.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,liblingen.so.$(LIB_ABI) -Wl,--version-script=src/lib/lingen.map \
	  -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LIB_LIBS)
$(BUILD)/liblingen.a: $(LIB_OBJ)
	$(CC) $(CFLAGS) -r -nostdlib -o $(BUILD)/liblingen-all.o $(LIB_OBJ)
	objcopy --wildcard --keep-global-symbol='lingen_*' $(BUILD)/liblingen-all.o
	rm -f $@ && ar rcs $@ $(BUILD)/liblingen-all.o
endif

# each src/cuda/*.cu on its own (no -rdc: a kernel is launched from its own file)
$(BUILD)/%.o: src/cuda/%.cu | $(BUILD)
	$(NVCC) $(NVFLAGS) -DLINGEN_CUDA -Isrc -MMD -MP -c -o $@ $<

# The GPU tests and benchmark (plain C, no cmocka: they also run from a packed folder).
$(BUILD)/test_cuda $(BUILD)/bench_cuda: $(BUILD)/%: tests/cuda/%.c $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LIBOBJ) $(LDLIBS)

# A sampling step's products alone, timed (make bench-products; plain C, packed for other machines).
$(BUILD)/bench_products: tests/bench_products.c $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(LIBOBJ) $(LDLIBS)

$(BUILD)/test_%: tests/test_%.c $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -MMD -MP -Itests -o $@ $< $(LIBOBJ) $(LDLIBS) -lcmocka

$(BUILD):
	mkdir -p $(BUILD)

# The installed data directory is compiled into modelpath.o (the last place --model NAME looks):
# the stamp holds it, so that another PREFIX rebuilds that object.
$(BUILD)/datadir.stamp: FORCE | $(BUILD)
	@echo '$(DATADIR)' | cmp -s - $@ || echo '$(DATADIR)' > $@
$(BUILD)/modelpath.o: $(BUILD)/datadir.stamp
$(BUILD)/modelpath.o: CFLAGS += -DLINGEN_SHAREDIR='"$(DATADIR)"'

# The binary, the models, the compare plot script and the man page; the library, its header, its
# pkg-config file and the Python module (which is told where the library went). DESTDIR stages
# the tree; ldconfig runs for a real install into a system directory.
install: lingen lib
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR)/scripts $(DESTDIR)$(MANDIR)
	install -m 755 lingen $(DESTDIR)$(BINDIR)/lingen
	install -m 644 models/*.bin $(DESTDIR)$(DATADIR)/models/
	install -m 644 scripts/plot_compare.py $(DESTDIR)$(DATADIR)/scripts/
	install -m 644 docs/lingen.1 $(DESTDIR)$(MANDIR)/lingen.1
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PYTHONDIR)/lingen
	install -m 644 $(BUILD)/liblingen.a $(DESTDIR)$(LIBDIR)/liblingen.a
	install -m 755 $(BUILD)/liblingen.so.$(LIB_ABI) $(DESTDIR)$(LIBDIR)/liblingen.so.$(LIB_ABI)
	ln -sf liblingen.so.$(LIB_ABI) $(DESTDIR)$(LIBDIR)/liblingen.so
	install -m 644 include/lingen.h $(DESTDIR)$(INCLUDEDIR)/lingen.h
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(LIB_VERSION)|; s|@LIBS@|$(LIB_LIBS)|' src/lib/lingen.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/lingen.pc
	sed -e 's|^_LIBDIR = None$$|_LIBDIR = "$(LIBDIR)"|' python/lingen/__init__.py > $(DESTDIR)$(PYTHONDIR)/lingen/__init__.py
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig > /dev/null; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/lingen $(DESTDIR)$(MANDIR)/lingen.1 $(DESTDIR)$(DATADIR)/scripts/plot_compare.py
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/models/,$(notdir $(wildcard models/*.bin)))
	-rmdir $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR)/scripts $(DESTDIR)$(DATADIR) 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,liblingen.a liblingen.so liblingen.so.$(LIB_ABI) pkgconfig/lingen.pc)
	rm -f $(DESTDIR)$(INCLUDEDIR)/lingen.h
	rm -rf $(DESTDIR)$(PYTHONDIR)/lingen

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
	@MAKE="$(MAKE)" bash tests/run_parts.sh test-c test-py test-cli test-lib asan

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
	  echo "== $$t"; ./$$t || { echo "!! $$t exited $$?"; fail=1; }; done; exit $$fail

# The matmul tests again on the other micro-kernels than this machine's: the portable C one
# (machines without AVX2), the AVX2 one where the build picked AVX-512, and AMX's tiles as C
# (matmul_amx.c, LINGEN_AMX_EMULATE) where the processor has none.
MATMUL_SRC := tests/test_matmul.c $(addprefix src/kernels/,matmul.c matmul_amx.c matmul_q8.c store.c product.c plan.c \
              threads.c adapt.c) src/io/settings.c src/io/util.c
MATMUL_LINK = $(CC) $(CFLAGS) -Itests -o $@ $(MATMUL_SRC) -lcmocka -lm -lpthread
$(BUILD)/test_matmul_portable: $(MATMUL_SRC) $(wildcard src/*/*.h tests/*.h) | $(BUILD)
	$(MATMUL_LINK) -U__AVX2__ -U__AVX512F__
$(BUILD)/test_matmul_avx2: $(MATMUL_SRC) $(wildcard src/*/*.h tests/*.h) | $(BUILD)
	$(MATMUL_LINK) -U__AVX512F__
$(BUILD)/test_matmul_amx: $(MATMUL_SRC) $(wildcard src/*/*.h tests/*.h) | $(BUILD)
	$(MATMUL_LINK) -DLINGEN_AMX_EMULATE

test-py: $(BUILD)/test_transformer
	cd tests && $(PYTHON) -m unittest -v test_reference.py test_train.py test_ddp.py test_readme_check.py

# Checks too slow for every make test: the CIFAR-10 training smoke test (a tiny model trained,
# exported, and its float64 reference stepped through 3072 positions in Python).
test-slow: $(BUILD)/test_transformer
	cd tests && LINGEN_SLOW_TESTS=1 $(PYTHON) -m unittest -v test_reference.TrainSmoke.test_cifar10

# liblingen and the Python module, installed into a staging folder and used from there
# (tests/lib/run.sh)
test-lib: lingen lib
	@MAKE="$(MAKE)" PYTHON="$(PYTHON)" BINDIR="$(BINDIR)" LIBDIR="$(LIBDIR)" PYTHONDIR="$(PYTHONDIR)" bash tests/lib/run.sh

# every tests/test_cli*.sh, one topic each
test-cli: lingen
	@fail=0; for t in tests/test_cli*.sh; do echo "== $$t"; bash $$t || { echo "!! $$t exited $$?"; fail=1; }; done; \
	  exit $$fail

# The whole C test suite under AddressSanitizer + UndefinedBehaviorSanitizer, and liblingen built
# so under its C test and the Python module's tests.
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-c test-lib-asan

# liblingen of this build (make asan: sanitized) under tests/lib's programs, from the source tree
# (tests/lib/run.sh --tree).
test-lib-asan: $(BUILD)/liblingen.so.$(LIB_ABI) $(BUILD)/lingen
	@PYTHON="$(PYTHON)" CFLAGS="$(CFLAGS)" ASAN_RT="$$($(CC) -print-file-name=libasan.so)" bash tests/lib/run.sh --tree $(BUILD)

clean:
	rm -rf build-cuda* build build-asan build-fuzz build-valgrind build-ship build-mpi lingen .lingen-cpu* .lingen-cuda*

# The compiler and flags every object was built with (as parsed: a target's own additions, such
# as modelpath.o's, are not in it): a change rebuilds them all.
CFLAGS_STAMP := $(CC) $(CFLAGS)
$(BUILD)/cflags.stamp: FORCE | $(BUILD)
	@echo '$(CFLAGS_STAMP)' | cmp -s - $@ || echo '$(CFLAGS_STAMP)' > $@

-include $(wildcard $(BUILD)/*.d $(BUILD)/lib/*.d)

# Developer targets: make test-cuda, bench, bench-cuda, mutate, fuzz, valgrind... (dev.mk)
include dev.mk
