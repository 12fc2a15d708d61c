/* agt.c — the shared test runner (see agt.h). */
#include "agt.h"
#include "base/backend.h"
#include "base/per_tree.h"
#include "replay/replay_internal.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

ag_device_kind agt_kind = AG_DEVICE_CPU;

/* Whether a run on `kind` goes ahead: -1 yes; else the exit status (77
 * skipped, 1 failed when the variable `require` is 1 and no device is there). */
static int device_there(ag_device_kind kind, const char *group, const char *dev, const char *require,
                        const char *what, size_t n) {
  if (ag_device_count(kind) > 0) return -1;
  const char *req = getenv(require);
  if (req && strcmp(req, "1") == 0) {
    fprintf(stderr, "%s.%s: FAILED: %s=1 but no %s is present\n", group, dev, require, what);
    return 1;
  }
  printf("%s.%s: SKIPPED: no %s present (%zu tests not run)\n", group, dev, what, n);
  return 77;
}

int agt_run(int argc, char **argv, const char *group, const struct CMUnitTest *tests, size_t n) {
  const char *dev = argc > 1 ? argv[1] : "cpu";
  int there = -1;
  if (strcmp(dev, "cpu") == 0) {
    agt_kind = AG_DEVICE_CPU;
  } else if (strcmp(dev, "cuda") == 0) {
    agt_kind = AG_DEVICE_CUDA;
    there = device_there(AG_DEVICE_CUDA, group, dev, "AGRL_REQUIRE_GPU", "CUDA device", n);
  } else if (strcmp(dev, "vulkan") == 0) {
    agt_kind = AG_DEVICE_VULKAN;
    setenv("AGRL_VK_VALIDATION", "1", 0); /* the Khronos layer checks every call, where installed */
    there = device_there(AG_DEVICE_VULKAN, group, dev, "AGRL_REQUIRE_VULKAN", "usable Vulkan device", n);
  } else {
    fprintf(stderr, "usage: %s cpu|cuda|vulkan [TEST-NAME-PATTERN]\n", argv[0]);
    return 2;
  }
  if (there >= 0) return there;
  if (argc > 2) cmocka_set_test_filter(argv[2]); /* e.g. under a slow sanitizer: one test */
  char name[128];
  snprintf(name, sizeof name, "%s.%s", group, dev);
  int r = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
  if (agt_kind == AG_DEVICE_VULKAN) { /* the validation layer must have found nothing */
    char last[512];
    int states = 0;
    const int errors = ag__vulkan_validation_total(&states, last, sizeof last);
    printf("%s: validation layer over %d device states: %d errors\n", name, states, errors);
    if (errors) {
      fprintf(stderr, "%s: FAILED: the validation layer reported %d errors; the last: %s\n", name, errors,
              last);
      r = r ? r : 1;
    }
  }
  return r;
}

ag_ctx *agt_ctx(void) {
  ag_ctx *ctx = NULL;
  agt_ok(ag_ctx_create(&ctx, agt_kind, 0));
  return ctx;
}

float *agt_read_f32(const ag_tensor *t) {
  size_t n = (size_t)ag_tensor_numel(t);
  float *v = malloc(n * sizeof *v);
  assert_non_null(v);
  agt_ok(ag_tensor_read(t, v, n * sizeof *v));
  return v;
}

double *agt_per_tree(ag_per *per, const double **leaves) {
  size_t nt = (size_t)ag_tensor_numel(ag__per_tree(per));
  double *tree = malloc(nt * sizeof *tree);
  assert_non_null(tree);
  agt_ok(ag_tensor_read(ag__per_tree(per), tree, nt * sizeof *tree));
  *leaves = tree + ag__per_offset(ag__per_depth(per) - 1);
  return tree;
}

ag_dqn_config agt_dqn_config(int64_t hidden, int64_t batch, int64_t buffer, uint64_t seed, int fused) {
  ag_dqn_config c = ag_dqn_defaults();
  c.n_hidden = 1;
  c.hidden[0] = hidden;
  c.batch_size = batch;
  c.buffer_size = buffer;
  c.learning_starts = 0;
  c.seed = seed;
  c.fused = fused;
  c.n_step = 1; /* the one-step target (the fused kernel's) unless a test asks */
  return c;
}

unsigned char *agt_slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

void agt_spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

uint64_t agt_live_bytes(ag_ctx *ctx) {
  ag_ctx_stats st;
  ag_ctx_get_stats(ctx, &st);
  return st.live_bytes;
}

int agt_record(const ag_train_event *ev, void *user) {
  agt_events *e = user;
  assert_true(e->n < (int)(sizeof e->ev / sizeof e->ev[0]));
  ag_train_event *c = &e->ev[e->n++];
  memset(c, 0, sizeof *c); /* the padding too */
  c->kind = ev->kind, c->step = ev->step, c->episodes = ev->episodes, c->updates = ev->updates;
  c->episode_return = ev->episode_return, c->episode_length = ev->episode_length,
  c->truncated = ev->truncated;
  c->mean_return = ev->mean_return, c->loss = ev->loss, c->epsilon = ev->epsilon;
  c->actor_loss = ev->actor_loss, c->alpha = ev->alpha;
  return 0;
}

int agt_stop_later(void *user) {
  agt_events *e = user;
  return ++e->polls > e->stop_after;
}

void agt_assert_same_events_from(const agt_events *want, const agt_events *got, int64_t step) {
  int i = 0;
  while (i < want->n && want->ev[i].step <= step) i++;
  assert_int_equal(want->n - i, got->n);
  for (int k = 0; k < got->n; k++)
    if (memcmp(&want->ev[i + k], &got->ev[k], sizeof got->ev[k]))
      fail_msg("event %d (step %lld) differs from the uninterrupted run's", k, (long long)got->ev[k].step);
}

void agt_clear_dir(const char *d, int depth) {
  DIR *dd = opendir(d);
  if (!dd) return;
  for (struct dirent *e; (e = readdir(dd));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth > 0) {
      agt_clear_dir(p, depth - 1);
      rmdir(p);
    } else
      unlink(p);
  }
  closedir(dd);
}

const char *agt_kind_name(void) {
  return agt_kind == AG_DEVICE_CUDA ? "cuda" : agt_kind == AG_DEVICE_VULKAN ? "vulkan" : "cpu";
}

int agt_fused_dqn(void) { return agt_kind != AG_DEVICE_VULKAN; }
