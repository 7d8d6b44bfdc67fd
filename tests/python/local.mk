# The Python package (python/): pytest suites run by tests/python/pytest.sh
# against the real cuptimond, shim and libcupti test double.  gpu-torch.sh
# (PyTorch end to end on a GPU) is run by hand, like tests/gpu.
PYTHON_TESTS = tests/python/pytest.sh
TESTS += $(PYTHON_TESTS)
EXTRA_DIST += $(PYTHON_TESTS) \
	tests/python/conftest.py \
	tests/python/gpu-torch.sh \
	tests/python/gpu_torch_loop.py \
	tests/python/test_annotate.py \
	tests/python/test_control.py \
	tests/python/test_inprocess.py \
	tests/python/test_torch_hook.py \
	tests/python/test_windows.py \
	python/README.md \
	python/pyproject.toml \
	python/cuptimon/__init__.py \
	python/cuptimon/__main__.py \
	python/cuptimon/_annotate.py \
	python/cuptimon/_control.py \
	python/cuptimon/_errors.py \
	python/cuptimon/_kinds.py \
	python/cuptimon/_shim.py \
	python/cuptimon/daemon.py \
	python/cuptimon/monitor.py \
	python/cuptimon/torch_integration.py
