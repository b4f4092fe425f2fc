# librdmasock build. `make` builds the library, tests and benchmarks into build/;
# `make test` runs the test suite; `make test-asan` runs it under ASan+UBSan.
CXX      ?= g++
BUILD    ?= build
SAN      ?=
OPT      ?= -O2
CXXFLAGS := -std=c++20 $(OPT) -g -Wall -Wextra -Wno-missing-field-initializers -fPIC -pthread \
            -Icommon -Ishim -MMD -MP $(EXTRA_CXXFLAGS)
LDLIBS   := -ldl -pthread
ifeq ($(SAN),asan)
CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
ifeq ($(SAN),tsan)
CXXFLAGS += -fsanitize=thread
LDFLAGS  += -fsanitize=thread
endif

COMMON_SRC := $(wildcard common/*.cpp)
SHIM_SRC   := $(wildcard shim/*.cpp)
UNIT_SRC   := $(wildcard tests/unit/*.cpp)
PROG_SRC   := $(wildcard tests/programs/*.cpp)
BENCH_SRC  := $(wildcard benchmarks/*.cpp)

obj = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC))
SHIM_OBJ   := $(call obj,$(SHIM_SRC))
UNIT_OBJ   := $(call obj,$(UNIT_SRC))
PROGRAMS   := $(patsubst tests/programs/%.cpp,$(BUILD)/%,$(PROG_SRC))
BENCHES    := $(patsubst benchmarks/%.cpp,$(BUILD)/%,$(BENCH_SRC))

LIB        := $(BUILD)/librdmasock.so
UNIT       := $(BUILD)/unit-tests

.PHONY: all test check test-unit test-asan asan bench bench-rdma rdmaInlineComparison demo clean
all: $(LIB) $(UNIT) $(PROGRAMS) $(BENCHES)

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/libcommon.a: $(COMMON_OBJ)
	ar rcs $@ $^

# The shim is a plain shared object: no sanitizer runtime in the preload path.
$(LIB): $(SHIM_OBJ) $(BUILD)/libcommon.a
	$(CXX) -shared $(LDFLAGS) -o $@ $(SHIM_OBJ) $(BUILD)/libcommon.a $(LDLIBS) -Wl,--no-undefined

$(UNIT): $(UNIT_OBJ) $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lrt

$(BUILD)/%: $(BUILD)/obj/tests/programs/%.o $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%: $(BUILD)/obj/benchmarks/%.o $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The RDMA ping-pong: the only benchmark linked with libibverbs (runs in the
# Soft-RoCE VM; not part of `all`, so the host build needs no device).
RDMA_BENCH_SRC := $(wildcard benchmarks/rdma/*.cpp)
$(BUILD)/pingpong_rdma: $(call obj,$(RDMA_BENCH_SRC)) $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS) -libverbs
$(BUILD)/obj/benchmarks/rdma/%.o: CXXFLAGS += -Ibenchmarks

# The test command README.md gives. Prints "N passed, N failed" at the end.
test: all
	BUILD=$(BUILD) scripts/run-tests

test-unit: $(UNIT)
	$(UNIT)

# The whole unit suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) SAN=asan BUILD=build-asan OPT=-O1 build-asan/unit-tests

test-asan: asan
	RDMASOCK_TEST_RECORDS=$${RDMASOCK_TEST_RECORDS:-1000000} build-asan/unit-tests

# What CI runs (README's test command): everything, plain and sanitized.
check: all asan
	BUILD=$(BUILD) scripts/run-tests --asan

# The benchmark suite: CSVs in benchmarks/results/, plots in docs/img/bench-*.png,
# the page docs/benchmarks.md (generated). Calls bench-rdma when the VM is set up.
bench: all
	BUILD=$(BUILD) scripts/bench

# The RDMA part alone, in the Soft-RoCE VM (scripts/rdma-vm-setup once).
bench-rdma: all $(BUILD)/pingpong_rdma
	BUILD=$(BUILD) scripts/bench-rdma

# Inline vs no inline over the RDMA transport, 8 B..1 KiB: prints the crossover, plots the curve.
rdmaInlineComparison: all $(BUILD)/pingpong_rdma
	BUILD=$(BUILD) scripts/bench-rdma --inline-only

# A quick 64-byte ping-pong over every host transport, with ratios against TCP.
demo: all
	$(BUILD)/pingpong --iters 100000 --warmup 10000

clean:
	rm -rf build build-asan build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
