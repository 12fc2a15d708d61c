/* agent_internal.h — the agent layer's hooks for tests. */
#ifndef AGRL_AGENT_AGENT_INTERNAL_H
#define AGRL_AGENT_AGENT_INTERNAL_H

#include "agrl/agent.h"

/* For tests: marks the DQN as a device error half way through its updates
 * would (no backend here fails between two queued kernels). */
void ag__dqn_set_broken(ag_dqn *d);

#endif /* AGRL_AGENT_AGENT_INTERNAL_H */
