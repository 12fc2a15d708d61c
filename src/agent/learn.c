/* learn.c — the training loop of every agent (ag_dqn_learn_ex and
 * ag_ac_learn run it through their kind's ag__agent_ops), its evaluations,
 * stops, checkpoints and resumes: the loop's own state (counters, the last
 * 20 returns, the observations in hand, the environments' state) travels in
 * the agent's run state, so that one save of the agent (ag_dqn_save,
 * ag_ac_save) holds everything a resumed run needs. Nothing here knows a
 * kind of agent: the ops table gives its calls, names and run-state magic.
 *
 * The run state's layout (little-endian):
 *   0   8  "AGRLRUN1" (the DQN's loop), "AGRLRUNA" (SAC's and TD3's)
 *   8   u32 version (1)   12 u32 copies n   16 u32 obs_dim   20 u32 0
 *   24  i64 step, episodes, since_train, since_target (SAC/TD3: 0)
 *   56  i32 returns kept (0..20), the next slot (0..19)
 *   64  20 x f64 the last returns     224 f64 the mean reported
 *   232 u64 E, the environments' state's length
 *   240 i64 the step of the last evaluation (ag_learn_opts.on_eval)
 *   SAC/TD3 only: 248 i64 the step of the last PHASE event (-1000 before
 *       the first), 256 f32 its critics' and actor's losses
 *   F   n x obs_dim f32 the observations in hand, then E bytes of
 *       ag_vec_env_get_state (F: 248 for the DQN's loop, 264 for SAC/TD3's)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_internal.h"

enum { RUN_WINDOW = AG__RECENT };
/* The run state's fixed bytes: without and with the last PHASE event. */
static const size_t run_fixed[2] = {248, 264};

/* The agent a loop trains: its kind's table and itself. */
typedef struct learner {
  const ag__agent_ops *ops;
  void *agent;
} learner;

double ag__recent_push(ag__recent *w, double v) {
  w->r[w->next] = v;
  w->next = (w->next + 1) % AG__RECENT;
  if (w->n < AG__RECENT) w->n++;
  double s = 0;
  for (int i = 0; i < w->n; i++) s += w->r[i];
  return s / w->n;
}

/* In a group, at every training boundary (the same environment step on
 * every rank) the ranks share [stop requested, returns kept, the last
 * 20 / G episode returns]: any rank's stop request stops all of them here,
 * and the mean return reported until the next boundary is over the last
 * 20 / G episodes of every rank — 20 episodes of the group, the window a
 * one-GPU run averages over. */
enum { XCHG_ROWS = 2 + RUN_WINDOW };

static ag_status group_boundary(const learner *l, ag_dist *g, ag_tensor *xchg, const ag__recent *win,
                                int want_stop, int *stop, double *mean) {
  int G = ag_dist_world(g), keep = RUN_WINDOW / G > 0 ? RUN_WINDOW / G : 1;
  float v[XCHG_ROWS] = {0};
  int n = win->n < keep ? win->n : keep;
  v[0] = (float)want_stop;
  v[1] = (float)n;
  for (int i = 0; i < n; i++) v[2 + i] = (float)win->r[(win->next - 1 - i + RUN_WINDOW) % RUN_WINDOW];
  ag_tensor *all;
  float *a = ag__malloc(sizeof(float) * XCHG_ROWS * (size_t)G);
  if (!a) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", l->ops->learn_fn);
  ag_status s = ag_tensor_write(xchg, v, sizeof v);
  if (!s) s = ag_dist_allgather(g, xchg, &all);
  if (!s) s = ag_tensor_read(all, a, sizeof(float) * XCHG_ROWS * (size_t)G);
  if (!s) {
    double sum = 0;
    int cnt = 0;
    for (int r = 0; r < G; r++) {
      const float *x = a + r * XCHG_ROWS;
      if (x[0] != 0.0f) *stop = 1;
      for (int i = 0; i < (int)x[1]; i++) sum += x[2 + i];
      cnt += (int)x[1];
    }
    if (cnt > 0) *mean = sum / cnt;
  }
  free(a);
  ag_ctx_reset(l->ops->ctx(l->agent));
  return s;
}

/* ---- the run state ---- */

