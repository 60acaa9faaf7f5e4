# gpupool: one binary over one library. `make`, `make test`,
# `make test SANITIZE=1` (ASan+UBSan, in build-asan/; TEST_PATTERN=WORD
# runs only the tests whose name has WORD), `make fuzz` (clang,
# libFuzzer harnesses in build-fuzz/), `make bench`, `make deb` (Debian
# packages in build/deb/).

SANITIZE ?=
WERROR ?=
ifeq ($(SANITIZE),1)
BUILD ?= build-asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer \
	   -fno-sanitize-recover=undefined
OPT = -O1
else
BUILD ?= build
SANFLAGS =
OPT = -O2
endif

CC ?= cc
# libcrypto, libssl: a coordinator's own CA, verified by its hash (tokens)
# libpq: the coordinator's state in PostgreSQL (--db postgresql://...)
PKGS = libmicrohttpd libcurl jansson libsodium sqlite3 yaml-0.1 libarchive \
       libcrypto libssl libmnl libpq gnutls
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || \
	echo -lmicrohttpd -lcurl -ljansson -lsodium -lsqlite3 -lyaml -larchive \
	-lcrypto -lssl -lmnl -lpq)
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wformat=2 -Wno-format-nonliteral
ifeq ($(WERROR),1)
WARN += -Werror
endif
CFLAGS += -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SANFLAGS) -fPIC \
	  -Isrc -Isrc/common $(PKG_CFLAGS) -MMD -MP
LDFLAGS += $(SANFLAGS)
# http-parser (the CLI's client, http_lite.c) ships no pkg-config file.
# libwslay: the dashboard terminal's WebSocket framing (src/coord/terminal.c).
LDLIBS = $(PKG_LIBS) -lcsv -lhttp_parser -lwslay -lpthread -ldl -lm
# The `gpupool` executable links only what its own commands need
# (src/main.c, src/lite/): see libgpupool.so below. jansson, libsodium,
# http-parser and libm go in statically (their .a come with the -dev
# packages): each shared library the loader maps and relocates costs a
# CLI start (issue 6, workload 3: one process per submission); libc stays
# shared, so dlopen of libgpupool.so (which has its own copies, only argv
# crosses) keeps working.
LITE_LIBS = -Wl,-Bstatic -ljansson -lsodium -lhttp_parser -lm \
	-Wl,-Bdynamic -ldl

