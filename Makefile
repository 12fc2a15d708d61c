# The two commands: `make run` (the main job) and `make test` (every test).
.PHONY: run test gpu clean format

run:
	scripts/run.sh

test:
	scripts/test.sh

# On a machine with a GPU: build for sm_90, run all tests and the benchmarks.
gpu:
	scripts/gpu_check.sh out

format:
	scripts/format.sh

clean:
	rm -rf build build-asan build-gpu
