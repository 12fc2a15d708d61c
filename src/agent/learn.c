/* learn.c — the training loop of every agent (ag_dqn_learn_ex and
 * ag_ac_learn run it through their kind's ag__agent_ops), its evaluations,
 * stops, checkpoints and resumes: the loop's own state (counters, the last
 * 20 returns, the observations in hand, the environments' state) travels in
 * the agent's run state, so that one save of the agent (ag_dqn_save,
 * ag_ac_save) holds everything a resumed run needs. Nothing here knows a
 * kind of agent: the ops table gives its calls, names and run-state magic.
 *
 * The run state is an agrl container of kind "run" (docs/container.md) held
 * as the agent's run-state bytes: run.version 2, run.loop ("dqn": the
 * DQN's loop, "ac": SAC's and TD3's, which also keep the last PHASE event),
 * the counters, the last returns and the mean reported as typed keys, the
 * observations in hand as the f32 section obs [copies, obs_dim] and the
 * environments' state as the blob env_state. The packed record of 0.1.0
 * (AGRLRUN1, AGRLRUNA) is read into the same keys by agfile_legacy.c.
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
#include "replay/replay_internal.h" /* the container (base/agfile.h) */

enum { RUN_WINDOW = AG__RECENT };
#define RUN_PART ((size_t)1 << 20) /* the run state's part length */

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

ag_status ag__run_encode(const ag__loop *ls, const char *loop, int n, int od, const float *obs,
                         const void *env, size_t env_bytes, const char *fn, char **out, size_t *out_len) {
  const int ph = !strcmp(loop, "ac");
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "run");
  ag__agf_set_i64(&a, "run.version", 2);
  ag__agf_set_str(&a, "run.loop", ph ? "ac" : "dqn");
  ag__agf_set_i64(&a, "run.n_envs", n);
  ag__agf_set_i64(&a, "run.obs_dim", od);
  ag__agf_set_i64(&a, "run.step", ls->step);
  ag__agf_set_i64(&a, "run.episodes", ls->episodes);
  ag__agf_set_i64(&a, "run.since_train", ls->since_train);
  ag__agf_set_i64(&a, "run.since_target", ls->since_target);
  ag__agf_set_i64(&a, "run.returns_kept", ls->win.n);
  ag__agf_set_i64(&a, "run.returns_next", ls->win.next);
  ag__agf_set_f64s(&a, "run.returns", ls->win.r, RUN_WINDOW);
  ag__agf_set_f64(&a, "run.mean", ls->mean);
  ag__agf_set_i64(&a, "run.last_eval", ls->last_eval);
  if (ph) {
    const double losses[2] = {ls->losses[0], ls->losses[1]};
    ag__agf_set_i64(&a, "run.last_report", ls->last_report);
    ag__agf_set_f64s(&a, "run.losses", losses, 2);
  }
  const int64_t dims[2] = {n, od};
  ag__agf_add_tensor(&a, "obs", AG_F32, 2, dims, ag__agf_fill_host, (void *)obs);
  ag__agf_add_blob(&a, "env_state", env_bytes, ag__agf_fill_host, (void *)env);
  char *buf = NULL;
  size_t len = 0;
  ag_status s = AG_OK;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for the run state", fn);
  } else {
    s = ag__agf_write(&a, f, RUN_PART, fn, "the run state");
    if (fclose(f) && !s) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory for the run state", fn);
  }
  ag__agf_free(&a);
  if (s) {
    free(buf);
    return s;
  }
  *out = buf;
  *out_len = len;
  return AG_OK;
}

/* Records the loop's state in the agent's run state. */
static ag_status record_run(const learner *l, ag_vec_env *env, const ag__loop *ls, const float *obs,
                            const char *fn) {
  int n = ag_vec_env_size(env), od = ag_vec_env_get_spec(env)->obs_dim;
  size_t E = 0;
  ag_status s = ag_vec_env_state_size(env, &E);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the environments' state cannot be kept in a checkpoint: %s", fn, why);
  }
  unsigned char *es = ag__malloc(E ? E : 1);
  if (!es) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  char *buf = NULL;
  size_t len = 0;
  if (!(s = ag_vec_env_get_state(env, es, E)) &&
      !(s = ag__run_encode(ls, l->ops->run_phase ? "ac" : "dqn", n, od, obs, es, E, fn, &buf, &len)))
    s = l->ops->set_run_state(l->agent, buf, len);
  free(buf);
  free(es);
  return s;
}

