/* fuzz_ac_load.c — libFuzzer harness of the SAC/TD3 loader.
 *
 * Each input is an agent file (agrl/ac.h, "saving an agent"), fed to the
 * loader's stream entry through fmemopen on a CPU context (fuzz_common.h;
 * an agent whose networks, correlated noise or replay table take more than
 * 1 MB is refused by the entry's limit, so that an input cannot make it
 * allocate more). It aborts when the loader breaks its promises:
 *   - a refusal wrote *out, its message does not begin with "ag_ac_load: ",
 *     or it left device memory allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded agent does not: saved again
 *     with ag_ac_save it must come back byte for byte up to its replay
 *     table's image, but for the library version (bytes 16..47) and the
 *     header's CRC; the image must come back as fuzz_replay_load's do;
 *   - the loaded agent, freed, left device memory allocated.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The header's tensor entries from byte 896, their count the u32 at 312;
 * after the tensors' values the correlated noise (N f32, the i64 at 296)
 * and the run state (R bytes, the i64 at 304). */
FUZZ_AGENT(ac_file, ag_ac, ac, "agent", 896, 312, 2, {{296, 4}, {304, 1}});

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_agent_input(&ac_file, data, size);
}
