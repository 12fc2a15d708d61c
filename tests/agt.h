/* agt.h — shared helpers for agrl's cmocka tests.
 *
 * Every test binary takes the device as its first argument ("cpu" or
 * "cuda"). Without a CUDA device a "cuda" run prints that it skipped and
 * exits 77 (CTest's SKIP_RETURN_CODE) — unless AGRL_REQUIRE_GPU=1, as on the
 * GPU machine, where a missing device is a failure.
 */
#ifndef AGRL_TESTS_AGT_H
#define AGRL_TESTS_AGT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agrl/agrl.h"

extern ag_device_kind agt_kind;

/* Parses argv[1], then runs the group (or skips, see above). */
int agt_run(int argc, char **argv, const char *group, const struct CMUnitTest *tests, size_t n);

/* A context on the device under test (fails the test if it cannot). */
ag_ctx *agt_ctx(void);
/* The device kind under test as the runner names it: "cpu", "cuda" or "vulkan". */
const char *agt_kind_name(void);
/* Whether the kind under test has the fused DQN update (vulkan composes it). */
int agt_fused_dqn(void);

#define agt_ok(expr)                                                                                     \
  do {                                                                                                   \
    ag_status agt_s_ = (expr);                                                                           \
    if (agt_s_ != AG_OK) fail_msg("%s returned %s: %s", #expr, ag_status_name(agt_s_), ag_last_error()); \
  } while (0)

/* Asserts that expr fails with `status` and a message containing `part`. */
#define agt_err(expr, status, part)                                                           \
  do {                                                                                        \
    ag_status agt_s_ = (expr);                                                                \
    if (agt_s_ != (status))                                                                   \
      fail_msg("%s returned %s, expected %s (message: %s)", #expr, ag_status_name(agt_s_),    \
               ag_status_name(status), ag_last_error());                                      \
    if (!strstr(ag_last_error(), (part)))                                                     \
      fail_msg("%s: message \"%s\" does not contain \"%s\"", #expr, ag_last_error(), (part)); \
  } while (0)

/* Deterministic random numbers (xorshift64*). */
typedef struct agt_rng {
  uint64_t s;
} agt_rng;
static inline uint64_t agt_next(agt_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}
static inline float agt_uniform(agt_rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((agt_next(r) >> 40) * (1.0 / 16777216.0));
}
static inline int64_t agt_below(agt_rng *r, int64_t n) { return (int64_t)(agt_next(r) % (uint64_t)n); }

/* A prioritized sampler's sum tree read back (a new array, to free), and
 * in *leaves where its leaves (one per column) begin in it. */
double *agt_per_tree(ag_per *per, const double **leaves);

/* A small DQN's configuration: one hidden layer of `hidden`, batches of
 * `batch` from a table of `buffer`, training from the first step. */
ag_dqn_config agt_dqn_config(int64_t hidden, int64_t batch, int64_t buffer, uint64_t seed, int fused);

/* A whole file in a new malloc'd array (its length in *n), and a file
 * written with n bytes (both fail the test when they cannot). */
unsigned char *agt_slurp(const char *path, size_t *n);
void agt_spit(const char *path, const void *p, size_t n);
/* Device memory the context holds now (ag_ctx_get_stats' live_bytes). */
uint64_t agt_live_bytes(ag_ctx *ctx);

/* Removes what is under directory d, down to `depth` levels of
 * subdirectories (d itself stays). */
void agt_clear_dir(const char *d, int depth);

/* The events of a training run (ag_train_callback agt_record, user an
 * agt_events), each stored with its padding zeroed so that events compare
 * as bytes; agt_stop_later is a should_stop that asks after stop_after
 * polls. */
typedef struct agt_events {
  ag_train_event ev[4096];
  int n;
  int64_t stop_after;
  int64_t polls;
} agt_events;
int agt_record(const ag_train_event *ev, void *user);
int agt_stop_later(void *user);
/* got's events are want's past step `step` (a run resumed there). */
void agt_assert_same_events_from(const agt_events *want, const agt_events *got, int64_t step);

/* Reads a whole f32 tensor into a new malloc'd array. */
float *agt_read_f32(const ag_tensor *t);

#endif /* AGRL_TESTS_AGT_H */
