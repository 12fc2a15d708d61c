/* version.c — the version string. */
#include "agrl/agrl.h"

const char *ag_version(void) {
#ifdef AGRL_WITH_CUDA
  return AGRL_VERSION " (cpu+cuda)";
#else
  return AGRL_VERSION " (cpu)";
#endif
}
