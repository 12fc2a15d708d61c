/* agt_agent.h — the checks the agent file tests (test_dqn_file.c,
 * test_ac_file.c) share: saves and loads of an agent of any kind, the
 * refusals of damaged files and bad arguments, faults at every step, the
 * run-state calls, and a run checkpointed, stopped and resumed.
 *
 * An agent kind is a table of its calls on `void *` agents; AGT_AGENT_KIND
 * writes one for the agent type T whose calls are P_save, P_load, P_free,
 * P_set_run_state and P_run_state, with its learn call with options
 * (LEARN: ag_ac_learn's arguments) and SAME, which fails the test unless
 * two agents hold the same state.
 */
#ifndef AGRL_TESTS_AGT_AGENT_H
#define AGRL_TESTS_AGT_AGENT_H

#include "agt.h"

typedef struct agt_agent_kind {
  const char *magic_part; /* what the load's refusal of a wrong magic says */
  ag_status (*save)(const void *a, const char *path);
  ag_status (*load)(ag_ctx *ctx, const char *path, void **out); /* *out kept on a refusal */
  void (*free)(void *a);
  ag_status (*learn)(void *a, ag_vec_env *env, int64_t steps, ag_learn_opts *o, agt_events *ev);
  ag_status (*set_run_state)(void *a, const void *data, size_t n);
  const void *(*run_state)(const void *a, size_t *n);
  void (*assert_same)(const void *a, const void *b);
} agt_agent_kind;

#define AGT_AGENT_KIND(var, T, P, LEARN, SAME, MAGIC_PART)                                                  \
  static ag_status var##_save(const void *a, const char *path) { return P##_save(a, path); }                \
  static ag_status var##_load(ag_ctx *ctx, const char *path, void **out) {                                  \
    T *x = *out;                                                                                            \
    ag_status s = P##_load(ctx, path, &x);                                                                  \
    *out = x;                                                                                               \
    return s;                                                                                               \
  }                                                                                                         \
  static void var##_free(void *a) { P##_free(a); }                                                          \
  static ag_status var##_learn(void *a, ag_vec_env *env, int64_t steps, ag_learn_opts *o, agt_events *ev) { \
    return LEARN(a, env, steps, o, agt_record, ev);                                                         \
  }                                                                                                         \
  static ag_status var##_set_rs(void *a, const void *p, size_t n) { return P##_set_run_state(a, p, n); }    \
  static const void *var##_rs(const void *a, size_t *n) { return P##_run_state(a, n); }                     \
  static void var##_same(const void *a, const void *b) { SAME(a, b); }                                      \
  static const agt_agent_kind var = {MAGIC_PART,  var##_save,   var##_load, var##_free,                     \
                                     var##_learn, var##_set_rs, var##_rs,   var##_same}

/* The test's directory (made by agt_dir_setup in /dev/shm where it can be
 * written, else /tmp; the refusals write thousands of files) and two files
 * in it. */
extern char agt_dir[64], agt_path_a[128], agt_path_b[128];
int agt_dir_setup(void **state);
int agt_dir_teardown(void **state);

/* The two files hold the same bytes. */
void agt_assert_same_files(const char *x, const char *y);
/* The entries of directory d, but for those whose name begins with '.'. */
int agt_count_entries(const char *d);

/* a (with the run state "run state") saved to agt_path_a and loaded: the
 * load wrote *out, the loaded agent has the run state and saves the same
 * file again (agt_path_b). Returns the loaded agent. */
void *agt_round_trip(const agt_agent_kind *k, ag_ctx *ctx, const void *a);
/* a saved here loads on a CPU context the same (k->assert_same), and the
 * CPU writes the same bytes. */
void agt_loads_on_the_cpu(const agt_agent_kind *k, const void *a);

/* The CRC of the agrl file header at f, written again. */
void agt_fix_crc(unsigned char *f);
/* A load of these bytes (written to agt_path_b) is refused: with `want` and
 * a message naming `part` (want AG_OK: AG_ERR_IO or AG_ERR_UNSUPPORTED, any
 * message), always naming the path; *out untouched and no device memory
 * left. */
void agt_refuse(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *bytes, size_t n, ag_status want,
                const char *part);
/* The file f (n bytes) with a header field changed under a sound CRC (in g,
 * of n bytes at least): refused with AG_ERR_IO naming `part`. */
void agt_refuse_field(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *f, unsigned char *g,
                      size_t n, size_t at, int bytes, uint64_t v, const char *part);
/* The damaged copies of the file f (n bytes; g has room for n + 1) refused:
 * its truncations (of every length below `dense`, every 7th past it), a
 * trailing byte, every header byte and every `stride`-th of the rest xored
 * with `flip`, a wrong magic and version 2 under a sound CRC. */
void agt_refuse_damaged(const agt_agent_kind *k, ag_ctx *ctx, const unsigned char *f, unsigned char *g,
                        size_t n, size_t dense, size_t stride, unsigned char flip);
/* Loads of a missing file and NULL arguments, saves of a NULL agent and to
 * an empty path or a missing directory: refused naming what is wrong. */
void agt_refuse_bad_args(const agt_agent_kind *k, ag_ctx *ctx, const void *a);

/* A fault of every kind at every step a save of a and a load of its file
 * meet: a failed save leaves the earlier file and a as it was, a failed
 * load makes nothing and leaves no device memory; each kind's save and
 * load succeed once their steps are past, and some fail before. */
void agt_faults_at_every_step(const agt_agent_kind *k, ag_ctx *ctx, void *a);

/* ag_X_run_state and ag_X_set_run_state of a new agent a (without a run
 * state): set, read, refused (NULL data, NULL agent, past 2^30 bytes,
 * keeping what it had) and cleared. */
void agt_run_state_calls(const agt_agent_kind *k, void *a);

/* A run of `steps` on `copies` copies of `env` made by make(ctx, variant):
 * with checkpoints every `every` steps keeping 2, it reports the events of
 * the run without (whose last checkpoint is at `latest`); resumed from the
 * one at `from` (on an environment of other seeds: they come from the
 * checkpoint) it reports the uninterrupted run's events from there and
 * ends as it did; stopped by should_stop after `stop_after` polls, it
 * reports the reference's first events and its checkpoint resumes so too.
 * Refused: a resume on another number of copies (other_copies), of an
 * agent without a run state, keep 0, checkpoint_every -1. */
typedef struct agt_resume_case {
  void *(*make)(ag_ctx *ctx, int variant);
  int variant;
  const char *env;
  int copies, other_copies;
  int64_t steps, every, latest, from, stop_after;
  int min_events; /* the reference reports more */
} agt_resume_case;
void agt_resumed_runs_equal_the_uninterrupted_one(const agt_agent_kind *k, ag_ctx *ctx,
                                                  const agt_resume_case *c);

#endif /* AGRL_TESTS_AGT_AGENT_H */