/* The run state's sections into host memory: obs, then env_state. */
typedef struct run_dst {
  int obs, env;
  unsigned char *obs_at, *env_at;
} run_dst;

static ag_status run_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  const run_dst *d = user;
  if (sec == d->obs) memcpy(d->obs_at + off, buf, len);
  if (sec == d->env) memcpy(d->env_at + off, buf, len);
  return AG_OK;
}

/* An i64 key of the run state within lo..hi, or -1 with a message. */
static int run_i64(const ag__agf *a, const char *key, int64_t lo, int64_t hi, int64_t *v, const char *fn) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (!k || k->type != AG__AGF_I64 || k->v.i < lo || k->v.i > hi) {
    ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's %s is %s", fn, key,
             !k                       ? "missing"
             : k->type != AG__AGF_I64 ? "not an i64"
                                      : "out of range");
    return -1;
  }
  *v = k->v.i;
  return 0;
}

/* An f64 array key of the run state with n values, or NULL with a message. */
static const double *run_f64s(const ag__agf *a, const char *key, uint32_t n, const char *fn) {
  const ag__agf_key *k = ag__agf_key_find(a, key);
  if (k && k->type == AG__AGF_F64S && k->count == n) return k->data;
  ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's %s is %s", fn, key,
           !k ? "missing" : "not an array of the right length");
  return NULL;
}

/* The keys of a run state read into t (and lo, the "ac" loop's losses):
 * 0, or -1 with a message. */
static int run_keys(const ag__agf *a, int ph, int n, int od, ag__loop *t, const double **lo, const char *fn) {
  int64_t cn, cod, kept, next, lr = 0;
  const int64_t big = INT64_MAX / 2;
  const double *ret = NULL;
  if (run_i64(a, "run.n_envs", 1, INT32_MAX, &cn, fn) || run_i64(a, "run.obs_dim", 1, INT32_MAX, &cod, fn))
    return -1;
  if (cn != n || cod != od) {
    ag__fail(AG_ERR_INVALID_ARG,
             "%s: resume: the run had %lld copies of %lld observations; this vector has %d of %d", fn,
             (long long)cn, (long long)cod, n, od);
    return -1;
  }
  if (run_i64(a, "run.step", 0, big, &t->step, fn) || run_i64(a, "run.episodes", 0, big, &t->episodes, fn) ||
      run_i64(a, "run.since_train", 0, big, &t->since_train, fn) ||
      run_i64(a, "run.since_target", 0, ph ? 0 : big, &t->since_target, fn) ||
      run_i64(a, "run.returns_kept", 0, RUN_WINDOW, &kept, fn) ||
      run_i64(a, "run.returns_next", 0, RUN_WINDOW - 1, &next, fn) ||
      run_i64(a, "run.last_eval", 0, big, &t->last_eval, fn) ||
      (ph && run_i64(a, "run.last_report", -big, big, &lr, fn)) ||
      !(ret = run_f64s(a, "run.returns", RUN_WINDOW, fn)) ||
      (ph && !(*lo = run_f64s(a, "run.losses", 2, fn))))
    return -1;
  const ag__agf_key *mean = ag__agf_key_find(a, "run.mean");
  if (!mean || mean->type != AG__AGF_F64) {
    ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's run.mean is %s", fn,
             mean ? "not an f64" : "missing");
    return -1;
  }
  /* the ring fills from slot 0: until it is full, the next slot is the count */
  if (t->last_eval > t->step || lr > t->step || (kept < RUN_WINDOW && next != kept)) {
    ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state's counters are out of range", fn);
    return -1;
  }
  t->win.n = (int)kept;
  t->win.next = (int)next;
  for (int i = 0; i < RUN_WINDOW; i++) t->win.r[i] = ret[i];
  t->mean = mean->v.f;
  t->last_report = lr;
  return 0;
}

