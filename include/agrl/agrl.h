/* agrl/agrl.h — the whole public API of agrl.
 *
 * agrl: device-resident replay tables read by index inside compute graphs,
 * and the on-device training steps that read them. See README.md.
 */
#ifndef AGRL_AGRL_H
#define AGRL_AGRL_H

#include "agrl/status.h"
#include "agrl/ctx.h"
#include "agrl/tensor.h"
#include "agrl/buffer.h"
#include "agrl/graph.h"
#include "agrl/nn.h"
#include "agrl/capture.h"
#include "agrl/replay.h"
#include "agrl/frames.h"
#include "agrl/env.h"
#include "agrl/agent.h"
#include "agrl/ac.h"
#include "agrl/dist.h"
#include "agrl/export.h"

#define AGRL_VERSION_MAJOR 0
#define AGRL_VERSION_MINOR 1
#define AGRL_VERSION_PATCH 0
#define AGRL_VERSION "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0 (cpu+cuda)" or "0.1.0 (cpu)". */
AG_API const char *ag_version(void);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_AGRL_H */
