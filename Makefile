# librdmasock build. `make` builds the library, tests and benchmarks into build/;
# `make test` runs the test suite; `make test-asan` runs it under ASan+UBSan.
CXX      ?= g++
BUILD    ?= build
SAN      ?=
OPT      ?= -O2
CXXFLAGS := -std=c++20 $(OPT) -g -Wall -Wextra -Wno-missing-field-initializers -fPIC -pthread \
            -Icommon -Ishim -MMD -MP $(EXTRA_CXXFLAGS)
LDLIBS   := -ldl -pthread
# CHECKED=1 (and the sanitizer builds): a phase move outside the table aborts (common/connection/connection_phase.hpp).
ifneq ($(CHECKED)$(SAN),)
CXXFLAGS += -DRDMASOCK_CHECK_PHASES
endif
ifeq ($(SAN),asan)
CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
ifeq ($(SAN),tsan)
# -Wno-tsan: TSan does not model the seq_cst fences of the doorbell Dekker (it says so per fence).
CXXFLAGS += -fsanitize=thread -Wno-tsan
LDFLAGS  += -fsanitize=thread
endif

COMMON_SRC := $(wildcard common/*/*.cpp)
SHIM_SRC   := $(wildcard shim/*.cpp)
UNIT_SRC   := $(wildcard tests/unit/*.cpp)
PROG_SRC   := $(wildcard tests/programs/*.cpp)
BENCH_SRC  := $(wildcard benchmarks/*.cpp)
CLI_SRC    := $(wildcard tools/rdmasock/*.cpp)

obj = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC))
SHIM_OBJ   := $(call obj,$(SHIM_SRC))
UNIT_OBJ   := $(call obj,$(UNIT_SRC))
PROGRAMS   := $(patsubst tests/programs/%.cpp,$(BUILD)/%,$(PROG_SRC)) $(BUILD)/stdio_handler_static
BENCHES    := $(patsubst benchmarks/%.cpp,$(BUILD)/%,$(BENCH_SRC))

LIB        := $(BUILD)/librdmasock.so
CLI        := $(BUILD)/rdmasock
UNIT       := $(BUILD)/unit-tests

.PHONY: checked install uninstall deb FORCE all test check test-unit test-asan asan bench bench-rdma rdmaInlineComparison demo clean test-rdma test-rdma-2g test-pg bench-pg bench-pg-latency stress fuzz robustness tsan
all: $(LIB) $(UNIT) $(PROGRAMS) $(BENCHES) $(CLI)

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# sigaction is called by name by sanitizer runtimes while they start (TSan installs its
# deadly-signal handlers through it before it is initialized): the interposer and what is
# behind it (the fault guard, the signal trampoline and the sleep it cancels) carry no
# instrumentation, so a sanitized program can preload a sanitized shim.
$(BUILD)/obj/shim/interpose_signal.o $(BUILD)/obj/common/sys/fault_guard.o \
$(BUILD)/obj/common/sys/signal_seen.o $(BUILD)/obj/common/sys/interruptible_sleep.o: CXXFLAGS += -fno-sanitize=all

$(BUILD)/libcommon.a: $(COMMON_OBJ)
	ar rcs $@ $^

# The shim is a plain shared object: no sanitizer runtime in the preload path.
$(LIB): $(SHIM_OBJ) $(BUILD)/libcommon.a shim/exports.map
	$(CXX) -shared $(LDFLAGS) -o $@ $(SHIM_OBJ) $(BUILD)/libcommon.a $(LDLIBS) -Wl,--no-undefined \
	    -Wl,--version-script=shim/exports.map

# The rdmasock command (tools/rdmasock): run, stat, doctor.
$(CLI): $(call obj,$(CLI_SRC)) $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Installation (docs/install.md). The launcher has $(PREFIX)/lib compiled in; the
# stamp holds the PREFIX it was built with, so another PREFIX rebuilds it.
PREFIX  ?= /usr/local
DESTDIR ?=
VERSION ?= 0.1.0
LIBDIR  := $(PREFIX)/lib
$(BUILD)/prefix.stamp: FORCE
	@mkdir -p $(BUILD); echo '$(LIBDIR)' | cmp -s - $@ || echo '$(LIBDIR)' > $@
$(BUILD)/obj/tools/rdmasock/library_path.o: $(BUILD)/prefix.stamp
$(BUILD)/obj/tools/rdmasock/library_path.o: CXXFLAGS += -DRDMASOCK_LIBDIR='"$(LIBDIR)"'

# Every installed file, relative to $(DESTDIR)$(PREFIX): uninstall removes exactly these.
INSTALLED := lib/librdmasock.so bin/rdmasock share/man/man1/rdmasock.1 share/man/man7/rdmasock.7
install: $(LIB) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 0644 $(LIB) $(DESTDIR)$(PREFIX)/lib/librdmasock.so
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/rdmasock
	install -m 0644 docs/man/rdmasock.1 $(DESTDIR)$(PREFIX)/share/man/man1/rdmasock.1
	install -m 0644 docs/man/rdmasock.7 $(DESTDIR)$(PREFIX)/share/man/man7/rdmasock.7

FORCE:

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

# A Debian package of the install tree (PREFIX=/usr), built with dpkg-deb only.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB      := $(BUILD)/librdmasock_$(VERSION)_$(DEB_ARCH).deb
DEB_ROOT := $(abspath $(BUILD)/deb-root)
deb:
	rm -rf $(DEB_ROOT)
	$(MAKE) install PREFIX=/usr DESTDIR=$(DEB_ROOT)
	gzip -9n $(DEB_ROOT)/usr/share/man/man1/rdmasock.1 $(DEB_ROOT)/usr/share/man/man7/rdmasock.7
	install -d $(DEB_ROOT)/DEBIAN
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' packaging/deb-control.in > $(DEB_ROOT)/DEBIAN/control
	dpkg-deb --root-owner-group --build $(DEB_ROOT) $(DEB)

$(UNIT): $(UNIT_OBJ) $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lrt

$(BUILD)/%: $(BUILD)/obj/tests/programs/%.o $(BUILD)/libcommon.a
	$(CXX) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The stdio handler again, statically linked: a program no preload reaches
# (tests/integration/handover_peer_stopped.sh).
$(BUILD)/stdio_handler_static: $(BUILD)/obj/tests/programs/stdio_handler.o
	$(CXX) -static -o $@ $^

# A program that sets up an io_uring through liburing (tests/integration/io_uring.sh).
$(BUILD)/uring_check: LDLIBS += -luring

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
check: all asan checked
	BUILD=$(BUILD) scripts/run-tests --asan

# The shim with every phase move checked (common/connection/connection_phase.hpp): the fuzzer's build.
checked:
	$(MAKE) CHECKED=1 BUILD=build-checked build-checked/librdmasock.so

# The RDMA tests (verbs, and the shim over rdma) inside a Soft-RoCE VM: one host,
# two hosts, two namespaces, and (not in make check: 6-9 minutes) the reduced two-kernel
# run. Needs scripts/rdma-vm-setup (scripts/setup runs it).
test-rdma: all
	BUILD=$(BUILD) RDMA_TEST_TWO_GUESTS=1 scripts/test-rdma

# The shim between two guest kernels (scripts/rdma-vm-2g: two QEMU guests on one virtual
# link, rxe on each): stream_check both ways, link cuts, pgbench, latency (tcp, rsocket, shim).
test-rdma-2g: all
	BUILD=$(BUILD) scripts/test-rdma --two-guests-full

# The sleep/wake race at 25x the CI volume (millions of kernel sleeps; ~15 min on 2 cores).
stress: all checked
	BUILD=$(BUILD) STRESS_SCALE=$${STRESS_SCALE:-25} bash tests/integration/wake_stress.sh
	BUILD=$(BUILD) MT_FUZZ_SEEDS="$$(seq -s ' ' 100 160)" MT_FUZZ_DEFAULT_SEEDS="$$(seq -s ' ' 200 230)" MT_FUZZ_ROUNDS=20 bash tests/integration/mt_fuzz.sh

# Robustness (docs/robustness.md). fuzz: each libFuzzer target FUZZ_SECONDS in turn (clang);
# robustness: hostile/dead peers, 10,000-connection churn, valgrind, registry race, isolation;
# tsan: the unit tests, the preloaded shim (threaded programs) and the multi-threaded fuzzer
# under ThreadSanitizer.
FUZZ_SECONDS ?= 60
fuzz:
	tests/fuzz/run.sh $(FUZZ_SECONDS)

robustness: all
	BUILD=$(BUILD) tests/robustness/run.sh

TSAN_BINS := build-tsan/unit-tests build-tsan/librdmasock.so build-tsan/stream_check build-tsan/mt_fuzz
tsan:
	$(MAKE) SAN=tsan BUILD=build-tsan OPT=-O1 $(TSAN_BINS)
	BUILD=build-tsan tests/robustness/tsan.sh

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

# PostgreSQL end to end (docs/postgres.md): pgbench -c 4 -t 200 with the shim on server and client,
# TPC-B invariant; and the pgbench benchmark over TCP, the Unix socket and the shim.
test-pg: $(LIB)
	BUILD=$(BUILD) tests/integration/pgbench_invariant.sh

# bench-pg: throughput (benchmarks/pgbench.sh, then sysbench's OLTP scripts: benchmarks/sysbench.sh),
# then the latency distributions of benchmarks/pg-latency.sh (regenerates docs/postgres-latency.md
# and docs/img/pg-latency-*.png)
bench-pg: $(LIB)
	SHIM=$(BUILD)/librdmasock.so benchmarks/pgbench.sh
	SHIM=$(BUILD)/librdmasock.so benchmarks/sysbench.sh
	SHIM=$(BUILD)/librdmasock.so LAT_CMD='make bench-pg' benchmarks/pg-latency.sh

bench-pg-latency: $(LIB)
	SHIM=$(BUILD)/librdmasock.so LAT_CMD='make bench-pg-latency' benchmarks/pg-latency.sh

clean:
	rm -rf build build-asan build-tsan build-fuzz build-checked

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