LIB_SRC = $(wildcard src/common/*.c src/coord/*.c src/agent/*.c src/cli/*.c \
	src/sim/*.c)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC = $(wildcard tests/fuzz/fuzz_*.c)
REPLAY_BIN = $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz/replay_%)
BENCH_SRC = $(wildcard bench/*.c)
BENCH_BIN = $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
# tests/fakecuda (see below): only where the CUDA headers are.
CUDA_INC ?= /usr/local/cuda/include
FAKE_DIR = $(BUILD)/fakecuda
# The fakes define ABI entry points that no header of ours declares.
FAKE_CFLAGS = -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -Wno-missing-prototypes \
	-I$(CUDA_INC)
ifneq ($(wildcard $(CUDA_INC)/cuda.h),)
FAKECUDA = $(FAKE_DIR)/libcuda.so.1 $(FAKE_DIR)/libnvidia-ml.so.1 \
	$(FAKE_DIR)/cudaprog $(FAKE_DIR)/cudaprog-linked
endif

all: $(BUILD)/gpupool $(BUILD)/libgpupool.so $(BUILD)/gpupool-init \
	$(BUILD)/libgpupool-cuda.so $(FAKECUDA) \
	$(UNIT_BIN) $(REPLAY_BIN) \
	$(BENCH_BIN)

# Objects are -fPIC since libgpupool.so: a build dir from before that is
# rebuilt once, this stamp (made when missing) being newer than its objects.
FPIC_STAMP := $(shell mkdir -p $(BUILD) && { [ -e $(BUILD)/.fpic ] || \
	touch $(BUILD)/.fpic; } && echo $(BUILD)/.fpic)

$(BUILD)/%.o: %.c $(FPIC_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The dashboard's files are embedded with .incbin (src/coord/web.c).
$(BUILD)/src/coord/web.o: $(wildcard web/*) $(wildcard web/vendor/*)

$(BUILD)/libgpupool.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The whole program as a private shared library: every command, the
# coordinator and the agent, with all of PKGS. It exports gp_main_full
# only (src/libgpupool.map) and binds its own symbols (-Bsymbolic).
$(BUILD)/libgpupool.so: $(LIB_OBJ) src/libgpupool.map
	$(CC) $(LDFLAGS) -shared -Wl,-Bsymbolic -Wl,-soname,libgpupool.so \
	    -Wl,--version-script=src/libgpupool.map -o $@ $(LIB_OBJ) $(LDLIBS)

# The `gpupool` executable: src/main.c, src/lite/ (the commands it hands
# to libgpupool.so, and gp_http_* over http_lite.c) and, from the
# archive, only the objects its own commands pull in. It must not need
# libcurl, libmicrohttpd, SQLite, libarchive, libyaml or libcsv: the link
# fails if an object pulled in does (LITE_LIBS lacks them).
LITE_OBJ = $(BUILD)/src/main.o \
	$(patsubst %.c,$(BUILD)/%.o,$(wildcard src/lite/*.c))
$(BUILD)/gpupool: $(LITE_OBJ) $(BUILD)/libgpupool.a | $(BUILD)/libgpupool.so
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $(LITE_OBJ) \
	    $(BUILD)/libgpupool.a $(LITE_LIBS)

# gpupool-init: pid 1 of container jobs. Static, since it runs inside
# images that may have no C library; never sanitized (it runs there too).
$(BUILD)/gpupool-init: src/init/gpupool-init.c src/agent/sandbox.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 $(WARN) -Isrc -static -o $@ $<

# libgpupool-cuda.so: the CUDA interposition library the agent preloads
# into jobs holding a fraction of a GPU (src/shim/, docs/gpu-sharing.md).
# It goes into any program, so it is never sanitized and links only libc.
SHIM_SRC = $(wildcard src/shim/*.c)
$(BUILD)/libgpupool-cuda.so: $(SHIM_SRC) $(wildcard src/shim/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g $(WARN) -fPIC -shared \
	    -fvisibility=hidden -Wl,-soname,libgpupool-cuda.so \
	    -Wl,-z,now -o $@ $(SHIM_SRC) -ldl -lpthread

# tests/fakecuda: a fake libcuda.so.1 and libnvidia-ml.so.1 and the
# driver-API program the shim's tests drive; built when the CUDA headers
# are there (CUDA_INC), else the tests that need them say SKIP.
$(FAKE_DIR)/libcuda.so.1: tests/fakecuda/libcuda.c tests/fakecuda/state.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -fPIC -shared -fvisibility=hidden \
	    -Wl,-Bsymbolic -Wl,-soname,libcuda.so.1 -o $@ $< -lpthread -ldl
	ln -sf libcuda.so.1 $(FAKE_DIR)/libcuda.so
$(FAKE_DIR)/libnvidia-ml.so.1: tests/fakecuda/libnvidia-ml.c \
		tests/fakecuda/state.h
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -fPIC -shared -fvisibility=hidden \
	    -Wl,-soname,libnvidia-ml.so.1 -o $@ $<
$(FAKE_DIR)/cudaprog: tests/fakecuda/cudaprog.c
	@mkdir -p $(dir $@)
	$(CC) $(FAKE_CFLAGS) -o $@ $< -ldl
$(FAKE_DIR)/cudaprog-linked: tests/fakecuda/cudaprog.c \
		$(FAKE_DIR)/libcuda.so.1
	$(CC) $(FAKE_CFLAGS) -DCUDAPROG_LINKED -o $@ $< -L$(FAKE_DIR) \
	    -lcuda -ldl

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libgpupool.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/fuzz/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o \
		$(BUILD)/tests/fuzz/replay_main.o $(BUILD)/libgpupool.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BUILD)/libgpupool.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer harnesses: clang only, coverage-guided, with ASan.
FUZZ_BUILD = build-fuzz
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -Isrc -Isrc/common \
	      $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined
# The library is compiled once for all harnesses (fuzzer-no-link: coverage
# without libFuzzer's main), each harness is compiled and linked with it.
FUZZ_LIB_FLAGS = $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS))
comma := ,
FUZZ_LIB_OBJ = $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
fuzz: $(FUZZ_SRC:tests/fuzz/fuzz_%.c=$(FUZZ_BUILD)/fuzz_%)
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_LIB_FLAGS) -MMD -MP -c -o $@ $<
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(FUZZ_BUILD)
	clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_OBJ) $(LDLIBS)

test: all
	BUILD=$(BUILD) tests/run.sh "$(TEST_PATTERN)"

bench: all
	BUILD=$(BUILD) bench/run.sh

# Debian packages (scripts/make-deb.sh): $(BUILD)/deb/*.deb.
deb: $(BUILD)/gpupool $(BUILD)/libgpupool.so $(BUILD)/gpupool-init \
	$(BUILD)/libgpupool-cuda.so
	scripts/make-deb.sh $(BUILD) $(BUILD)/deb

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all test fuzz bench clean deb
.SECONDARY:

-include $(shell find $(BUILD) $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)

# The checkpoint examples (examples/checkpoint, docs/checkpoints.md):
# `make examples` builds $(BUILD)/examples/steps. Not part of `all`.
examples: $(BUILD)/examples/steps
$(BUILD)/examples/steps: examples/checkpoint/steps.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) $(SANFLAGS) -o $@ $<
.PHONY: examples