/* Records the loop's state in the agent's run state. */
static ag_status record_run(const learner *l, ag_vec_env *env, const ag__loop *ls, const float *obs,
                            const char *fn) {
  const int ph = l->ops->run_phase != 0;
  const size_t fixed = run_fixed[ph];
  int n = ag_vec_env_size(env), od = ag_vec_env_get_spec(env)->obs_dim;
  size_t E = 0;
  ag_status s = ag_vec_env_state_size(env, &E);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the environments' state cannot be kept in a checkpoint: %s", fn, why);
  }
  size_t ob = (size_t)n * (size_t)od * 4, len = fixed + ob + E;
  unsigned char *b = ag__calloc(1, len);
  if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(b, l->ops->run_magic, 8);
  ag__put32(b + 8, 1);
  ag__put32(b + 12, (uint32_t)n);
  ag__put32(b + 16, (uint32_t)od);
  const int64_t c[4] = {ls->step, ls->episodes, ls->since_train, ls->since_target};
  for (int i = 0; i < 4; i++) ag__put64(b + 24 + 8 * i, (uint64_t)c[i]);
  ag__put32(b + 56, (uint32_t)ls->win.n);
  ag__put32(b + 60, (uint32_t)ls->win.next);
  for (int i = 0; i < RUN_WINDOW; i++) ag__put_f64(b + 64 + 8 * i, ls->win.r[i]);
  ag__put_f64(b + 224, ls->mean);
  ag__put64(b + 232, (uint64_t)E);
  ag__put64(b + 240, (uint64_t)ls->last_eval);
  if (ph) {
    ag__put64(b + 248, (uint64_t)ls->last_report);
    ag__put_f32(b + 256, ls->losses[0]);
    ag__put_f32(b + 260, ls->losses[1]);
  }
  for (size_t i = 0; i < (size_t)n * (size_t)od; i++) {
    uint32_t u;
    memcpy(&u, obs + i, 4);
    ag__put32(b + fixed + 4 * i, u);
  }
  s = ag_vec_env_get_state(env, b + fixed + ob, E);
  if (!s) s = l->ops->set_run_state(l->agent, b, len);
  free(b);
  return s;
}

/* The loop's state, the observations in hand (n x obs_dim) and env's state
 * from the agent's run state (ag_learn_opts.resume); nothing changes unless
 * all of it is sound (AG_ERR_INVALID_ARG naming fn). */
static ag_status restore(const learner *l, ag_vec_env *env, ag__loop *ls, float *obs, const char *fn) {
  const ag__agent_ops *ops = l->ops;
  const int ph = ops->run_phase != 0;
  const size_t fixed = run_fixed[ph];
  size_t len = 0;
  const unsigned char *b = ops->run_state(l->agent, &len);
  int n = ag_vec_env_size(env), od = ag_vec_env_get_spec(env)->obs_dim;
  size_t ob = (size_t)n * (size_t)od * 4;
  if (!b || len < fixed || memcmp(b, ops->run_magic, 8) || ag__get32(b + 8) != 1)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: resume: the %s holds no run state of %s (load a checkpoint's agent.agrl with %s)",
                    fn, ops->noun, ops->run_fn, ops->load_fn);
  if (ag__get32(b + 12) != (uint32_t)n || ag__get32(b + 16) != (uint32_t)od)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: resume: the run had %u copies of %u observations; this vector has %d of %d", fn,
                    ag__get32(b + 12), ag__get32(b + 16), n, od);
  uint64_t E = ag__get64(b + 232);
  if (E != len - fixed - ob || ag__get32(b + 20))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's lengths do not add up", fn);
  ag__loop t;
  memset(&t, 0, sizeof t);
  int64_t *c[4] = {&t.step, &t.episodes, &t.since_train, &t.since_target};
  for (int i = 0; i < 4; i++) *c[i] = (int64_t)ag__get64(b + 24 + 8 * i);
  t.win.n = (int)ag__get32(b + 56);
  t.win.next = (int)ag__get32(b + 60);
  for (int i = 0; i < RUN_WINDOW; i++) t.win.r[i] = ag__get_f64(b + 64 + 8 * i);
  t.mean = ag__get_f64(b + 224);
  t.last_eval = (int64_t)ag__get64(b + 240);
  t.last_report = ph ? (int64_t)ag__get64(b + 248) : 0;
  t.losses[0] = ph ? ag__get_f32(b + 256) : 0.0f;
  t.losses[1] = ph ? ag__get_f32(b + 260) : 0.0f;
  if (t.last_report > t.step || (ph && t.since_target) || t.step < 0 || t.episodes < 0 || t.since_train < 0 ||
      t.since_target < 0 || t.last_eval < 0 || t.last_eval > t.step || t.win.n < 0 || t.win.n > RUN_WINDOW ||
      t.win.next < 0 || t.win.next >= RUN_WINDOW)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's counters are out of range", fn);
  ag_status s = ag_vec_env_set_state(env, b + fixed + ob, (size_t)E);
  if (s) return s;
  for (size_t i = 0; i < (size_t)n * (size_t)od; i++) {
    uint32_t u = ag__get32(b + fixed + 4 * i);
    memcpy(obs + i, &u, 4);
  }
  t.last_ckpt = t.step;
  *ls = t;
  return AG_OK;
}

