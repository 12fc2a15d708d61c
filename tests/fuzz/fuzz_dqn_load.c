/* fuzz_dqn_load.c — libFuzzer harness of the DQN loader.
 *
 * Each input is a DQN file (agrl/agent.h, "saving a DQN"), fed to the
 * loader's stream entry through fmemopen on a CPU context (fuzz_common.h;
 * a DQN whose networks or replay table take more than 1 MB is refused by
 * the entry's limit, so that an input cannot make it allocate more). It
 * aborts when the loader breaks its promises:
 *   - a refusal wrote *out, its message does not begin with "ag_dqn_load: "
 *     (or, for the table's image, "ag_replay_load: "), or it left device
 *     memory allocated (ctx stats live_bytes);
 *   - an accepted file holds what the loaded DQN does not: saved again with
 *     ag_dqn_save it must come back byte for byte up to its replay table's
 *     image, but for the library version (bytes 16..47) and the header's
 *     CRC; the image must come back as fuzz_replay_load's do (the same
 *     exceptions in its own header; a save writes parts of
 *     AG_TRANSFER_PART_BYTES, so an image of other parts is compared with
 *     the table saved again with its part length);
 *   - the loaded DQN, freed, left device memory allocated.
 * scripts/fuzz.sh builds and runs it (cmake -DAGRL_FUZZ=ON).
 */
#include "fuzz_common.h"

/* The header's tensor entries from byte 488, their count the u32 at 264;
 * after the tensors' values the run state (R bytes, the i64 at 256). */
FUZZ_AGENT(dqn_file, ag_dqn, dqn, "DQN", 488, 264, 1, {{256, 1}, {0, 0}});

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_agent_input(&dqn_file, data, size);
}
