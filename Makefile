# lingen: build, test, run. See README.md.
CC      ?= cc
OPT     ?= -O3 -march=native
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -Isrc
LDLIBS  += -lopenblas -lcjson -lpng -lz -lm -lpthread
PYTHON  ?= /usr/bin/python3
BUILD   ?= build
export LINGEN_DATA ?= $(if $(wildcard ../shared/data/mnist),$(abspath ../shared/data),$(abspath data))

SRC     := $(wildcard src/*.c)
OBJ     := $(SRC:src/%.c=$(BUILD)/%.o)
LIBOBJ  := $(filter-out $(BUILD)/main.o,$(OBJ))
TESTS   := $(patsubst tests/%.c,$(BUILD)/%,$(wildcard tests/test_*.c))

.PHONY: all run test test-c test-py test-cli asan bench fixtures clean
all: lingen

lingen: $(OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard src/*.h) | $(BUILD)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/test_%: tests/test_%.c tests/testutil.h $(LIBOBJ) | $(BUILD)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(LIBOBJ) $(LDLIBS) -lcmocka

$(BUILD):
	mkdir -p $(BUILD)

# The main job: sample 16 digits with the shipped MNIST model.
run: lingen
	./lingen sample -n 16 -o samples.png

test: test-c test-py test-cli

test-c: $(TESTS)
	@set -e; for t in $(TESTS); do echo "== $$t"; ./$$t; done

test-py: $(BUILD)/test_transformer
	cd tests && $(PYTHON) -m unittest -v test_reference.py

test-cli: lingen
	bash tests/test_cli.sh

# The whole C test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-c

# Regenerate the golden fixtures from the PyTorch reference.
fixtures:
	$(PYTHON) scripts/make_fixtures.py tests/fixtures
	$(PYTHON) tests/gen_dmol_ref.py

clean:
	rm -rf build build-asan lingen
