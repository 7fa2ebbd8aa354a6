# lineage: build, test, demo, bench.
#
#   make build     build bin/lineage, the front (the client commands:
#                  exec, roots, session, run through the daemon...), and
#                  bin/lineage-tracker, the tracker it hands serve, doctor,
#                  report and a standalone run to (no clang needed: the BPF
#                  objects are committed)
#   make static    the same pair, statically linked, runs on any Linux:
#                  bin/lineage-static and bin/lineage-static-tracker;
#                  GOARCH=arm64 cross-builds arm64's, named for it:
#                  bin/lineage-static-arm64 and bin/lineage-static-arm64-tracker
#   make install   both static binaries to $(BINDIR) (lineage, and
#                  lineage-tracker beside it), the systemd unit to
#                  $(UNITDIR), the CI runner hooks to $(HOOKDIR)
#                  (PREFIX=/usr/local, DESTDIR honoured)
#   make test      the full test suite, BPF included (run as root)
#   make test-hog  make test beside a CPU hog, one busy loop per CPU (by
#                  hand, not in CI: a user's CI runs beside everything)
#   make demo      lineage run on a leaky demo job: its report (the table on
#                  stderr, and an excerpt of --report's JSON)
#   make bench     benchmarks, printed as docs/benchmarks.md's tables
#   make generate  rebuild the BPF objects (needs clang, llvm, libbpf-dev)
#   make kmatrix   the kernel matrix: Debian's kernels under QEMU, lineage's
#                  per-kernel tests inside (KERNELS=5.10 make kmatrix: one;
#                  ARCH=arm64: arm64's kernels, ARCH=all: both)
#   make test-arm64  the unit tests that need no kernel (policy, the poll
#                  diff core, record, report, ...), built for arm64 and run
#                  under qemu-aarch64 user emulation

GO ?= go
BIN := bin/lineage
# The front finds the tracker beside its own executable, by this name.
TRACKER := bin/lineage-tracker
# lineage version reads these (internal/buildinfo); a plain go build falls
# back to the toolchain's VCS stamps.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -X github.com/lineage-dev/lineage/internal/buildinfo.version=$(VERSION) -X github.com/lineage-dev/lineage/internal/buildinfo.commit=$(COMMIT)
GOFLAGS_TEST ?= -race -count=1 -timeout 45m

.PHONY: all build test test-hog test-short test-arm64 demo bench generate vet fmt clean kmatrix static install

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
UNITDIR ?= $(PREFIX)/lib/systemd/system
HOOKDIR ?= $(PREFIX)/share/lineage
# The architecture make static builds for: the machine's own unless
# GOARCH says (GOARCH=arm64 on an amd64 machine cross-builds, the front's C
# fast path with Debian's aarch64 cross compiler: scripts/cross-cc.sh).
# amd64's binaries have the plain names make install and the docs use;
# another architecture's say which it is.
GOARCH ?= $(shell $(GO) env GOARCH)
ARCH_SUFFIX := $(if $(filter amd64,$(GOARCH)),,-$(GOARCH))
STATIC ?= bin/lineage-static$(ARCH_SUFFIX)
STATIC_TRACKER ?= $(STATIC)-tracker

all: build

# The front (cmd/lineage) links no BPF loader, procfs or Prometheus client
# (internal/codeshape's test holds it to that). It is built with cgo for
# lineage exec's fast path (internal/fastexec: the registration and execve
# in C, before the Go runtime starts), and linked statically (no dynamic
# loader to run at every start; netgo and osusergo: no libc resolver or
# NSS); FRONT_CGO=0 builds it without the fast path. The tracker
# (cmd/lineage-tracker) is everything else.
FRONT_CGO ?= 1
ifeq ($(FRONT_CGO),1)
FRONT_FLAGS := -tags netgo,osusergo -ldflags '$(LDFLAGS) -linkmode external -extldflags "-static"'
else
FRONT_FLAGS := -ldflags '$(LDFLAGS)'
endif

