#!/usr/bin/env bash
# Unpacks Debian's cmocka, OpenBLAS, zlib and Vulkan (loader, headers, glslc,
# validation layer) packages into .deps/ (ignored by git) for the GPU
# machine, which has neither cmocka nor cblas.h nor Vulkan's SDK, and
# downloads the wheels that machine lacks (CPython 3.12) into .whl/: the
# peers (cpprb, Flashbax, Gymnasium, TorchRL with tensordict, Stable-
# Baselines3, and what they need beyond PyTorch and JAX), and what builds and
# tests the Python package there without network (scikit-build-core, pytest).
# TorchRL 0.13.3 / tensordict 0.13.0 is the newest pair whose C++ sum tree
# loads with PyTorch 2.11 (0.14.1 was built for a later PyTorch); PyPI's
# TorchRL wheels carry no CUDA sum tree, so its prioritized buffer runs its
# tree on the host there.
# Pass .deps and .whl in the device call's carry list; scripts/gpu_check.sh
# uses them (a missing wheel only makes its peer absent).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download libcmocka0 libcmocka-dev libopenblas-dev zlib1g-dev \
   libopenblas0-pthread libopenblas-pthread-dev \
   libvulkan1 libvulkan-dev glslc libshaderc1 vulkan-validationlayers)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps; done
# the Vulkan loader, C headers, glslc and the validation layer build and
# test the Vulkan backend there (the NVIDIA driver brings its own ICD);
# packed with xz to keep the carried folders small: gpu_check.sh unpacks them
rm -f .deps/usr/include/vulkan/*.hpp
(cd .deps && tar -cJf vulkan.tar.xz usr/bin/glslc usr/lib/x86_64-linux-gnu/libshaderc.so.1* \
   usr/lib/x86_64-linux-gnu/libvulkan.so* usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so \
   usr/include/vulkan usr/include/vk_video usr/share/vulkan/explicit_layer.d &&
   rm -rf usr/bin/glslc usr/lib/x86_64-linux-gnu/libshaderc.so.1* usr/lib/x86_64-linux-gnu/libvulkan.so* \
     usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so usr/include/vulkan usr/include/vk_video)
rm -rf .deps/debs .deps/usr/share
# GLVND's libraries, which NVIDIA's Vulkan driver needs (gpu_check.sh unpacks them into /)
mkdir -p .deps/gl && (cd .deps/gl && apt-get download libglvnd0 libgl1 libglx0 libegl1 libopengl0 libgles2)
find .deps -name '*.a' -delete
find .deps -name 'libz.so' -delete # a link to the runtime's file, which .deps lacks: CMake takes the system's libz.so.1
find .deps -name 'liblapack*' -delete
du -sh .deps
mkdir -p .whl
for w in cpprb==11.0.0 gymnasium==1.0.0 farama-notifications==0.0.6 cloudpickle==3.1.3 flashbax==0.1.3 \
         torchrl==0.13.3 tensordict==0.13.0 pyvers==0.2.3 hoptorch==0.1.4 orjson==3.13.0 importlib-metadata==10.2.0 \
         zipp==4.1.2 lazy-importer==0.1.0 stable-baselines3==2.9.2 \
         scikit-build-core==1.1.2 pathspec==1.1.1 packaging==26.4 pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0 \
         pygments==2.21.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d .whl "$w" \
    || echo "fetch_gpu_deps: could not download $w (its peer will be absent)"
done
ls .whl