ag_status ag__run_parse(const void *b, size_t len, const char *loop, int n, int od, size_t E, const char *fn,
                        ag__run_state *out) {
  const int ph = !strcmp(loop, "ac");
  ag__agf a;
  ag__agf_init(&a);
  FILE *f = b && len ? fmemopen((void *)b, len, "rb") : NULL;
  ag_status s = f ? ag__agf_read(&a, f, len, fn, "the run state") : AG_ERR_STATE;
  const ag__agf_key *kind = s ? NULL : ag__agf_key_find(&a, "kind");
  const ag__agf_key *lk = s ? NULL : ag__agf_key_find(&a, "run.loop");
  if (s || !kind || kind->type != AG__AGF_STR || strcmp(kind->data, "run") || !lk ||
      lk->type != AG__AGF_STR || strcmp(lk->data, loop)) {
    if (f) fclose(f);
    ag__agf_free(&a);
    return ag__fail(AG_ERR_STATE, "%s: resume: the bytes are no run state of the %s loop", fn, loop);
  }
  ag__loop t;
  memset(&t, 0, sizeof t);
  const double *lo = NULL;
  int bad = run_keys(&a, ph, n, od, &t, &lo, fn);
  run_dst d = {ag__agf_section_find(&a, "obs"), ag__agf_section_find(&a, "env_state"), NULL, NULL};
  const size_t no = (size_t)n * (size_t)od * 4;
  if (!bad && (d.obs < 0 || d.env < 0 || a.n_sections != 2 || a.sections[d.obs].kind != AG__AGF_TENSOR ||
               a.sections[d.obs].dtype != AG_F32 || a.sections[d.obs].bytes != (uint64_t)no ||
               a.sections[d.env].kind != AG__AGF_BLOB || a.sections[d.env].bytes != (uint64_t)E)) {
    ag__fail(AG_ERR_INVALID_ARG,
             "%s: resume: the run state's sections are not obs [%d, %d] and env_state of %zu bytes", fn, n,
             od, E);
    bad = 1;
  }
  if (bad) {
    fclose(f);
    ag__agf_free(&a);
    return AG_ERR_INVALID_ARG;
  }
  t.losses[0] = ph ? (float)lo[0] : 0.0f;
  t.losses[1] = ph ? (float)lo[1] : 0.0f;
  t.last_ckpt = t.step;
  d.obs_at = ag__malloc(no);
  d.env_at = ag__malloc(E ? E : 1);
  s = d.obs_at && d.env_at ? ag__agf_stream(&a, f, run_take, &d, fn, "the run state")
                           : ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  fclose(f);
  ag__agf_free(&a);
  if (s && s != AG_ERR_OUT_OF_MEMORY) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(AG_ERR_INVALID_ARG, "%s: resume: the run state cannot be read: %s", fn, why);
  }
  if (s) {
    free(d.obs_at);
    free(d.env_at);
    return s;
  }
  out->loop = t;
  out->obs = (float *)(void *)d.obs_at;
  out->env = d.env_at;
  out->env_bytes = E;
  return AG_OK;
}

void ag__run_state_free(ag__run_state *r) {
  if (!r) return;
  free(r->obs);
  free(r->env);
  r->obs = NULL;
  r->env = NULL;
}

/* The loop's state, the observations in hand (n x obs_dim) and env's state
 * from the agent's run state (ag_learn_opts.resume), in either layout;
 * nothing changes unless all of it is sound (AG_ERR_INVALID_ARG naming fn). */
static ag_status restore(const learner *l, ag_vec_env *env, ag__loop *ls, float *obs, const char *fn) {
  const ag__agent_ops *ops = l->ops;
  size_t len = 0, E = 0;
  const unsigned char *b = ops->run_state(l->agent, &len);
  const int n = ag_vec_env_size(env), od = ag_vec_env_get_spec(env)->obs_dim;
  ag_status s = ag_vec_env_state_size(env, &E);
  if (s) return s;
  ag__run_state r;
  s = ag__run_parse(b, len, ops->run_phase ? "ac" : "dqn", n, od, E, fn, &r);
  if (s == AG_ERR_STATE)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: resume: the %s holds no run state of %s (load a checkpoint's agent.agrl with %s)",
                    fn, ops->noun, ops->run_fn, ops->load_fn);
  if (s) return s;
  s = ag_vec_env_set_state(env, r.env, r.env_bytes);
  if (!s) {
    memcpy(obs, r.obs, (size_t)n * (size_t)od * 4);
    *ls = r.loop;
  }
  ag__run_state_free(&r);
  return s;
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