build:
	CGO_ENABLED=$(FRONT_CGO) $(GO) build $(FRONT_FLAGS) -o $(BIN) ./cmd/lineage
	$(GO) build -ldflags '$(LDFLAGS)' -o $(TRACKER) ./cmd/lineage-tracker

# Static binaries that run on any distribution (user names are looked up
# in /etc/passwd and /etc/group, not through NSS): the front with its C
# fast path and libc linked in, the tracker with no libc at all.
static:
	cc=$$($(if $(filter 1,$(FRONT_CGO)),./scripts/cross-cc.sh $(GOARCH),true)) && \
		env $${cc:+CC=$$cc} CGO_ENABLED=$(FRONT_CGO) GOARCH=$(GOARCH) $(GO) build -trimpath $(FRONT_FLAGS) -o $(STATIC) ./cmd/lineage
	CGO_ENABLED=0 GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(STATIC_TRACKER) ./cmd/lineage-tracker

# The unit's ExecStart names the tracker where it is installed.
install: static
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR)
	install -m 0755 $(STATIC) $(DESTDIR)$(BINDIR)/lineage
	install -m 0755 $(STATIC_TRACKER) $(DESTDIR)$(BINDIR)/lineage-tracker
	sed 's|/usr/local/bin/lineage|$(BINDIR)/lineage|' deploy/systemd/lineage.service > $(DESTDIR)$(UNITDIR)/lineage.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/lineage.service.tmp
	mv $(DESTDIR)$(UNITDIR)/lineage.service.tmp $(DESTDIR)$(UNITDIR)/lineage.service
	install -d $(DESTDIR)$(HOOKDIR)/github-actions
	install -m 0755 deploy/github-actions/job-started.sh deploy/github-actions/job-completed.sh $(DESTDIR)$(HOOKDIR)/github-actions/
	install -m 0644 deploy/github-actions/common.sh $(DESTDIR)$(HOOKDIR)/github-actions/

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: vet
	$(GO) test $(GOFLAGS_TEST) ./...

test-hog:
	./scripts/beside-hog.sh $(MAKE) test

test-short:
	$(GO) test -short -count=1 ./...

demo: build
	./scripts/demo.sh $(BIN)

bench: build
	./scripts/bench.sh $(BIN)

# ARCH (amd64, arm64 or all) and KERNELS are read by the script.
ARCH ?= amd64
kmatrix:
	ARCH=$(ARCH) ./scripts/kmatrix/run.sh

# The tests that need no kernel of their own, built for arm64 and run under
# qemu-aarch64 user emulation (qemu-user): the domain, policy, the poll
# diff core (against a fake /proc), record, report, the client and the
# other packages whose tests pass there. Not the poll tests that run their
# own test binary as a helper process: qemu-aarch64 emulates one program,
# and the kernel can't exec an arm64 binary on amd64. Not -race: the race
# detector needs cgo. qemu-user implements no bpf(2), so the BPF tests skip
# here even where CI requires BPF (LINEAGE_REQUIRE_BPF is cleared): arm64's
# BPF runs on arm64 kernels in make kmatrix ARCH=arm64.
ARM64_UNIT ?= ./lineage/... ./policy/... ./internal/record/... ./internal/report/... ./internal/buildinfo/... ./internal/loader ./internal/job/... ./internal/tracker/... ./internal/guardian/... ./internal/userfile/... ./internal/cli/... ./api/... ./client/...
ARM64_POLL_SKIP := ^TestProc(CatchesEscapes|DoubleForkBetweenPolls|OrphansThatAreNoOnesMembers)
test-arm64:
	@command -v qemu-aarch64 >/dev/null || { echo "make test-arm64: no qemu-aarch64 (apt-get install qemu-user)"; exit 1; }
	LINEAGE_REQUIRE_BPF= GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -exec qemu-aarch64 $(ARM64_UNIT)
	LINEAGE_REQUIRE_BPF= GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -exec qemu-aarch64 -skip '$(ARM64_POLL_SKIP)' ./internal/loader/poll/

generate:
	$(GO) generate ./internal/loader/bpf

clean:
	rm -rf bin
