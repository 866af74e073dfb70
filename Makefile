# The two commands of the README: `make demo` and `make test`. Each does all
# set-up on a fresh machine: Node.js (from the npm registry when the machine's is
# older than 22.18), npm ci, and for tests MinIO and the Caddy build.
SHELL := /bin/bash
WITH_NODE := scripts/with-node

# The test files, named here only: unit tests sit beside their module, integration tests in test/.
UNIT_TESTS := 'src/**/*.test.ts' 'runtime/**/*.test.ts'
INTEGRATION_TESTS := 'test/**/*.test.ts'
# The Go modules: the Caddy adapter and cell-front, the resident part of `cell serve`.
GO_MODULES := adapter runtime/front
# cell-front's sources, and its folders: a file added or removed changes its folder's time, and the
# binary is rebuilt when any of them is newer than it (an unchanged build is Go's cache, quick).
FRONT_SOURCES := $(shell find runtime/front -type d -o -name '*.go' -o -name 'go.mod' -o -name 'go.sum')

.PHONY: demo test setup tools check go-check unit integration go-test dist clean images image-test podman-setup

# `npm ci`: installs exactly what the lock file names and never writes it, so a fresh clone stays
# clean. The lock lists every platform's build of biome's, esbuild's and workerd's optional
# packages (npm fetches only this machine's); after changing a dependency, run `npm install` and
# commit the lock it writes, or `npm ci` refuses the two files as out of sync.
node_modules/.installed: package.json package-lock.json
	$(WITH_NODE) npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The checkout's cell-front, beside runtime/bin/cell, which execs it for `cell serve`.
runtime/bin/cell-front: $(FRONT_SOURCES) scripts/build-front.sh
	scripts/build-front.sh $@

setup: node_modules/.installed runtime/bin/cell-front

# The console's browser tests drive Debian's chromium: scripts/install-chromium.sh installs it.
# The metrics tests run promtool and a Prometheus server: scripts/install-prometheus.sh unpacks
# both from Debian's `prometheus` package into .tools/bin (no service installed) when missing.
tools: setup
	scripts/install-minio.sh
	scripts/build-caddy.sh
	scripts/install-prometheus.sh
	scripts/install-chromium.sh

check: setup go-check
	$(WITH_NODE) npx tsc --noEmit -p .
	$(WITH_NODE) npx biome check .
	$(WITH_NODE) node scripts/write-routing-vectors.ts --check
	$(WITH_NODE) node --test scripts/check-doc-references.test.ts
	$(WITH_NODE) node scripts/check-doc-references.ts

# Each Go module's guardrails: gofmt must list no file, go vet must be silent.
go-check:
	@for module in $(GO_MODULES); do \
	  unformatted="$$(cd $$module && gofmt -l .)"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change (run gofmt -w in $$module/):"; echo "$$unformatted"; exit 1; fi; \
	  echo "go vet in $$module/"; (cd $$module && go vet ./...) || exit 1; \
	done

# Most unit tests need nothing outside the checkout; the R2 layout's talk to a real MinIO.
unit: setup
	scripts/install-minio.sh
	$(WITH_NODE) node --test --test-concurrency=2 $(UNIT_TESTS)

integration: tools
	$(WITH_NODE) node --test --test-concurrency=2 $(INTEGRATION_TESTS)

# adapter/svc/acme_test.go starts Knot DNS (knotd): scripts/install-knot.sh installs it when missing.
go-test:
	scripts/install-knot.sh
	@for module in $(GO_MODULES); do echo "go test in $$module/"; (cd $$module && go test ./...) || exit 1; done

test: check unit go-test integration image-test

demo: setup
	scripts/build-caddy.sh
	$(WITH_NODE) scripts/demo.sh

# The release form of svc: dist/svc.mjs and dist/cell.mjs with their shared chunks, and
# dist/cell-front beside dist/cell.mjs (scripts/build-dist.ts).
dist: setup
	$(WITH_NODE) node scripts/build-dist.ts

# Container images (packaging/images/build.sh): svc, svc-caddy, svc-caddy-dns for linux/amd64 and
# linux/arm64, FROM scratch with podman; nothing is pulled from a container registry. Not part of
# `make test`: the first build cross-compiles Caddy twice per architecture and takes many minutes.
podman-setup:
	packaging/images/setup-podman.sh

images: setup podman-setup
	packaging/images/build.sh amd64 arm64

# Builds the images, runs the amd64 ones with podman (node health, Caddy's default configuration
# proxying to it, the image health check) and checks the arm64 binaries' architecture.
image-test: images
	packaging/images/test.sh

clean:
	rm -rf node_modules .tools .state runtime/bin/cell-front