/* ---- checkpoint directories ---- */

/* Removes a directory and what it holds (at most `depth` levels). */
static int remove_tree(const char *path, int depth) {
  DIR *dir = opendir(path);
  if (!dir) return errno == ENOENT ? 0 : -1;
  int rc = 0;
  size_t pl = strlen(path);
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *p = ag__malloc(pl + strlen(e->d_name) + 2);
    if (!p) {
      rc = -1;
      break;
    }
    sprintf(p, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (depth <= 0 || remove_tree(p, depth - 1)) rc = -1;
    } else if (unlink(p))
      rc = -1;
    free(p);
  }
  closedir(dir);
  if (rmdir(path)) rc = -1;
  return rc;
}

static void sync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

/* The step of a name "ckpt-" + 12 digits, or -1. */
static int64_t ckpt_step(const char *name) {
  if (strncmp(name, "ckpt-", 5) || strlen(name) != 17) return -1;
  int64_t v = 0;
  for (const char *p = name + 5; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

/* The steps of dir's checkpoints, newest first, in *out (freed by the caller). */
static ag_status list_ckpts(const char *dir, const char *fn, int64_t **out, int *n) {
  DIR *dd = opendir(dir);
  if (!dd) return ag__fail(AG_ERR_IO, "%s: cannot read the directory %s: %s", fn, dir, strerror(errno));
  int64_t *v = NULL;
  int k = 0, cap = 0;
  struct dirent *e;
  ag_status s = AG_OK;
  while ((e = readdir(dd))) {
    int64_t st = ckpt_step(e->d_name);
    if (st < 0) continue;
    if (k == cap) {
      int64_t *nv = ag__realloc(v, sizeof *v * (size_t)(cap = cap ? 2 * cap : 16));
      if (!nv) {
        s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        break;
      }
      v = nv;
    }
    v[k++] = st;
  }
  closedir(dd);
  if (s) {
    free(v);
    return s;
  }
  for (int i = 1; i < k; i++) /* newest first */
    for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
      int64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  *out = v;
  *n = k;
  return AG_OK;
}

static char *join(const char *dir, const char *name) {
  char *p = ag__malloc(strlen(dir) + strlen(name) + 2);
  if (p) sprintf(p, "%s/%s", dir, name);
  return p;
}

static ag_status write_checkpoint(const learner *l, ag_vec_env *env, const ag_learn_opts *o,
                                  const ag__loop *ls, const float *obs) {
  const char *fn = l->ops->run_fn;
  const char *dir = o->checkpoint_dir;
  char name[40], tname[48];
  snprintf(name, sizeof name, "ckpt-%012lld", (long long)ls->step);
  snprintf(tname, sizeof tname, ".%s.tmp", name);
  if (ag__make_dirs(dir))
    return ag__fail(AG_ERR_IO, "%s: cannot create the checkpoint directory %s: %s", fn, dir, strerror(errno));
  char *final = join(dir, name), *tmp = join(dir, tname), *agent = tmp ? join(tmp, "agent.agrl") : NULL;
  ag_status s = AG_OK;
  if (!final || !tmp || !agent) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  struct stat st;
  if (!s && stat(final, &st) == 0) goto done; /* this step's checkpoint is there already */
  if (!s && (remove_tree(tmp, 4) || mkdir(tmp, 0777)))
    s = ag__fail(AG_ERR_IO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
  if (!s) s = record_run(l, env, ls, obs, fn);
  if (!s) s = l->ops->save(l->agent, agent);
  if (!s && o->on_checkpoint) s = o->on_checkpoint(tmp, ls->step, o->user);
  if (!s) {
    sync_dir(tmp);
    if (rename(tmp, final))
      s = ag__fail(AG_ERR_IO, "%s: cannot rename %s to %s: %s", fn, tmp, final, strerror(errno));
  }
  if (s) {
    char why[1024];
    snprintf(why, sizeof why, "%s", ag_last_error());
    remove_tree(tmp, 4);
    s = ag__fail(s, "%s (the checkpoint at step %lld is not written; earlier ones stay)", why,
                 (long long)ls->step);
    goto done;
  }
  sync_dir(dir);
  int64_t *steps = NULL;
  int k = 0;
  if (list_ckpts(dir, fn, &steps, &k) == AG_OK) /* pruning is best effort: the new one is safe */
    for (int i = o->keep; i < k; i++) {
      char old[40];
      snprintf(old, sizeof old, "ckpt-%012lld", (long long)steps[i]);
      char *p = join(dir, old);
      if (p) remove_tree(p, 4);
      free(p);
    }
  free(steps);
done:
  free(final);
  free(tmp);
  free(agent);
  return s;
}

ag_status ag_learn_latest(const char *dir, char *buf, size_t size, int64_t *step) {
  static const char fn[] = "ag_learn_latest";
  if (!dir || !buf || !size)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: dir and buf must be given, size > 0", fn);
  int64_t *steps = NULL;
  int k = 0;
  ag_status s = list_ckpts(dir, fn, &steps, &k);
  if (s) return s;
  if (!k) {
    free(steps);
    return ag__fail(AG_ERR_IO, "%s: %s holds no checkpoint (ckpt-NNNNNNNNNNNN)", fn, dir);
  }
  int64_t st = steps[0];
  free(steps);
  int w = snprintf(buf, size, "%s/ckpt-%012lld", dir, (long long)st);
  if (w < 0 || (size_t)w >= size)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "%s: the path of %s's newest checkpoint needs %d bytes", fn, dir,
                    w + 1);
  if (step) *step = st;
  return AG_OK;
}

ag_learn_opts ag_learn_defaults(void) {
  ag_learn_opts o;
  memset(&o, 0, sizeof o);
  o.keep = 3;
  return o;
}

ag_status ag__learn_check_opts(const ag_learn_opts *o, const char *fn) {
  if (o && (o->keep < 1 || o->checkpoint_every < 0 || o->eval_every < 0))
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: keep = %d must be >= 1, checkpoint_every = %lld and eval_every = %lld >= 0", fn,
                    o->keep, (long long)o->checkpoint_every, (long long)o->eval_every);
  return AG_OK;
}

/* What follows every step of a loop with opts: the evaluation that is due
 * (its stop request in *enough), should_stop (in *halt, and opts->stopped),
 * and the checkpoint that is due (in a new directory of checkpoint_dir,
 * pruned to `keep`). */
static ag_status step_end(const learner *l, ag_vec_env *env, ag_learn_opts *o, ag__loop *ls, const float *obs,
                          int *enough, int *halt) {
  *enough = *halt = 0;
  ag_status s = AG_OK;
  if (l->ops->has_eval(o) && o->eval_every && ls->step - ls->last_eval >= o->eval_every) {
    ls->last_eval = ls->step;
    if ((s = l->ops->eval(l->agent, o, ls->step, enough))) return s;
  }
  *halt = o->should_stop && o->should_stop(o->user);
  if (o->checkpoint_dir &&
      (*halt || (o->checkpoint_every && ls->step - ls->last_ckpt >= o->checkpoint_every))) {
    ls->last_ckpt = ls->step;
    if ((s = write_checkpoint(l, env, o, ls, obs))) return s;
  }
  if (*halt) o->stopped = 1;
  return AG_OK;
}

/* ---- the loop ---- */

ag_status ag__learn(const ag__agent_ops *ops, void *agent, ag_vec_env *env, int64_t total_steps,
                    ag_learn_opts *o, ag_train_callback cb, void *user) {
  const char *fn = ops->learn_fn;
  const learner me = {ops, agent};
  ag_dist *g = ops->dist(agent);
  if (o) o->stopped = 0;
  const int n = ag_vec_env_size(env), od = ag_vec_env_get_spec(env)->obs_dim;
  const int64_t group = g ? ag_dist_world(g) : 1; /* steps count over the group */
  const size_t no = (size_t)n * (size_t)od, na = (size_t)n * (size_t)ops->act_width(agent);
  ag_status s = AG_OK;
  float *obs = ag__malloc(sizeof(float) * no), *next = ag__malloc(sizeof(float) * no);
  float *fin = ag__malloc(sizeof(float) * no), *rew = ag__malloc(sizeof(float) * (size_t)n);
  float *act = ag__malloc(sizeof(float) * na);
  void *scratch = ops->scratch_per_copy ? ag__malloc(ops->scratch_per_copy * (size_t)n) : NULL;
  int *term = ag__malloc(sizeof(int) * (size_t)n), *trunc = ag__malloc(sizeof(int) * (size_t)n);
  if (!obs || !next || !fin || !rew || !act || (ops->scratch_per_copy && !scratch) || !term || !trunc)
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__loop ls;
  memset(&ls, 0, sizeof ls);
  if (ops->start) ops->start(&ls);
  if (!s) s = o && o->resume ? restore(&me, env, &ls, obs, ops->run_fn) : ag_vec_env_reset(env, obs);
  if (o) o->resumed_at = ls.step;
  /* In a group a stop requested by the callback waits for the next training
   * boundary, where the ranks agree on it: a rank that left alone would
   * leave the others waiting in the next all-reduce. */
  int stop = 0, want_stop = 0;
  ag_tensor *flag = NULL; /* in a group: what the ranks exchange at each boundary (group_boundary) */
  if (!s && g) s = ag_tensor_create(ops->ctx(agent), XCHG_ROWS, 1, AG_F32, NULL, &flag);
  while (!s && !stop && ls.step < total_steps) {
    if ((s = ops->act(agent, obs, n, ls.step, act, scratch))) break;
    if ((s = ag_vec_env_step(env, act, next, rew, term, trunc, fin))) break;
    if ((s = ops->store(agent, obs, act, scratch, rew, fin, term, trunc, n))) break;
    memcpy(obs, next, sizeof(float) * no);
    ls.step += n * group;
    ls.since_train += n * group;
    for (int i = 0; i < n; i++) { /* every episode of the step is reported, also after a stop request */
      if (!term[i] && !trunc[i]) continue;
      ag_episode_info info;
      if ((s = ag_vec_env_last_episode(env, i, &info))) break;
      ls.episodes++;
      double own = ag__recent_push(&ls.win, info.ret);
      if (!g) ls.mean = own; /* in a group: the group's mean, from the last boundary */
      ag_train_event ev;
      memset(&ev, 0, sizeof ev);
      ops->episode(agent, &ls, &ev);
      ev.kind = AG_TRAIN_EPISODE;
      ev.step = ls.step;
      ev.episodes = ls.episodes;
      ev.episode_return = info.ret;
      ev.episode_length = info.length;
      ev.truncated = info.truncated && !info.terminated;
      ev.mean_return = ls.mean;
      if (cb && cb(&ev, user)) want_stop = 1;
    }
    if (s) break;
    if (ops->tick && (s = ops->tick(agent, &ls, n * group))) break;
    if (ls.since_train >= ops->train_freq(agent)) {
      ls.since_train = 0;
      int phase = 0;
      ag_train_event ev;
      memset(&ev, 0, sizeof ev);
      if ((s = ops->train(agent, &ls, &phase, &ev))) break;
      /* the phase reports the group's mean of now; a stop it asks for is
       * agreed at the next boundary */
      if (flag && (s = group_boundary(&me, g, flag, &ls.win, want_stop, &stop, &ls.mean))) break;
      if (phase) {
        ev.kind = AG_TRAIN_PHASE;
        ev.step = ls.step;
        ev.episodes = ls.episodes;
        ev.mean_return = ls.mean;
        if (cb && cb(&ev, user)) want_stop = 1;
      }
    }
    if (!flag) stop = want_stop;
    if (!o) continue;
    int enough, halt;
    if ((s = step_end(&me, env, o, &ls, obs, &enough, &halt)) || halt) break;
    if (enough) stop = want_stop = 1;
  }
  if (o) o->step = ls.step;
  ag_tensor_free(flag);
  free(obs), free(next), free(fin), free(rew), free(act), free(scratch), free(term), free(trunc);
  return s;
}
