/* no_cuda.c — linked instead of the CUDA backend when CUDA is not built. */
#include "base/backend.h"

const ag__backend *ag__cuda_backend(void) { return NULL; }
int ag__cuda_device_count(void) { return 0; }
const ag__handoff_ops *ag__cuda_handoff(void) { return NULL; }
