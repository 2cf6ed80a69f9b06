# lucid-YOLO developer entry points. `make setup` once, then `make fit` / `make test`.
UV ?= uv
PYTEST_ARGS ?=
# tests run two xdist workers with one thread each; `make fit` uses both cores in one process
TEST_ENV = OMP_NUM_THREADS=1
# the incumbent as a black box for `make bench`'s side-by-side pass (../shared/refbench/README.md)
REFBENCH ?= $(or $(LUCID_SHARED_DIR),../shared)/refbench

.PHONY: setup test test-all lint typecheck guard fixtures goldens parity gate fit bench docs notebooks

setup:
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --all-packages --locked

test: setup
	$(TEST_ENV) $(UV) run --locked pytest -q -n 2 $(PYTEST_ARGS)

test-all: setup
	$(TEST_ENV) $(UV) run --locked pytest -q -n 2 -m "" $(PYTEST_ARGS)

lint: setup
	$(UV) run --locked ruff check packages tests tools
	$(UV) run --locked ruff format --check packages tests tools

typecheck: setup
	$(UV) run --locked mypy

# the release guard (declared tiers, versions, licences), then import-linter's contracts ([tool.importlinter] in
# pyproject.toml): the five tiers as layers and no import cycle between sibling modules or packages
guard: setup
	$(UV) run --locked python tools/release_guard.py
	$(UV) run --locked lint-imports

# the fixture tests again on renamed / extended copies of ../shared/fixtures (same schemas, same values): a test
# that assumes the public file's case names, order or count fails here (~2 min; skipped without ../shared)
fixtures: setup
	@if [ -d "$(or $(LUCID_SHARED_DIR),../shared)/fixtures" ]; then \
		$(TEST_ENV) $(UV) run --locked python tools/check_fixture_independence.py; \
	else echo "fixtures: ../shared/fixtures not found: skipped"; fi

# goldens = the overfit micro gate, then the level-4 distributional trajectory gate: 3 seeds of ours per recipe
# (detect yolo26n/yolo11n, segment, obb, pose) against the reference's recorded seed distributions in tools/fidelity/
# (about an hour on 2 cores; the release check trains 5 seeds: docs/TRAINING.md, "Distributional gate")
goldens: setup
	$(TEST_ENV) $(UV) run --locked python tools/check_goldens.py
	$(TEST_ENV) $(UV) run --locked python tools/check_trajectory.py --task all --seeds 3

# parity = every gate's training steps against the reference's own on a fixed un-augmented batch (about 20 minutes
# on 2 cores; needs the refbench venv: docs/TRAINING.md, "Step parity")
parity: setup
	@if [ -x $(REFBENCH)/run.sh ]; then \
		$(UV) run --locked python tools/check_step_parity.py --task all; \
	else echo "parity: $(REFBENCH) not found: skipped"; fi

gate: lint typecheck test guard fixtures goldens docs

fit: setup
	OMP_NUM_THREADS=2 $(UV) run --locked lucid-train fit

bench: setup
	$(UV) run --locked python tools/bench/infer.py
	$(UV) run --locked python tools/bench/data.py
	$(UV) run --locked python tools/bench/train.py
	$(UV) run --locked python tools/bench/eval.py
	$(UV) run --locked python tools/bench/openmp.py
	@# issue 18: ours and the reference (../shared/refbench, a black box) back to back on 2 threads, with ratios
	@if [ -x "$(REFBENCH)/run.sh" ]; then \
		set -e; export OMP_NUM_THREADS=2; \
		$(UV) run --locked python tools/bench/data.py --threads 2 --workers 0 --samples 200 --vs-reference --pairs 3; \
		$(UV) run --locked python tools/bench/train.py --step --threads 2 --sizes 640 --steps 4 --profile --vs-reference --pairs 3; \
		$(UV) run --locked python tools/bench/infer.py --threads 2 --vs-reference; \
		$(UV) run --locked python tools/bench/predict.py --threads 2 --facade --path --vs-reference; \
		$(UV) run --locked python tools/bench/video.py --threads 2 --save --vs-reference --pairs 3; \
		$(UV) run --locked python tools/bench/export.py --threads 2 --vs-reference; \
		$(UV) run --locked python -m lucid_train.export_benchmark $(REFBENCH)/../weights/yolo26n-seg-shapes.pt \
			--data $(REFBENCH)/../data/shapes-seg/data.yaml; \
	else echo "bench: $(REFBENCH)/run.sh not found: the --vs-reference pass is skipped"; fi

# the documentation site, built strictly (a broken link or a missing nav file fails); into runs/site
docs: setup
	$(UV) run --locked --group docs mkdocs build --strict

# the notebooks executed through a Jupyter kernel (full run; `make test` runs them in the fast contract) into runs/notebooks
notebooks: setup
	mkdir -p runs/notebooks
	for nb in notebooks/[!_]*.py; do \
		$(UV) run --locked jupytext --from py:percent --to ipynb --set-kernel python3 --execute $$nb \
			-o runs/notebooks/$$(basename $$nb .py).ipynb || exit 1; \
	done
