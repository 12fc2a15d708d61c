/* replay_internal.h — shared by the replay table and its prioritized sampler. */
#ifndef AGRL_REPLAY_INTERNAL_H
#define AGRL_REPLAY_INTERNAL_H

#include "agrl/replay.h"

/* The table's valid size on the device (1 x 1 i64). */
ag_tensor *ag__replay_size_tensor(const ag_replay *r);
/* Attaches (per != NULL) or detaches a prioritized sampler. */
void ag__replay_attach(ag_replay *r, ag_per *per);
ag_per *ag__replay_per(const ag_replay *r);
/* The checks of ag_replay_sample for a batch of B (errors name fn). */
ag_status ag__replay_check_sample(const ag_replay *r, int64_t B, const char *fn);
/* Makes the sampler's device state resident, so that ag__per_added can
 * only fail on a device error. */
ag_status ag__per_prepare(ag_per *per);
/* The sum tree and the sampler's state (largest priority seen), for tests
 * that compare a sampler before and after a call. */
ag_tensor *ag__per_tree(const ag_per *per);
ag_tensor *ag__per_state(const ag_per *per);
/* New columns pos .. pos+k-1 (no wrap) take the largest priority. */
ag_status ag__per_added(ag_per *per, int64_t pos, int64_t k);

#endif /* AGRL_REPLAY_INTERNAL_H */
